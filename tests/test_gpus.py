"""GPU peak table, name matching, derivation and the per-rank resolution.

Expected numbers come from ../shared/docs/gpu-peaks.md (read from its table where the doc
is present, else the values are stated below with the section they come from), never from
nsight_analyze's own output.
"""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import SHARED, TRACES, requires_shared

from nsight_analyze import gpus
from nsight_analyze.cli import main
from nsight_analyze.gpus import hardware as gpu_identify
from nsight_analyze.gpus import table as gpu_table
from nsight_analyze.store.workspace import open_workspace

DOC = SHARED / "docs" / "gpu-peaks.md"

# gpu-peaks.md §2.1 rows (dense TFLOP/s; memory GB/s), used when the doc is not beside the project.
STATED = {
    "NVIDIA H100 80GB HBM3": {
        "fp64": 33.5,
        "fp64_tc": 66.9,
        "fp32": 66.9,
        "tf32": 494.7,
        "bf16": 989.4,
        "fp8": 1978.9,
        "int8": 1978.9,
        "mem": 3350,
    },
    "NVIDIA A100-SXM4-80GB": {
        "fp64": 9.7,
        "fp64_tc": 19.5,
        "fp32": 19.5,
        "tf32": 156,
        "bf16": 312,
        "int8": 624,
        "mem": 2039,
    },
    "NVIDIA H200": {
        "fp64": 33.5,
        "fp64_tc": 66.9,
        "fp32": 66.9,
        "tf32": 494.7,
        "bf16": 989.4,
        "fp8": 1978.9,
        "int8": 1978.9,
        "mem": 4800,
    },
    "Tesla V100-SXM2-16GB": {"fp64": 7.8, "fp32": 15.7, "fp16": 125, "mem": 900},
}
DOC_ROWS = {
    "NVIDIA H100 80GB HBM3": "| NVIDIA H100 80GB HBM3 (H100 SXM5)",
    "NVIDIA A100-SXM4-80GB": "| NVIDIA A100-SXM4-80GB |",
    "NVIDIA H200": "| NVIDIA H200 (SXM)",
    "Tesla V100-SXM2-16GB": "| Tesla V100-SXM2-16GB / -32GB",
}
COLS = ["fp64", "fp64_tc", "fp32", "tf32", "bf16", "fp8", "int8", "mem"]


def _first_number(cell: str) -> float | None:
    match = re.search(r"\d+(\.\d+)?", cell.replace("**", ""))
    return float(match.group(0)) if match else None


def doc_row(prefix: str) -> dict[str, float]:
    """Parse one row of gpu-peaks.md §2.1: FP64 | FP64 TC | FP32 | TF32 | 16b | FP8 | INT8 | Mem BW."""
    for line in DOC.read_text().splitlines():
        if line.startswith(prefix):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            values = cells[3:11]  # after name, SMs, boost
            out = {}
            for col, cell in zip(COLS, values, strict=True):
                if cell in ("—", "") or cell.startswith("("):
                    continue
                out[col] = _first_number(cell)
            return out
    raise AssertionError(f"row {prefix!r} not found in {DOC}")


@pytest.mark.parametrize("name", list(STATED))
def test_dense_peaks_equal_the_datasheet_numbers(name: str) -> None:
    expected = doc_row(DOC_ROWS[name]) if DOC.exists() else STATED[name]
    if "Tesla V100" in name:  # the doc's 16b column holds the FP16 figure (no BF16 on Volta)
        expected["fp16"] = expected.pop("bf16", STATED[name]["fp16"])
    peak = gpu_table.lookup(name)
    assert peak is not None and peak.source == "table"
    for col, value in expected.items():
        if col == "mem":
            assert peak.mem_bw_gbs == pytest.approx(value), (name, col)
        else:
            assert peak.tflops[col] == pytest.approx(value), (name, col)
    assert peak.peak_flops("bf16") == pytest.approx((expected.get("bf16") or expected.get("fp16")) * 1e12)


def test_doc_and_stated_numbers_agree() -> None:
    """Guards the fallback values above against drifting from the doc."""
    if not DOC.exists():
        pytest.skip("../shared/docs/gpu-peaks.md is absent")
    for name, prefix in DOC_ROWS.items():
        row = doc_row(prefix)
        for col, value in STATED[name].items():
            key = "bf16" if (col == "fp16" and "V100" in name) else col
            assert row[key] == pytest.approx(value), (name, col)


@pytest.mark.parametrize(
    ("name", "model"),
    [
        ("NVIDIA GH200 480GB", "NVIDIA GH200 480GB"),  # contains H200
        ("NVIDIA H200", "NVIDIA H200"),
        ("NVIDIA H200 NVL", "NVIDIA H200 NVL"),
        ("NVIDIA A10G", "NVIDIA A10G"),  # A10 is a substring
        ("NVIDIA A10", "NVIDIA A10"),
        ("NVIDIA A100-SXM4-40GB", "NVIDIA A100-SXM4-40GB"),
        ("NVIDIA GB200", "NVIDIA GB200"),  # contains B200
        ("NVIDIA B200", "NVIDIA B200"),
        ("NVIDIA L4", "NVIDIA L4"),
        ("NVIDIA L40S", "NVIDIA L40S"),  # L4 is a substring
        ("NVIDIA H100 PCIe", "NVIDIA H100 PCIe"),
        ("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM"),
        ("NVIDIA H20", "NVIDIA H20"),
    ],
)
def test_most_specific_name_wins(name: str, model: str) -> None:
    peak = gpu_table.lookup(name)
    assert peak is not None and peak.model == model


def test_specific_values_that_substring_matching_gets_wrong() -> None:
    # gpu-peaks.md §1.4: GB200 2.5 PF vs B200 2.25 PF; A10G 70 (flagged) vs A10 125.
    assert gpu_table.lookup("NVIDIA GB200").tflops["bf16"] == 2500
    assert gpu_table.lookup("NVIDIA B200").tflops["bf16"] == 2250
    assert gpu_table.lookup("NVIDIA A10G").tflops["bf16"] == 70
    assert gpu_table.lookup("NVIDIA A10").tflops["bf16"] == 125
    assert gpu_table.lookup("NVIDIA GeForce RTX 3080") is None


@pytest.mark.parametrize(
    ("name", "sms", "clock_hz", "cc", "precision", "expected"),
    [
        # gpu-peaks.md §2.2 / §3 checks (dense TFLOP/s)
        ("NVIDIA H200", 132, 1.98e9, (9, 0), "bf16", 989.4),  # after the 1830/1980 derate
        ("NVIDIA H200", 132, 1.98e9, (9, 0), "fp32", 66.9),  # non-tensor: boost clock
        ("NVIDIA A100-SXM4-80GB", 108, 1.41e9, (8, 0), "bf16", 311.9),
        ("NVIDIA GeForce RTX 3080", 68, 1.71e9, (8, 6), "bf16", 59.5),  # GeForce half rate
        ("NVIDIA GeForce RTX 4070 SUPER", 56, 2.505e9, (8, 9), "bf16", 71.8),
        ("Quadro RTX 6000", 72, 1.77e9, (7, 5), "fp16", 130.5),  # pro fuse: full rate
        ("NVIDIA A10", 72, 1.695e9, (8, 6), "bf16", 125.0),
        ("Tesla T4", 40, 1.59e9, (7, 5), "fp16", 65.1),
    ],
)
def test_derivation_reproduces_published_values(name, sms, clock_hz, cc, precision, expected) -> None:
    peak = gpu_identify.derive(name, sms, clock_hz, *cc)
    assert peak is not None and peak.source == "derived"
    assert peak.tflops[precision] == pytest.approx(expected, abs=0.1)


def test_unknown_gpu_resolution_order() -> None:
    derived = gpus.resolve("NVIDIA GeForce RTX 3080", 68, 1.71e9, 8, 6)
    assert derived.source == "derived" and "GeForce" in derived.reason
    env = gpus.resolve(None, env_hints={"PEAK_FLOPS_PER_GPU": "989e12"}, families=["ampere"])
    assert env.source == "assumed" and env.peak_flops() == pytest.approx(989e12)
    fam = gpus.resolve(None, families=["ampere", "hopper"])
    assert fam.source == "assumed" and fam.tflops["bf16"] == 989.4 and "hopper" in fam.reason
    # sm80/ampere names alone identify nothing: Hopper and Blackwell run them too (the nsys-ai
    # H100 capture has only sm80_xmma GEMMs), so no A100 is assumed and the peak stays unknown
    ampere = gpus.resolve(None, families=["ampere"])
    assert ampere.source == "unknown" and ampere.peak_flops() is None and "--gpu" in ampere.reason
    none = gpus.resolve(None)
    assert none.source == "unknown" and none.peak_flops() is None and "--peak-tflops" in none.reason
    override = gpus.resolve("NVIDIA H100 80GB HBM3", peak_tflops=500)
    assert override.source == "override" and override.peak_flops() == 500e12
    assert gpus.parse_env_hint("PEAK_TFLOPS", "989") == pytest.approx(989e12)


def _workspace(tmp_path):
    con = open_workspace(tmp_path / "ws.duckdb")
    con.execute(
        "INSERT INTO ranks (rank, file_id, device_id, gpu_name) VALUES (0, 1, 0, 'NVIDIA H100 80GB HBM3'),"
        " (1, 2, 0, NULL), (2, 3, 0, NULL), (3, 4, 1, NULL)"
    )
    con.execute(
        "INSERT INTO gpus (rank, device_id, name, sm_count, clock_hz, compute_major, compute_minor, source)"
        " VALUES (0, 0, 'NVIDIA H100 80GB HBM3', 132, 1980000000, 9, 0, 'TARGET_INFO_GPU'),"
        " (3, 0, 'NVIDIA A100-SXM4-80GB', 108, 1410000000, 8, 0, 'TARGET_INFO_GPU'),"
        " (3, 1, 'NVIDIA GeForce RTX 3080', 68, 1710000000, 8, 6, 'TARGET_INFO_GPU')"
    )
    con.execute("INSERT INTO env VALUES (3, 'PEAK_FLOPS_PER_GPU', '989e12')")
    con.execute(
        "INSERT INTO kernels (rank, start_ns, end_ns, name) VALUES (1, 0, 10, 'nvjet_tst_128x256_h_bz_TNT')"
    )
    return con


def test_rank_peaks_per_rank_with_reasons(tmp_path) -> None:
    con = _workspace(tmp_path)
    df = gpus.rank_peaks(con).set_index("rank")
    assert df.loc[0, "source"] == "table" and df.loc[0, "peak_tflops"] == pytest.approx(989.4)
    # rank 1 ran only an nvjet kernel. This used to assert an assumed Hopper peak, a wrong guess:
    # cuBLASLt's nvjet kernels run on Blackwell too (the TraceLens B200 trace has nvjet_tst_*),
    # where the peak is 2250, not 989.4; so the peak is unknown and the reason says why.
    assert df.loc[1, "source"] == "unknown" and pd.isna(df.loc[1, "peak_tflops"])
    assert "nvjet" in df.loc[1, "reason"] and "blackwell" in df.loc[1, "reason"]
    assert df.loc[2, "source"] == "assumed" and "PEAK_FLOPS_PER_GPU" in df.loc[2, "reason"]
    # rank 3 runs on device 1 of a file that lists two GPUs: the RTX 3080 row applies
    assert df.loc[3, "source"] == "derived" and df.loc[3, "peak_tflops"] == pytest.approx(59.5, abs=0.1)
    con.close()


def test_gpus_command(tmp_path) -> None:
    _workspace(tmp_path).close()
    db = str(tmp_path / "ws.duckdb")
    result = CliRunner().invoke(main, ["gpus", "--db", db, "--format", "csv"])
    assert result.exit_code == 0, result.output
    assert "NVIDIA H100 SXM" in result.output and "assumed" in result.output
    result = CliRunner().invoke(main, ["gpus", "--db", db, "--format", "json", "--peak-tflops", "400"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert [r["source"] for r in out["ranks"]] == ["override"] * 4 and out["ncu_files"] == []


@requires_shared
def test_real_traces_table_and_env_hint(tmp_path) -> None:
    """fuser/report2 names an H200 (table row); the nsys-ai capture has no TARGET_INFO_GPU but
    carries PEAK_FLOPS_PER_GPU=989e12 (traces README), so its two ranks are 'assumed'."""
    from nsight_analyze.ingest.run import ingest

    db = tmp_path / "ws.duckdb"
    ingest(
        [
            TRACES / "nsys" / "fuser" / "report2.sqlite",
            TRACES / "nsys" / "nsys-ai" / "mfu_2gpu_before.sqlite",
        ],
        db,
    )
    con = open_workspace(db, read_only=True)
    df = gpus.rank_peaks(con)
    con.close()
    by_source = df.groupby("source")["peak_tflops"].apply(list).to_dict()
    assert by_source["table"] == [pytest.approx(989.4)]
    assert by_source["assumed"] == [pytest.approx(989.0)] * 2
    assert all("PEAK_FLOPS_PER_GPU" in r for r in df.loc[df["source"] == "assumed", "reason"])


# gpu-peaks.md §2.1: T4 "**65** (FP16, no BF16)", V100 SXM2 "**125** (FP16 only, no BF16)"; NVIDIA's
# T4 datasheet: "Mixed Precision (FP16/FP32) 65 TFLOPS". Stated here for when the doc is absent.
NO_BF16 = {
    "Tesla T4": ("| Tesla T4 |", 65.0),
    "Tesla V100-SXM2-16GB": ("| Tesla V100-SXM2-16GB / -32GB", 125.0),
}


@pytest.mark.parametrize("name", list(NO_BF16))
def test_gpus_without_bf16_tensor_cores_label_their_peak_fp16(name: str) -> None:
    prefix, stated = NO_BF16[name]
    fp16 = doc_row(prefix)["bf16"] if DOC.exists() else stated  # the doc's 16b column is FP16 here
    assert fp16 == pytest.approx(stated)
    peak = gpu_table.lookup(name)
    assert peak.tflops["bf16"] is None  # no BF16 tensor cores: no bf16 number in the table
    assert peak.precision_of("bf16") == "fp16" and peak.peak_flops("bf16") == pytest.approx(fp16 * 1e12)
    row = gpus.peak_row(peak, "bf16")
    assert row["precision"] == "fp16" and row["peak_tflops"] == pytest.approx(fp16)
    assert "no BF16 tensor cores: its dense FP16 peak" in row["reason"]
    # precisions the GPU has keep their own label
    assert peak.precision_of("fp16") == "fp16" and peak.precision_of("fp32") == "fp32"


def test_derived_turing_and_volta_peaks_say_fp16_and_ampere_bf16() -> None:
    # gpu_arch.ARCH_RATES: Volta (7.0) and Turing (7.5) list fp16 but no bf16 FLOP/clk/SM; the
    # Quadro RTX 6000 derivation (gpu-peaks.md §2.2: 130.5 FP16, no BF16) is then labelled fp16
    quadro = gpu_identify.derive("Quadro RTX 6000", 72, 1.77e9, 7, 5)
    assert quadro.precision_of("bf16") == "fp16" and quadro.peak_flops("bf16") == pytest.approx(
        130.5e12, rel=1e-3
    )
    volta = gpu_identify.derive("Tesla V100-SXM2-16GB", 80, 1.53e9, 7, 0)
    assert volta.precision_of("bf16") == "fp16"
    a100 = gpu_identify.derive("NVIDIA A100-SXM4-80GB", 108, 1.41e9, 8, 0)
    assert a100.precision_of("bf16") == "bf16" and gpus.peak_row(a100, "bf16")["precision"] == "bf16"
    # a user's --peak-tflops for bf16 is a bf16 peak, whatever the GPU
    assert gpus.with_override(gpu_table.lookup("Tesla T4"), 50, "bf16").precision_of("bf16") == "bf16"


def test_rank_peaks_mfu_and_gpus_command_say_fp16_for_a_t4(tmp_path) -> None:
    from nsight_analyze import mfu

    con = open_workspace(tmp_path / "ws.duckdb")
    con.execute(
        "INSERT INTO ranks (rank, file_id, device_id, gpu_name) "
        "VALUES (0, 1, 0, 'Tesla T4'), (1, 2, 0, 'Tesla T4')"
    )
    df = gpus.rank_peaks(con)  # the default precision, bf16
    assert list(df["precision"]) == ["fp16", "fp16"] and list(df["peak_tflops"]) == [65.0, 65.0]  # NO_BF16
    assert mfu.hfu_mfu_summary(con)["precision"] == "fp16"
    con.execute("UPDATE ranks SET gpu_name = 'NVIDIA H100 80GB HBM3' WHERE rank = 1")
    mixed = gpus.rank_peaks(con)
    assert list(mixed["precision"]) == ["fp16", "bf16"]
    assert gpus.precision_label("bf16", mixed["precision"]) == "bf16/fp16"
    con.close()
    result = CliRunner().invoke(main, ["gpus", "--db", str(tmp_path / "ws.duckdb")])
    assert result.exit_code == 0, result.output
    assert "Dense bf16/fp16 peak per rank" in result.output
    listed = CliRunner().invoke(main, ["gpus", "--list-models", "--format", "json"])
    t4 = next(r for r in json.loads(listed.stdout) if r["model"] == "Tesla T4")
    assert t4["bf16_tflops"] is None and t4["fp16_tflops"] == 65.0  # NO_BF16
