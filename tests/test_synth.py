"""Synthetic traces: schema fidelity, determinism, ground-truth consistency, injections, ingest."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import ROOT, SHARED, requires_shared

from nsight_analyze.errors import UserError
from nsight_analyze.synth import TRUTH_FILE, generate, parse
from nsight_analyze.synth.schemas import SOURCES, VERSIONS, _statements_from, tables_for

SAMPLE = ROOT / "sample_traces"
SAMPLE_ARGS = dict(
    ranks=4,
    gpus_per_node=2,
    steps=12,
    seed=1,
    schema="2025.1",
    injections=["straggler=3:+20", "input-stall=4:30"],
)
PARTS = ("compute_ns", "memory_ns", "other_ns", "comms_exposed_ns", "idle_ns")
IDLE_PARTS = ("launch_gap_ns", "input_stall_ns", "sync_stall_ns", "host_bound_ns", "idle_other_ns")
ALL_INJECTIONS = [
    "straggler=1:+30",
    "clock-skew=1:-2.5",
    "input-stall=3:5",
    "launch-bound=2-2",
    "sync-stall",
    "cuda-graph",
]


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("synth_small")
    return out, generate(out, ranks=4, gpus_per_node=2, steps=4, seed=7, injections=ALL_INJECTIONS)


@pytest.fixture(scope="module")
def version_file(tmp_path_factory):
    """version -> the one-rank file the generator writes in that schema (made once per module)."""
    made: dict[str, Path] = {}

    def get(version: str) -> Path:
        if version not in made:
            out = tmp_path_factory.mktemp(f"schema_{version}")
            generate(out, ranks=1, gpus_per_node=1, steps=1, schema=version, kernels_per_step=30)
            made[version] = out / "report_rank0.sqlite"
        return made[version]

    return get


def table_info(con: sqlite3.Connection, table: str) -> list[tuple[str, str]]:
    return [(r[1], r[2]) for r in con.execute(f'PRAGMA table_info("{table}")')]


def real_columns(version: str) -> dict[str, list[tuple[str, str]]]:
    """Column (name, declared type) lists of every table in the real exports of `version`."""
    mem = sqlite3.connect(":memory:")
    seen: dict[str, list[tuple[str, str]]] = {}
    for rel in SOURCES[version]:
        for name, sql in _statements_from(SHARED / rel).items():
            if name not in seen:
                mem.execute(sql)
                seen[name] = table_info(mem, name)
    return seen


@requires_shared
@pytest.mark.parametrize("version", list(VERSIONS))
def test_schema_matches_real_exports(version_file, version):
    con = sqlite3.connect(version_file(version))
    tables = sorted(r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
    assert tables == sorted(tables_for(version))
    real = real_columns(version)
    for table in tables:
        assert table_info(con, table) == real[table], table


@pytest.mark.parametrize("version", list(VERSIONS))
def test_version_markers(version_file, version):
    """Each version carries its own metadata table, version strings and version-only columns."""
    con = sqlite3.connect(version_file(version))
    v = VERSIONS[version]
    meta = dict(con.execute(f"SELECT name, value FROM {v.meta_table}").fetchall())
    assert meta["EXPORT_PRODUCT_VERSION"] == v.product_version
    assert meta["EXPORT_SCHEMA_VERSION"] == v.schema_version
    kcols = [r[0] for r in table_info(con, "CUPTI_ACTIVITY_KIND_KERNEL")]
    assert ("greenContextId" in kcols) == (version != "2022.4")
    assert ("tensorSizeMinusOneElements" in kcols) == (version == "2026.2")


def test_files_env_and_gpu(small):
    out, truth = small
    for r in truth["ranks"]:
        con = sqlite3.connect(out / r["file"])
        env = dict(con.execute("SELECT name, value FROM TARGET_INFO_SYSTEM_ENV").fetchall())
        pairs = dict(p.split("=", 1) for p in env["DeviceEnvironment"].split(";") if "=" in p)
        assert pairs["RANK"] == str(r["rank"]) and pairs["LOCAL_RANK"] == str(r["local_rank"])
        assert pairs["WORLD_SIZE"] == "4" and env["Hostname"] == f"h100-node{r['node']:02d}"
        gpu = con.execute(
            "SELECT name, smCount, clockRate FROM TARGET_INFO_GPU WHERE cuDevice = ?", (r["local_rank"],)
        ).fetchone()
        assert gpu == ("NVIDIA H100 80GB HBM3", 132, 1980000000)
        (utc,) = con.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()
        assert utc == truth["clock"]["session_start_utc_ns"][str(r["node"])]


def test_file_contents_match_truth_counts(small):
    """Per-name kernel counts and durations read straight from SQLite equal the generator's."""
    out, truth = small
    for r in truth["ranks"]:
        con = sqlite3.connect(out / r["file"])
        got = {
            name: {"count": n, "total_ns": d}
            for name, n, d in con.execute(
                "SELECT s.value, count(*), sum(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                "JOIN StringIds s ON s.id = k.demangledName GROUP BY 1"
            )
        }
        got.update(
            {
                f"[CUDA memcpy {'HtoD' if kind == 1 else 'DtoH'}]": {"count": n, "total_ns": d}
                for kind, n, d in con.execute(
                    "SELECT copyKind, count(*), sum(end - start) FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY 1"
                )
            }
        )
        assert got == r["kernels_by_name"]
        (nk,) = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
        assert nk == r["expected_kernel_count"]
        # every GPU op has its launch call
        (orphans,) = con.execute(
            "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k LEFT JOIN CUPTI_ACTIVITY_KIND_RUNTIME a "
            "ON a.correlationId = k.correlationId WHERE a.correlationId IS NULL"
        ).fetchone()
        assert orphans == 0
        names = {
            n
            for (n,) in con.execute(
                "SELECT DISTINCT s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME a "
                "JOIN StringIds s ON s.id = a.nameId"
            )
        }
        assert {
            "cudaLaunchKernel_v7000",
            "cudaMemcpyAsync_v3020",
            "cudaStreamSynchronize_v3020",
            "cudaGraphLaunch_v10000",
        } <= names
        (graph_kernels,) = con.execute(
            "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME a "
            "ON a.correlationId = k.correlationId JOIN StringIds s ON s.id = a.nameId "
            "WHERE k.graphNodeId IS NOT NULL AND s.value = 'cudaGraphLaunch_v10000'"
        ).fetchone()
        assert graph_kernels > 0
        (dom,) = con.execute(
            "SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 75 AND text = 'NCCL'"
        ).fetchone()
        assert dom == 1


def test_categories_agree_with_kernel_rules():
    """The truth's categories are the ones kernel_rules.csv gives the generated names."""
    import duckdb

    from nsight_analyze.classify import classify_names
    from nsight_analyze.synth import job, workload

    cfg = workload.Config(
        ranks=2, gpus_per_node=1, steps=1, injections=parse(ALL_INJECTIONS + ["exposed-comm"])
    )
    kinds = [k for k in job.build(cfg).catalog.kinds if not k.memcpy]
    got = classify_names(duckdb.connect(), [k.name for k in kinds])
    assert dict(zip(got["name"], got["category"], strict=True)) == {k.name: k.category for k in kinds}


def test_determinism_bit_for_bit(tmp_path):
    a = generate(tmp_path / "a", ranks=2, gpus_per_node=1, steps=3, seed=5, injections=["straggler=1:+10"])
    # a second run, in forked writer processes this time: same truth, same bytes
    b = generate(
        tmp_path / "b", ranks=2, gpus_per_node=1, steps=3, seed=5, injections=["straggler=1:+10"], workers=2
    )
    assert a == b
    for name in sorted(p.name for p in (tmp_path / "a").iterdir()):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    c = generate(tmp_path / "c", ranks=2, gpus_per_node=1, steps=3, seed=6, injections=["straggler=1:+10"])
    assert c["partition"] != a["partition"]


def _tables(path: Path) -> dict[str, list[tuple]]:
    con = sqlite3.connect(path)
    names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    out = {n: con.execute(f'SELECT * FROM "{n}" ORDER BY rowid').fetchall() for n in names}
    out["sqlite_master"] = con.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
    con.close()
    return out


def test_sample_traces_reproducible(tmp_path):
    """sample_traces/ is exactly what its documented command writes (contents always; bytes when the
    local SQLite library is the one that wrote the committed files, since SQLite stamps its version)."""
    assert (SAMPLE / TRUTH_FILE).exists(), "sample_traces/ is committed with the repository"
    generate(tmp_path, **SAMPLE_ARGS)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted(p.name for p in SAMPLE.iterdir() if p.suffix in (".sqlite", ".json"))
    assert (tmp_path / TRUTH_FILE).read_bytes() == (SAMPLE / TRUTH_FILE).read_bytes()
    for name in names:
        if not name.endswith(".sqlite"):
            continue
        assert _tables(tmp_path / name) == _tables(SAMPLE / name), name
        stamp = int.from_bytes((SAMPLE / name).read_bytes()[96:100], "big")
        if (
            stamp
            == sqlite3.sqlite_version_info[0] * 1_000_000
            + sqlite3.sqlite_version_info[1] * 1000
            + (sqlite3.sqlite_version_info[2])
        ):
            assert (tmp_path / name).read_bytes() == (SAMPLE / name).read_bytes(), name
    assert sum((SAMPLE / n).stat().st_size for n in names) < 3 * 1024 * 1024


def _check_rows(rows: list[dict]) -> None:
    for row in rows:
        assert all(isinstance(row[k], int) and row[k] >= 0 for k in PARTS + IDLE_PARTS), row
        assert sum(row[k] for k in PARTS) == row["window_ns"], row
        assert sum(row[k] for k in IDLE_PARTS) == row["idle_ns"], row
        busy = row["window_ns"] - row["idle_ns"]
        assert row["compute_ns"] <= busy <= row["window_ns"]
        assert row["comms_hidden_ns"] + row["comms_exposed_ns"] == row["comms_total_ns"]
        assert row["window_end_ns"] - row["window_start_ns"] == row["window_ns"]


def test_truth_self_consistency(small):
    _, truth = small
    rows = truth["partition"]
    _check_rows(rows)
    for rank in range(4):
        mine = [r for r in rows if r["rank"] == rank]
        whole = [r for r in mine if r["step"] is None]
        steps = sorted((r for r in mine if r["step"] is not None), key=lambda r: r["step"])
        assert len(whole) == 1 and [r["step"] for r in steps] == [1, 2, 3, 4]
        for a, b in zip(steps, steps[1:], strict=False):
            assert a["window_end_ns"] == b["window_start_ns"]  # windows tile
        w = whole[0]
        assert w["window_start_ns"] < steps[0]["window_start_ns"]  # the prologue is in no step
        assert w["window_end_ns"] == steps[-1]["window_end_ns"]


def _union(intervals: list[tuple[int, int]]) -> int:
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(i for i in intervals if i[1] > i[0]):
        if cur_e is None or s > cur_e:
            total += 0 if cur_e is None else cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + (0 if cur_e is None else cur_e - cur_s)


def test_truth_partition_against_plain_unions(small):
    """Re-derive the partition of every window from the SQLite file with plain interval unions."""
    out, truth = small
    rank = 1
    con = sqlite3.connect(out / f"report_rank{rank}.sqlite")
    ops = con.execute(
        "SELECT k.start, k.end, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k "
        "JOIN StringIds s ON s.id = k.shortName "
        "UNION ALL SELECT start, end, 'memcpy' FROM CUPTI_ACTIVITY_KIND_MEMCPY"
    ).fetchall()

    def cat(name: str) -> str:
        if name.startswith("nccl"):
            return "N"
        if name == "dispatch_tokens_kernel":
            return "O"
        if name.startswith(("sm90_xmma", "nvjet", "Kernel2", "flash_")):
            return "C"
        return "M"

    for row in (r for r in truth["partition"] if r["rank"] == rank):
        w0, w1 = row["window_start_ns"], row["window_end_ns"]
        clip = {c: [(max(s, w0), min(e, w1)) for s, e, n in ops if cat(n) == c] for c in "CMON"}
        c = _union(clip["C"])
        cm = _union(clip["C"] + clip["M"])
        cmo = _union(clip["C"] + clip["M"] + clip["O"])
        busy = _union(clip["C"] + clip["M"] + clip["O"] + clip["N"])
        assert row["compute_ns"] == c
        assert row["memory_ns"] == cm - c
        assert row["other_ns"] == cmo - cm and (row["step"] is None or row["other_ns"] > 0)
        assert row["comms_exposed_ns"] == busy - cmo
        assert row["idle_ns"] == (w1 - w0) - busy
        assert row["comms_total_ns"] == _union(clip["N"])


def test_injection_effects(small):
    _, truth = small
    rows = {(r["rank"], r["step"]): r for r in truth["partition"]}
    # input stall every 3rd step (step 3): >= 5 ms of input stall on every rank
    for rank in range(4):
        assert rows[(rank, 3)]["input_stall_ns"] >= 5_000_000
        assert rows[(rank, 4)]["input_stall_ns"] < 5_000_000
        # launch-bound step 2: thousands of tiny kernels leave launch gaps and host-bound idle
        assert rows[(rank, 2)]["launch_gap_ns"] > 3_000_000 and rows[(rank, 2)]["host_bound_ns"] > 3_000_000
        assert rows[(rank, 4)]["launch_gap_ns"] < 1_000_000
        # sync stall: every step waits on the host after the forced syncs
        assert all(rows[(rank, s)]["sync_stall_ns"] > 0 for s in (1, 2, 3, 4))
    # straggler rank 1 is the last arrival wherever arrivals differ by more than the end jitter
    colls = truth["collectives"]
    skewed = [c for c in colls if c["arrival_skew_ns"] > 10_000]
    assert len(skewed) >= len(colls) // 2 and all(c["last_rank"] == 1 for c in skewed)
    assert truth["straggler"]["rank"] == 1 and truth["straggler"]["cost_ns_total"] > 0
    for c in colls:  # all ranks end an all-reduce within the jitter on the reference timeline
        assert max(c["end_ns"]) - min(c["end_ns"]) < 2_000
        assert c["arrival_skew_ns"] == max(c["arrival_ns"]) - min(c["arrival_ns"])
    assert truth["clock"]["utc_clock_error_ns"] == {"0": 0, "1": -2_500_000}
    assert truth["clock"]["offset_ns"]["0"] == 0 and truth["clock"]["offset_ns"]["1"] > 0


def test_collective_ends_recover_offsets(small):
    """Per-node offsets in the truth map each rank's NCCL kernel ends onto one common time."""
    out, truth = small
    ends = {}
    for r in truth["ranks"]:
        con = sqlite3.connect(out / r["file"])
        off = truth["clock"]["offset_ns"][str(r["node"])]
        ends[r["rank"]] = [
            e + off
            for (e,) in con.execute(
                "SELECT k.end FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName "
                "WHERE s.value LIKE 'ncclDevKernel%' ORDER BY k.start"
            )
        ]
    for i, c in enumerate(truth["collectives"]):
        assert [ends[r][i] for r in range(4)] == c["end_ns"]


def test_exposed_comm_hides_nothing(tmp_path):
    base = generate(tmp_path / "a", ranks=2, gpus_per_node=2, steps=2, kernels_per_step=100)
    exp = generate(
        tmp_path / "b", ranks=2, gpus_per_node=2, steps=2, kernels_per_step=100, injections=["exposed-comm"]
    )

    def hidden(t):
        rows = [r for r in t["partition"] if r["step"] is not None]
        return sum(r["comms_hidden_ns"] for r in rows) / sum(r["comms_total_ns"] for r in rows)

    assert hidden(base) > 0.3
    assert hidden(exp) < 0.05


def test_gemm_workload_mfu_is_analytic(tmp_path):
    from nsight_analyze.synth.programs import GEMM_SHAPES

    truth = generate(tmp_path, ranks=2, gpus_per_node=2, steps=3, workload="gemm", kernels_per_step=4)
    flops = sum(2 * m * n * k for m, n, k in GEMM_SHAPES)
    assert set(truth["model_flops_per_step"].values()) == {flops}
    peak = truth["gpu"]["peak_bf16_dense_flops"]
    for row in (r for r in truth["partition"] if r["step"] is not None):
        assert row["model_flops"] == flops
        assert row["mfu"] == flops / (row["window_ns"] * 1e-9 * peak)
        assert row["comms_total_ns"] == 0 and row["memory_ns"] == 0


@pytest.mark.parametrize(
    "spec", ["straggler=x", "clock-skew=1", "input-stall=0:5", "launch-bound=5-3", "sync-stall=1", "bogus"]
)
def test_bad_injections_are_user_errors(spec):
    with pytest.raises(UserError):
        parse([spec])


def test_cli(tmp_path):
    from nsight_analyze.cli import main

    res = CliRunner().invoke(
        main,
        [
            "synth",
            str(tmp_path / "o"),
            "--ranks",
            "2",
            "--gpus-per-node",
            "1",
            "--steps",
            "2",
            "--kernels-per-step",
            "40",
            "--schema",
            "2026.2",
            "--inject",
            "clock-skew=1:+3",
        ],
    )
    assert res.exit_code == 0, res.output
    truth = json.loads((tmp_path / "o" / TRUTH_FILE).read_text())
    assert truth["schema"]["nsys_version"] == "2026.2.1.210"
    assert sorted(p.name for p in (tmp_path / "o").glob("*.sqlite")) == [
        "report_rank0.sqlite",
        "report_rank1.sqlite",
    ]
    bad = CliRunner().invoke(
        main, ["synth", str(tmp_path / "x"), "--ranks", "2", "--inject", "straggler=5:+1"]
    )
    assert bad.exit_code == 2 and "straggler rank 5" in bad.output
    bad = CliRunner().invoke(main, ["synth", str(tmp_path / "x"), "--seed", "-1"])  # numpy's ValueError
    assert bad.exit_code == 2 and "-1 is not in the range x>=0" in bad.output, bad.output


def test_ingest_matches_generator(small, workspace_of):
    """Ingest of generated traces: ranks from env RANK, per-name kernel counts and durations exact."""
    out, truth = small
    con = workspace_of(*sorted(out.glob("*.sqlite")))
    ranks = dict(con.execute("SELECT rank, hostname FROM ranks").fetchall())
    assert ranks == {r["rank"]: f"h100-node{r['node']:02d}" for r in truth["ranks"]}
    got = {
        (rank, name): (n, d)
        for rank, name, n, d in con.execute(
            "SELECT rank, name, count(*), sum(end_ns - start_ns) FROM kernels GROUP BY 1, 2"
        ).fetchall()
    }
    want = {
        (r["rank"], name): (v["count"], v["total_ns"])
        for r in truth["ranks"]
        for name, v in r["kernels_by_name"].items()
        if not name.startswith("[CUDA memcpy")
    }
    assert got == want


def test_sql_time_partition_matches_truth(small, workspace_of):
    """The SQL views and the generator's independent implementation agree on every window and part
    (every column of docs/metrics.md "Time partition": a column the table lost fails, it is not
    skipped)."""
    out, truth = small
    con = workspace_of(*sorted(out.glob("*.sqlite")))
    got = con.execute("SELECT * FROM time_partition").df()
    fields = PARTS + IDLE_PARTS + ("window_ns", "comms_total_ns", "comms_hidden_ns")
    assert not [f for f in fields if f not in got], f"time_partition lacks columns: {list(got.columns)}"
    sql = {
        (int(r["rank"]), None if r["step"] != r["step"] or r["step"] is None else int(r["step"])): {
            f: int(r[f]) for f in fields
        }
        for r in got.to_dict("records")
    }
    want = {(r["rank"], r["step"]): {f: r[f] for f in fields} for r in truth["partition"]}
    assert sql == want


def test_gemm_files_omit_empty_tables(tmp_path):
    """Like nsys' lazy export: a GEMM-only job has no memcpy, so no MEMCPY table at all."""
    generate(tmp_path, ranks=1, gpus_per_node=1, steps=1, workload="gemm", kernels_per_step=2)
    con = sqlite3.connect(tmp_path / "report_rank0.sqlite")
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "CUPTI_ACTIVITY_KIND_MEMCPY" not in tables and "CUPTI_ACTIVITY_KIND_KERNEL" in tables


def test_refuses_folder_of_a_bigger_job(tmp_path):
    generate(tmp_path, ranks=2, gpus_per_node=2, steps=1, kernels_per_step=30, truth=False)
    with pytest.raises(UserError, match="report_rank1.sqlite"):
        generate(tmp_path, ranks=1, gpus_per_node=1, steps=1, kernels_per_step=30, truth=False)


# Where generated storage classes may go beyond what the real files of that version happen to hold:
# the real captures had no CUDA graphs traced per node and no NCCL domain-create row (2026.2).
TYPE_EXCEPTIONS = {"graphNodeId", "graphId", "end", "uuid"}


@requires_shared
@pytest.mark.parametrize("version", ["2025.1", "2026.2"])
def test_storage_classes_match_real_rows(tmp_path, version):
    """Each column holds the SQLite storage classes (integer/text/null) real rows of that version hold."""
    generate(
        tmp_path,
        ranks=1,
        gpus_per_node=1,
        steps=1,
        schema=version,
        kernels_per_step=40,
        injections=["cuda-graph", "sync-stall"],
    )
    gen = sqlite3.connect(tmp_path / "report_rank0.sqlite")
    reals = [sqlite3.connect(f"file:{SHARED / rel}?mode=ro", uri=True) for rel in SOURCES[version]]
    tables = [r[0] for r in gen.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    for table in tables:
        for col in [r[1] for r in gen.execute(f'PRAGMA table_info("{table}")')]:
            got = {r[0] for r in gen.execute(f'SELECT DISTINCT typeof("{col}") FROM "{table}"')}
            real: set[str] = set()
            for con in reals:
                try:
                    real |= {r[0] for r in con.execute(f'SELECT DISTINCT typeof("{col}") FROM "{table}"')}
                except sqlite3.OperationalError:  # table absent from that file
                    pass
            if real and col not in TYPE_EXCEPTIONS:
                assert got <= real, (table, col, got, real)


@requires_shared
def test_enum_rows_are_real():
    """The ENUM rows written are a subset of a real 2025.1 export's (same ids, names and labels)."""
    from nsight_analyze.synth.export_meta import (
        EVENT_CLASSES,
        EVENT_TYPES,
        LAUNCH_TYPES,
        MEM_KIND,
        MEM_KIND_LABEL,
    )

    real = sqlite3.connect(f"file:{SHARED / SOURCES['2025.1'][0]}?mode=ro", uri=True)

    def rows(table: str) -> set[tuple]:
        return set(real.execute(f"SELECT id, name, label FROM {table}").fetchall())

    assert {(i, n, n) for i, n in EVENT_TYPES} <= rows("ENUM_NSYS_EVENT_TYPE")
    assert set(EVENT_CLASSES) <= rows("ENUM_NSYS_EVENT_CLASS")
    assert {(i, f"CUDA_KERNEL_LAUNCH_TYPE_{n}", lab) for i, n, lab in LAUNCH_TYPES} <= rows(
        "ENUM_CUDA_KERNEL_LAUNCH_TYPE"
    )
    kinds = enumerate(zip(MEM_KIND, MEM_KIND_LABEL, strict=True))
    assert {(i, f"CUDA_MEMOPR_MEMORY_KIND_{n}", lab) for i, (n, lab) in kinds} == rows("ENUM_CUDA_MEM_KIND")


def test_straggler_cost_is_counterfactual(tmp_path):
    """A 0 % straggler costs exactly nothing (same draws); a real one costs every other rank each step."""
    kw = dict(ranks=4, gpus_per_node=2, steps=3, kernels_per_step=60)
    zero = generate(tmp_path / "z", injections=["straggler=2:+0"], **kw)["straggler"]
    assert zero["cost_ns_total"] == 0 and set(zero["cost_ns_by_step"].values()) == {0}
    slow = generate(tmp_path / "s", injections=["straggler=2:+25"], **kw)
    info = slow["straggler"]
    assert info["rank"] == 2 and all(v > 0 for v in info["step_delay_ns_by_step"].values())
    for step, cost in info["cost_ns_by_step"].items():
        assert info["step_delay_ns_by_step"][step] <= cost <= 3 * info["step_delay_ns_by_step"][step]
