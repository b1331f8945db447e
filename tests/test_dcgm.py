"""DCGM GPU metrics: the real scrapes in ../shared/traces/dcgm, generated time series in every
layout, rank matching by host and GPU beside nsys traces, and the HFU estimate shown beside the
other sources.

Expected values of the real files were read by hand from the files themselves (the line quoted in
each comment); those of generated series come from the generator's own ground truth
(synth.dcgm.samples), which the reader never sees.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TRACES, requires_shared

from nsight_analyze import mfu
from nsight_analyze.ingest.run import ingest
from nsight_analyze.sources import dcgm, dcgm_formats, registry
from nsight_analyze.sources.base import BadInput
from nsight_analyze.store.workspace import open_workspace
from nsight_analyze.synth import dcgm as synth_dcgm

DCGM = TRACES / "dcgm"
T4 = DCGM / "cncf-k8s-ai-conformance" / "t4_cp-bm14r7.prom"
H100X8 = DCGM / "nvidia-aicr" / "h100x8_gpu-node-1.prom"
A100_MIG = DCGM / "nvidia-cloud-native-docs" / "a100-mig_ub20-a100-k8s.prom"
DMON = DCGM / "nvidia-gcp-samples" / "t4_triton_dcgmi-dmon.txt"
AICR_MD = DCGM / "nvidia-aicr" / "accelerator-metrics.md"
CLI = [sys.executable, "-m", "nsight_analyze"]


def _ws(tmp_path: Path, *paths: Path):
    db = tmp_path / "ws.duckdb"
    report = ingest(list(paths), db)
    assert not report.failed, [o.message for o in report.outcomes]
    return open_workspace(db), report


def _value(con, file_id: int, metric: str, gpu: int = 0, instance: str | None = None) -> float:
    rows = con.execute(
        "SELECT value FROM gpu_metrics WHERE file_id = ? AND metric_name = ? AND gpu_id = ? "
        "AND gpu_instance IS NOT DISTINCT FROM ?",
        [file_id, metric, gpu, instance],
    ).fetchall()
    assert len(rows) == 1, (metric, gpu, instance, rows)
    return rows[0][0]


# --------------------------------------------------------------------------- real scrapes


@requires_shared
def test_every_real_dcgm_file_is_recognised_and_nothing_else() -> None:
    # the folder holds 4 capture files and 4 original documents (README "DCGM captures")
    found = {p.name for p in DCGM.rglob("*") if p.is_file() and registry.source_for(p) is dcgm}
    assert found == {T4.name, H100X8.name, A100_MIG.name, DMON.name}


@requires_shared
def test_t4_scrape(tmp_path: Path) -> None:
    con, _ = _ws(tmp_path, T4)
    # 20 sample lines, every one for gpu="0", UUID GPU-6d5c0ac5-..., Hostname cp-bm14r7, Tesla T4
    ident = con.execute(
        "SELECT count(*), count(DISTINCT gpu_uuid), any_value(gpu_uuid), any_value(host), "
        "any_value(gpu_name), any_value(source), count(DISTINCT metric_name) FROM gpu_metrics"
    ).fetchone()
    assert ident == (20, 1, "GPU-6d5c0ac5-74d7-3130-46f1-e93ed57f469a", "cp-bm14r7", "Tesla T4", "dcgm", 20)
    assert _value(con, 1, "DCGM_FI_DEV_GPU_UTIL") == 91  # "... DCGM_FI_DEV_GPU_UTIL{...} 91"
    assert _value(con, 1, "DCGM_FI_PROF_GR_ENGINE_ACTIVE") == 0.156205
    assert _value(con, 1, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE") == 0.005822
    assert _value(con, 1, "DCGM_FI_PROF_DRAM_ACTIVE") == 0.092781
    assert _value(con, 1, "DCGM_FI_DEV_POWER_USAGE") == 68.244
    assert _value(con, 1, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION") == 15152422938
    labels = con.execute(
        "SELECT labels['DCGM_FI_DRIVER_VERSION'], labels['pci_bus_id'], labels['device'] FROM gpu_metrics "
        "WHERE metric_name = 'DCGM_FI_DEV_SM_CLOCK'"
    ).fetchone()
    assert labels == ("590.48.01", "00000000:37:00.0", "nvidia0")
    # the view: PROF ratios become percent, DEV utilisation already is
    pct = dict(
        con.execute(
            "SELECT metric, pct FROM gpu_metric_samples WHERE metric IN ('tensor_active', 'gpu_util')"
        ).fetchall()
    )
    assert pct["tensor_active"] == pytest.approx(0.5822)
    assert pct["gpu_util"] == 91
    # one snapshot without a time stamp: one scrape, no wall-clock time
    assert con.execute("SELECT count(DISTINCT sample), count(utc_ns) FROM gpu_metrics").fetchone() == (1, 0)


@requires_shared
def test_h100x8_scrape(tmp_path: Path) -> None:
    con, _ = _ws(tmp_path, H100X8)
    # 8 GPUs on gpu-node-1: TEMP, POWER, GPU_UTIL for all 8 (24 lines), MEM_COPY_UTIL for 0-5 (6 lines)
    gpus = con.execute(
        "SELECT count(DISTINCT gpu_uuid), count(DISTINCT gpu_id), count(DISTINCT host), count(*) "
        "FROM gpu_metrics"
    ).fetchone()
    assert gpus == (8, 8, 1, 30)
    per_metric = dict(con.execute("SELECT metric_name, count(*) FROM gpu_metrics GROUP BY 1").fetchall())
    assert per_metric == {
        "DCGM_FI_DEV_GPU_TEMP": 8,
        "DCGM_FI_DEV_POWER_USAGE": 8,
        "DCGM_FI_DEV_GPU_UTIL": 8,
        "DCGM_FI_DEV_MEM_COPY_UTIL": 6,
    }
    assert _value(con, 1, "DCGM_FI_DEV_POWER_USAGE", gpu=0) == 113.611  # gpu="0" ... 113.611000
    assert _value(con, 1, "DCGM_FI_DEV_POWER_USAGE", gpu=7) == 66.997  # gpu="7" ... 66.997000
    assert _value(con, 1, "DCGM_FI_DEV_GPU_TEMP", gpu=1) == 29  # gpu="1" ... 29
    uuid7 = con.execute("SELECT DISTINCT gpu_uuid FROM gpu_metrics WHERE gpu_id = 7").fetchone()[0]
    assert uuid7 == "GPU-04d228d3-3b5a-3534-f5cf-969706647d56"
    # GPU 0 carries the vLLM pod's k8s labels (pod_uid is present but empty)
    pod = con.execute(
        "SELECT DISTINCT labels['pod'], labels['namespace'], labels['pod_uid'] FROM gpu_metrics "
        "WHERE gpu_id = 0"
    ).fetchall()
    assert pod == [("vllm-agg-0-vllmdecodeworker-s65j5", "dynamo-workload", "")]
    assert con.execute("SELECT DISTINCT gpu_name FROM gpu_metrics").fetchall() == [("NVIDIA H100 80GB HBM3",)]


@requires_shared
def test_a100_mig_scrape(tmp_path: Path) -> None:
    con, _ = _ws(tmp_path, A100_MIG)
    # 17 lines of the whole GPU, 4 of MIG instance GPU_I_ID="13" (GPU_I_PROFILE="1g.5gb"); no modelName
    rows = con.execute(
        "SELECT gpu_instance, count(*), count(DISTINCT gpu_uuid), any_value(labels['GPU_I_PROFILE']) "
        "FROM gpu_metrics GROUP BY 1 ORDER BY 1 NULLS FIRST"
    ).fetchall()
    assert rows == [(None, 17, 1, None), ("13", 4, 1, "1g.5gb")]
    assert con.execute("SELECT count(gpu_name) FROM gpu_metrics").fetchone()[0] == 0
    assert _value(con, 1, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE") == 0.929260
    assert _value(con, 1, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", instance="13") == 0.930433
    assert _value(con, 1, "DCGM_FI_PROF_DRAM_ACTIVE", instance="13") == 0.800339
    assert _value(con, 1, "DCGM_FI_DEV_POWER_USAGE") == 409.692
    fb = _value(con, 1, "DCGM_FI_DEV_FB_FREE") + _value(con, 1, "DCGM_FI_DEV_FB_USED")
    assert fb == 40535  # README: FB_FREE + FB_USED = 40535 MiB (35690 + 4845)
    assert con.execute(
        "SELECT count(*) FROM gpu_metrics WHERE metric_name = 'DCGM_FI_PROF_SM_ACTIVE'"
    ).fetchone()[0] == 0  # fmt: skip


@requires_shared
def test_dmon_tables(tmp_path: Path) -> None:
    con, report = _ws(tmp_path, DMON)
    # 3 runs x 3 rows of 8 columns for entity "GPU 2"
    assert con.execute(
        "SELECT count(*), count(DISTINCT sample), count(DISTINCT labels['run']), min(gpu_id), max(gpu_id), "
        "count(host), count(gpu_uuid) FROM gpu_metrics"
    ).fetchone() == (72, 9, 3, 2, 2, 0, 0)  # fmt: skip
    first = dict(
        con.execute("SELECT metric_name, value FROM gpu_metrics WHERE sample = 0").fetchall()
    )  # "GPU 2  79  43  0.382  0.652  0.206  0.267  273834455  2258816847"
    assert first == {
        "DCGM_FI_DEV_GPU_UTIL": 79,
        "DCGM_FI_DEV_MEM_COPY_UTIL": 43,
        "DCGM_FI_PROF_DRAM_ACTIVE": 0.382,
        "DCGM_FI_PROF_SM_ACTIVE": 0.652,
        "DCGM_FI_PROF_SM_OCCUPANCY": 0.206,
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 0.267,
        "DCGM_FI_PROF_PCIE_TX_BYTES": 273834455,
        "DCGM_FI_PROF_PCIE_RX_BYTES": 2258816847,
    }
    last = dict(con.execute("SELECT metric_name, value FROM gpu_metrics WHERE sample = 8").fetchall())
    assert last["DCGM_FI_PROF_SM_ACTIVE"] == 0.995 and last["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"] == 0.546
    # README: SMACT 0.55-0.995, TENSO 0.23-0.55 (the file: 0.553 .. 0.995 and 0.227 .. 0.546)
    span = con.execute(
        "SELECT min(value), max(value) FROM gpu_metrics WHERE metric_name = 'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE'"
    ).fetchone()
    assert span == (0.227, 0.546)
    (warnings,) = con.execute("SELECT warnings FROM files").fetchone()
    assert any(
        "matched to ranks by GPU index only while the workspace's ranks run on one host" in w
        for w in warnings
    )


@requires_shared
def test_prometheus_query_json_from_the_aicr_document(tmp_path: Path) -> None:
    # the first JSON answer of accelerator-metrics.md: DCGM_FI_DEV_GPU_UTIL of 8 GPUs on each of
    # gpu-node-1 and gpu-node-2, every value "0" at 1773114089.184
    text = AICR_MD.read_text()
    start = text.index("```", text.index("**GPU Utilization (DCGM_FI_DEV_GPU_UTIL)**")) + 3
    path = tmp_path / "gpu_util_query.json"
    path.write_text(text[start : text.index("```", start)])
    con, _ = _ws(tmp_path, path)
    assert con.execute("SELECT DISTINCT source_format FROM files").fetchone()[0] == "dcgm-json"
    stats = con.execute(
        "SELECT count(*), count(DISTINCT host), count(DISTINCT gpu_uuid), min(utc_ns), max(utc_ns), "
        "max(value), count(DISTINCT metric_name) FROM gpu_metrics"
    ).fetchone()
    assert stats == (16, 2, 16, 1_773_114_089_184_000_000, 1_773_114_089_184_000_000, 0.0, 1)
    uuid = con.execute(
        "SELECT gpu_uuid FROM gpu_metrics WHERE host = 'gpu-node-1' AND gpu_id = 1"
    ).fetchone()[0]
    assert uuid == "GPU-bc5610b9-79c8-fedd-8899-07539c7f868a"  # the same GPU as in the .prom scrape


@requires_shared
def test_info_lists_dcgm_files_and_sample_counts(tmp_path: Path) -> None:
    from nsight_analyze.store.workspace_info import workspace_info

    con, _ = _ws(tmp_path, DCGM)
    rows = {Path(r["path"]).name: r for r in workspace_info(con)["gpu_metric_files"]}
    # per file: GPUs / samples / scrapes as counted by hand in the tests above
    assert {n: (r["format"], r["gpus"], r["samples"], r["scrapes"]) for n, r in rows.items()} == {
        T4.name: ("dcgm-prom", 1, 20, 1),
        H100X8.name: ("dcgm-prom", 8, 30, 1),
        A100_MIG.name: ("dcgm-prom", 1, 21, 1),
        DMON.name: ("dcgm-dmon", 1, 72, 9),
    }
    assert rows[A100_MIG.name]["mig_instances"] == 1


@requires_shared
def test_hfu_estimate_per_gpu_without_traces(tmp_path: Path) -> None:
    con, _ = _ws(tmp_path, T4, A100_MIG)
    out = mfu.dcgm_summary(con, mfu.hfu_table(con), precision="fp16")
    by = {(g["host"], g["gpu_instance"]): g for g in out["gpus"]}
    t4 = by[("cp-bm14r7", None)]
    # T4: tensor 0.005822 at SM clock 660 MHz (the scrape) against the T4's 1590 MHz boost clock and
    # 65 dense fp16 TFLOP/s (data/gpus.csv)
    assert t4["hfu_estimate"] == pytest.approx(0.005822 * 660 / 1590)
    assert t4["estimated_tflops"] == pytest.approx(0.005822 * 660 / 1590 * 65)
    a100 = by[("ub20-a100-k8s", None)]
    assert a100["peak_tflops"] is None  # no modelName: no peak, but the activity-based estimate stands
    assert a100["tensor_active"] == 0.929260
    assert by[("ub20-a100-k8s", "13")]["estimated_tflops"] is None  # a MIG slice has no whole-GPU peak
    assert any("estimate" in line for line in out["lines"])
    # the default precision (bf16): a T4 (Turing) has no BF16 tensor cores, so the estimate uses its
    # dense FP16 tensor peak, 65 (gpu-peaks.md §2.1 "65 (FP16, no BF16)"), and says fp16, not bf16
    default = mfu.dcgm_summary(con, mfu.hfu_table(con))
    t4 = next(g for g in default["gpus"] if g["host"] == "cp-bm14r7")
    assert t4["peak_precision"] == "fp16" and t4["peak_tflops"] == 65
    (line,) = [x for x in default["lines"] if x.startswith("DCGM cp-bm14r7 GPU 0")]
    assert "of 65 dense fp16 TFLOP/s" in line and "bf16" not in line


# --------------------------------------------------------------------------- malformed input


GOOD_SCRAPE = 'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-1",Hostname="n1"} 91\n'


@pytest.mark.parametrize("with_good", [False, True], ids=["bad-only", "bad-and-good"])
@pytest.mark.parametrize("flags", [[], ["-q"]], ids=["progress", "quiet"])
def test_malformed_scrape_fails_in_one_line_with_nonzero_exit(
    tmp_path: Path, flags: list[str], with_good: bool
) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    bad = folder / "bad.prom"
    bad.write_text(
        GOOD_SCRAPE + 'DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-1",Hostname="n1"} 68.2\n'
        'DCGM_FI_DEV_SM_CLOCK{gpu="0",UUID="GPU-1",Hostname="n1" 660\n'  # line 3: no closing brace
    )
    if with_good:
        (folder / "good.prom").write_text(GOOD_SCRAPE)
    proc = subprocess.run(
        [*CLI, "ingest", str(folder), "--db", str(tmp_path / "ws.duckdb"), *flags],
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out  # 1: a file failed (the ingest command's docstring)
    assert "Traceback" not in out
    # the file is named once in all the output (the progress line and the closing summary used to
    # both print it), in one line with the reason
    lines = [line for line in out.splitlines() if str(bad) in line]
    assert lines == [lines[0]] and lines[0].startswith(f"failed: {bad}: line 3: not Prometheus text"), out
    assert out.count(str(bad)) == 1, out
    if with_good:  # the good scrape is loaded and its line is not an error
        assert f"workspace {tmp_path / 'ws.duckdb'}: 1 file(s) ingested" in proc.stdout, out
        assert not any(line.startswith("failed:") and "good.prom" in line for line in out.splitlines())
    report = ingest([bad], tmp_path / "api.duckdb")
    (outcome,) = report.outcomes
    assert (
        outcome.status == "failed" and "\n" not in outcome.message and outcome.message.startswith("line 3:")
    )


def test_malformed_dmon_row_and_json_are_bad_input(tmp_path: Path) -> None:
    dmon_file = tmp_path / "d.txt"
    dmon_file.write_text("# Entity  GPUTL  SMACT\n    GPU 0   10  0.5\n    GPU 0   10\n")
    with pytest.raises(BadInput, match="line 3: 1 values for 2 columns"):
        dcgm_formats.read(dmon_file, dcgm_formats.FORMAT_DMON)
    js = tmp_path / "q.json"
    js.write_text(
        '{"status": "success", "data": {"resultType": "scalar", "result": [1, "2"]}, "x": "DCGM_FI_"}'
    )
    with pytest.raises(BadInput, match="resultType 'scalar'"):
        dcgm_formats.read(js, dcgm_formats.FORMAT_JSON)


def test_samples_not_stored_are_counted(tmp_path: Path) -> None:
    path = tmp_path / "mixed.prom"
    path.write_text(
        "# HELP go_goroutines Number of goroutines.\n# TYPE go_goroutines gauge\ngo_goroutines 12\n"
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-1",Hostname="n1"} 91\n'
        'DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-2",Hostname="n1"} NaN\n'
        "DCGM_FI_DEV_GPU_UTIL 5\n"
    )
    con, _ = _ws(tmp_path, path)
    assert con.execute("SELECT count(*) FROM gpu_metrics").fetchone()[0] == 1
    (skipped,) = con.execute("SELECT skipped FROM files").fetchone()
    text = "; ".join(skipped)
    assert "1 samples of metrics that are not DCGM fields: go_goroutines" in text
    assert "1 samples without a finite value" in text
    assert "1 samples without a GPU label" in text


# --------------------------------------------------------------------------- generated series

GPUS = [
    synth_dcgm.DcgmGpu(
        "node-a", 0, "GPU-aaaaaaaa-0000-0000-0000-000000000000", pci_bus_id="00000000:18:00.0"
    ),
    synth_dcgm.DcgmGpu(
        "node-a", 1, "GPU-aaaaaaaa-0000-0000-0000-000000000001", pci_bus_id="00000000:2A:00.0"
    ),
    synth_dcgm.DcgmGpu("node-b", 0, "GPU-bbbbbbbb-0000-0000-0000-000000000000"),
]


@pytest.mark.parametrize("fmt", ["prom", "prom-ts", "prom-untimed", "json", "dmon"])
def test_generated_series_round_trip(tmp_path: Path, fmt: str) -> None:
    metrics = dict(synth_dcgm.DEFAULT_METRICS, DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION=1.5e9)
    if fmt == "dmon":  # dcgmi dmon names no energy column, and prints no host: one host's GPUs
        metrics.pop("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")
    gpus = GPUS[:2] if fmt == "dmon" else GPUS
    truth = synth_dcgm.samples(gpus, interval_ns=250_000_000, count=6, metrics=metrics)
    path = synth_dcgm.write(tmp_path / f"series.{'json' if fmt == 'json' else 'prom'}", truth, fmt)
    assert dcgm.sniff(path)
    con, _ = _ws(tmp_path, path)
    got = con.execute(
        "SELECT sample, utc_ns, host, gpu_id, gpu_uuid, metric_name, value FROM gpu_metrics "
        "ORDER BY sample, host, gpu_id, metric_name"
    ).fetchall()
    timed = fmt != "prom-untimed"
    want = sorted(
        (
            s["sample"],
            s["utc_ns"] if timed else None,
            None if fmt == "dmon" else s["host"],
            s["gpu"],
            None if fmt == "dmon" else s["uuid"],
            s["metric"],
            s["value"],
        )
        for s in truth
    )
    assert sorted(got, key=lambda r: (r[0], r[2] or "", r[3], r[5])) == sorted(
        want, key=lambda r: (r[0], r[2] or "", r[3], r[5])
    )
    assert len(got) == 6 * len(gpus) * len(metrics)


def test_registry_suffixes_equal_the_reader() -> None:
    """The registry decides without importing the reader: its suffixes must be the reader's."""
    assert registry.DCGM_SUFFIXES == dcgm.SUFFIXES


def test_time_comments_and_iso_times() -> None:
    assert dcgm_formats.parse_time("2025-12-01T12:00:00.250Z") == synth_dcgm.UTC_BASE_NS + 250_000_000
    assert dcgm_formats.parse_time("1764590400") == synth_dcgm.UTC_BASE_NS  # epoch seconds
    assert dcgm_formats.parse_time("1764590400250") == synth_dcgm.UTC_BASE_NS + 250_000_000  # epoch ms
    assert dcgm_formats.parse_time("hello") is None


# --------------------------------------------------------------------------- ranks by host and GPU


def test_ingest_beside_nsys_traces_matches_ranks_by_host_and_gpu(tmp_path: Path) -> None:
    from nsight_analyze.synth import generate

    folder = tmp_path / "job"
    generate(folder, ranks=3, gpus_per_node=2, steps=3, workload="gemm", truth=False)
    # node00: ranks 0, 1 on GPUs 0, 1; node01: rank 2 on GPU 0, its GPU 1 idle (writer.rank_identity)
    truth = synth_dcgm.for_traces(folder, "prom", interval_ns=5_000_000)
    assert [(g["host"], g["gpu"]) for g in truth["gpus"]] == [
        ("h100-node00", 0), ("h100-node00", 1), ("h100-node01", 0), ("h100-node01", 1),
    ]  # fmt: skip
    # a scrape without UUID labels of node01 GPU 0: only host + GPU index can match it
    (folder / "no_uuid.prom").write_text(
        'DCGM_FI_PROF_SM_ACTIVE{gpu="0",Hostname="h100-node01.cluster.local"} 0.5\n'
    )
    db = tmp_path / "ws.duckdb"
    report = ingest([folder], db)
    assert not report.failed
    con = open_workspace(db)
    rows = con.execute(
        "SELECT host, gpu_id, gpu_uuid IS NULL, min(rank), max(rank), any_value(rank_match), count(*) "
        "FROM gpu_metrics GROUP BY ALL ORDER BY 1, 2, 3"
    ).fetchall()
    n = len(truth["samples"]) // 4  # samples per GPU
    assert rows == [
        ("h100-node00", 0, False, 0, 0, "uuid", n),
        ("h100-node00", 1, False, 1, 1, "uuid", n),
        ("h100-node01", 0, False, 2, 2, "uuid", n),
        ("h100-node01", 1, False, None, None, None, n),  # no rank ran on it
        ("h100-node01.cluster.local", 0, True, 2, 2, "host+gpu_index", 1),
    ]
    # matched samples are on the rank's file timeline: utc - the rank's session start
    off = con.execute(
        "SELECT count(*) FROM gpu_metrics g JOIN ranks r USING (rank) "
        "WHERE g.utc_ns IS NOT NULL AND g.timestamp_ns <> g.utc_ns - r.session_start_utc_ns"
    ).fetchone()[0]
    assert off == 0
    assert any("DCGM: 4 of 5 sampled GPUs matched" in note for note in report.notes), report.notes
    con.close()
    # reloading a rank's trace keeps the DCGM samples of its GPU (they belong to their own file)
    again = ingest([folder / "report_rank0.sqlite"], db, replace=True)
    assert not again.failed
    con = open_workspace(db)
    assert con.execute(
        "SELECT count(*), min(rank), any_value(rank_match) FROM gpu_metrics "
        "WHERE host = 'h100-node00' AND gpu_id = 0"
    ).fetchone() == (n, 0, "uuid")  # fmt: skip


def test_synth_cli_writes_dcgm_series(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from nsight_analyze.commands.synth import command

    out = tmp_path / "job"
    res = CliRunner().invoke(
        command,
        [
            str(out),
            "--ranks",
            "2",
            "--gpus-per-node",
            "2",
            "--steps",
            "2",
            "--workload",
            "gemm",
            "--dcgm",
            "prom-ts",
            "--dcgm-interval-ms",
            "50",
        ],  # fmt: skip
    )
    assert res.exit_code == 0, res.output
    path = out / "dcgm_h100-node00.prom"
    assert "DCGM samples of 2 GPUs (prom-ts)" in res.output and registry.source_for(path) is dcgm
    rows = dcgm_formats.read(path, dcgm_formats.FORMAT_PROM)
    assert rows.n > 0 and all(t is not None for t in rows.data["utc_ns"])


# --------------------------------------------------------------------------- two sources, one window


def _test_mfu():
    spec = importlib.util.spec_from_file_location(
        "_test_mfu_fixture", Path(__file__).with_name("test_mfu.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_nsys_dcgm_and_counted_flops_are_shown_side_by_side(tmp_path: Path) -> None:
    tm = _test_mfu()
    con = tm.build(tmp_path, with_metrics=True)  # 2 H100 ranks, nsys Tensor Active 40 % at 1830 MHz, ncu
    utc0 = 1_764_590_400_000_000_000
    con.execute(f"UPDATE ranks SET hostname = 'n0', session_start_utc_ns = {utc0}")
    con.execute("UPDATE gpus SET uuid = CASE rank WHEN 0 THEN 'aa-00' ELSE 'aa-01' END")
    gpu0 = synth_dcgm.DcgmGpu("n0", 0, "GPU-AA-00")
    metrics = {"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 0.38, "DCGM_FI_DEV_SM_CLOCK": 1830.0}
    # rank 0's GPU scraped every 0.5 ms from file time 1 ms (its steps are 2 ms long from 1 ms)
    truth = synth_dcgm.samples([gpu0], utc0 + 1_000_000, 500_000, 12, metrics)
    path = synth_dcgm.write_range_json(tmp_path / "dcgm.json", truth)
    con.execute("BEGIN")
    dcgm.load(con, path, 99, {}, dcgm.probe(path))
    con.execute("COMMIT")
    dcgm.match_ranks(con)
    tensor = [s for s in truth if s["metric"] == "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"]
    # the window [1 ms, 3 ms) holds the DCGM samples at 1.0, 1.5, 2.0, 2.5 ms
    inside = [s["value"] for s in tensor if s["utc_ns"] - utc0 < 3_000_000]
    assert len(inside) == 4
    given = tm.pd.DataFrame({"rank": [0], "step": [7], "start_ns": [1_000_000], "end_ns": [3_000_000]})
    row = mfu.hfu_table(con, window_df=given).iloc[0]
    mean = sum(inside) / 4
    assert row["tensor_active_pct"] == pytest.approx(40.0)  # nsys, as before
    assert row["dcgm_tensor_active_pct"] == pytest.approx(100 * mean)
    assert row["dcgm_over_nsys_tensor_active"] == pytest.approx(100 * mean / 40.0)
    # scaled by the mean SM clock in the window over 1830 MHz, the H100 spec's tensor clock (test_mfu)
    clock = [
        s["value"] for s in truth if s["metric"] == "DCGM_FI_DEV_SM_CLOCK" and s["utc_ns"] - utc0 < 3_000_000
    ]
    est = mean * (sum(clock) / 4) / 1830.0
    assert est == pytest.approx(mean * 1.03)  # clocks 1830 x (1, 1.02, 1.04, 1.06): value_at
    assert row["hfu_dcgm_estimate"] == pytest.approx(est)
    assert row["dcgm_estimated_flops"] == pytest.approx(est * 2e-3 * tm.PEAK)
    assert row["counted_flops"] == tm.PER_RANK_STEP  # the counters are still there, unchanged
    out = mfu.dcgm_summary(con, mfu.hfu_table(con, window_df=given))
    assert out["estimated_over_counted_flops"] == pytest.approx(est * 2e-3 * tm.PEAK / tm.PER_RANK_STEP)
    assert any("nsys 40.0%" in line and "DCGM/nsys" in line for line in out["lines"])
    assert any("DCGM estimate" in line and "counters" in line for line in out["lines"])
    # the live comparison view over the whole overlap of both sources' samples
    cmp = con.execute(
        "SELECT nsys_pct, dcgm_pct, dcgm_over_nsys, dcgm_samples FROM gpu_metric_compare "
        "WHERE rank = 0 AND metric = 'tensor_active'"
    ).fetchone()
    assert cmp[0] == pytest.approx(40.0)
    assert cmp[3] == 12  # all DCGM samples (1.0 .. 6.5 ms) lie inside the nsys samples' span (1 .. 7 ms)
    assert cmp[1] == pytest.approx(100 * sum(s["value"] for s in tensor) / 12)
    assert cmp[2] == pytest.approx(cmp[1] / 40.0)
    # rank 1's GPU (uuid aa-01) was not scraped: no comparison row for it
    assert con.execute("SELECT count(*) FROM gpu_metric_compare WHERE rank = 1").fetchone()[0] == 0


def test_nsys_gpu_metrics_rows_carry_source_host_and_gpu(tmp_path: Path) -> None:
    """nsys GPU-metrics samples (GPU_METRICS, TARGET_INFO_GPU_METRICS) land in the same table with
    source 'nsys', the traced host, GPU uuid and UTC time, and compare with DCGM's of that GPU."""
    import sqlite3

    from nsight_analyze.synth import generate

    folder = tmp_path / "job"
    generate(folder, ranks=1, gpus_per_node=1, steps=2, workload="gemm", truth=False)
    trace = folder / "report_rank0.sqlite"
    db = sqlite3.connect(trace)
    utc0, dur = db.execute(
        "SELECT s.utcEpochNs, a.duration FROM TARGET_INFO_SESSION_START_TIME s, ANALYSIS_DETAILS a"
    ).fetchone()
    (uuid,) = db.execute("SELECT uuid FROM TARGET_INFO_GPU WHERE id = 0").fetchone()
    db.execute(
        "CREATE TABLE TARGET_INFO_GPU_METRICS "
        "(typeId INT, sourceId INT, typeName TEXT, metricId INT, metricName TEXT)"
    )
    db.execute(
        "INSERT INTO TARGET_INFO_GPU_METRICS VALUES (65536, 0, 'GH100', 7, 'Tensor Active [Throughput %]')"
    )
    db.execute("CREATE TABLE GPU_METRICS (timestamp INT, typeId INT, metricId INT, value INT)")
    ts = list(range(0, dur, 1_000_000))  # every 1 ms over the capture, 50 % tensor active
    db.executemany("INSERT INTO GPU_METRICS VALUES (?, 65536, 7, 50)", [(t,) for t in ts])
    db.commit()
    db.close()
    truth = synth_dcgm.for_traces(
        folder, "prom", interval_ns=2_000_000, metrics={"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 0.45}
    )
    con, _ = _ws(tmp_path, folder)
    nsys = con.execute(
        "SELECT count(*), any_value(host), any_value(gpu_uuid), min(utc_ns) - min(timestamp_ns), "
        "any_value(rank) FROM gpu_metrics WHERE source = 'nsys'"
    ).fetchone()
    assert nsys == (len(ts), "h100-node00", uuid, utc0, 0)
    cmp = con.execute(
        "SELECT nsys_pct, dcgm_pct, dcgm_over_nsys, start_ns, end_ns FROM gpu_metric_compare "
        "WHERE rank = 0 AND metric = 'tensor_active'"
    ).fetchone()
    assert cmp[0] == pytest.approx(50.0)
    lo, hi = cmp[3], cmp[4]  # the overlap of both sources' samples, on the rank's file time
    inside = [s["value"] for s in truth["samples"] if lo <= s["utc_ns"] - utc0 <= hi]
    assert cmp[1] == pytest.approx(100 * sum(inside) / len(inside))
    assert cmp[2] == pytest.approx(cmp[1] / 50.0)


@pytest.mark.parametrize("ranks", [2, 3], ids=["one-host", "two-hosts"])
def test_dmon_rows_match_by_gpu_index_only_in_a_one_host_workspace(tmp_path: Path, ranks: int) -> None:
    """dcgmi dmon names no host: its GPU index matches the rank on that CUDA ordinal while the
    workspace's ranks run on one host; across hosts the index is ambiguous, and the ingest says so."""
    from nsight_analyze.synth import generate

    folder = tmp_path / "job"
    generate(folder, ranks=ranks, gpus_per_node=2, steps=2, workload="gemm", truth=False)
    # writer.rank_identity: node00 holds ranks 0, 1 on GPUs 0, 1; with 3 ranks node01 holds rank 2 on GPU 0
    truth = synth_dcgm.for_traces(folder, "dmon", interval_ns=5_000_000)
    hosts = sorted({g["host"] for g in truth["gpus"]})
    assert hosts == (["h100-node00"] if ranks == 2 else ["h100-node00", "h100-node01"])
    report = ingest([folder], tmp_path / "ws.duckdb")
    assert not report.failed
    con = open_workspace(tmp_path / "ws.duckdb")
    rows = con.execute(
        "SELECT gpu_id, min(rank), max(rank), any_value(rank_match) FROM gpu_metrics "
        "WHERE source = 'dcgm' GROUP BY ALL ORDER BY 1"
    ).fetchall()
    if ranks == 2:
        how = "gpu_index (no host, one-host workspace)"
        assert rows == [(0, 0, 0, how), (1, 1, 1, how)]
        assert any("2 of 2 sampled GPUs matched" in n for n in report.notes), report.notes
    else:  # each host's file has GPUs 0 and 1: four host-less GPUs, none given a rank
        assert rows == [(0, None, None, None), (1, None, None, None)]
        assert any("name no host" in n and "ranks run on 2 hosts" in n for n in report.notes), report.notes


@requires_shared
def test_gpus_without_tensor_activity_are_said(tmp_path: Path) -> None:
    """The 8 x H100 scrape has no DCGM_FI_PROF_PIPE_TENSOR_ACTIVE (grep: 0 lines): no HFU estimate
    for its GPUs, and the summary says so instead of leaving them out."""
    assert "PIPE_TENSOR_ACTIVE" not in H100X8.read_text()
    con, _ = _ws(tmp_path, H100X8)
    out = mfu.dcgm_summary(con, mfu.hfu_table(con))
    assert out["gpus"] == []
    assert any(
        "8 GPU(s) on gpu-node-1 were sampled without DCGM_FI_PROF_PIPE_TENSOR_ACTIVE" in x
        for x in out["lines"]
    )


@requires_shared
def test_counters_only_workspace_says_so_in_gpus_and_mfu(tmp_path: Path) -> None:
    """The T4 scrape alone: no traced rank, so `gpus` says so instead of an empty table and the
    MFU title names no GPU count (it printed "None GPUs")."""
    from click.testing import CliRunner

    from nsight_analyze.cli import main

    con, _ = _ws(tmp_path, T4)
    con.close()
    db = tmp_path / "ws.duckdb"
    out = CliRunner().invoke(main, ["gpus", "--db", str(db)])
    assert out.exit_code == 0 and "no traced ranks in this workspace" in " ".join(out.output.split())
    out = CliRunner().invoke(main, ["mfu", "--db", str(db)])
    assert out.exit_code == 0 and "no traced GPU" in out.output and "None" not in out.output
