"""PyTorch-profiler (Kineto) ingest: format detection, exact ns times, and parity with HTA 0.5.

The HTA oracles (../shared/traces/oracles/hta-0.5, README there) were computed by HTA on
the same files. Where the definitions agree, our numbers must equal HTA's exactly: counts,
and per-rank unions of all / communication / compute kernels, their intersection and the
overlap ratio, at HTA's microsecond resolution (HTA rounds fractional intervals to
[ceil(ts), floor(ts + dur)) µs; we keep exact ns, so the tests apply HTA's rounding in SQL to
our ns). Where they differ by definition (HTA's "compute" counts hidden communication and
copies; our time partition is exclusive), the tests state the relation and derive the
expected values from HTA's own numbers.
"""

from __future__ import annotations

import csv
import gzip
import json
import re
import shutil
from decimal import Decimal
from pathlib import Path

import pytest
from conftest import TRACES, requires_shared

from nsight_analyze.ingest.run import ingest
from nsight_analyze.sources import kineto
from nsight_analyze.sources.base import BadInput
from nsight_analyze.store.workspace import open_workspace

HTA = TRACES / "oracles" / "hta-0.5"
KINETO = TRACES / "kineto"
SETS = sorted(p.name for p in HTA.iterdir() if p.is_dir()) if HTA.is_dir() else []
# Integer-µs files and fractional files whose decimal text rounds like HTA's doubles do
# (README "Rounding check": 0 differences) are compared exactly; ns_resolution_trace's
# epoch-µs doubles lose the ns digits in HTA, so it is compared with tolerance.
QUANTISED_IN_HTA = {"hta__ns_resolution_trace"}


# ------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------
def _csv(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def set_files(name: str) -> list[Path]:
    """The trace files of one oracle set, from its trace_info.csv (HTA rank order)."""
    return [TRACES / row["source_file"] for row in _csv(HTA / name / "trace_info.csv")]


def derived(name: str, view: str, scope: str, unrounded: bool = False) -> dict[int, dict]:
    """HTA-derived per-rank numbers: {hta rank: row}."""
    path = HTA / name / ("derived_per_rank_unrounded.csv" if unrounded else "derived_per_rank.csv")
    return {int(r["rank"]): r for r in _csv(path) if r["view"] == view and r["scope"] == scope}


def num(text: str) -> float:
    return float(text) if text not in ("", None) else 0.0


def ingest_fresh(paths: list[Path], db: Path):
    """Ingest into a new workspace; returns the report and a read-only connection."""
    report = ingest(paths, db)
    return report, open_workspace(db, read_only=True)


@pytest.fixture(scope="module")
def hta_workspaces(tmp_path_factory):
    """Each oracle set ingested as one job into its own workspace: {set: (report, con, hta->our rank)}."""
    out = {}
    root = tmp_path_factory.mktemp("kineto")
    for name in SETS:
        files = set_files(name)
        report, con = ingest_fresh(files, root / f"{name}.duckdb")
        by_path = dict(
            con.execute("SELECT f.path, r.rank FROM ranks r JOIN files f USING (file_id)").fetchall()
        )
        # HTA numbers its ranks by distributedInfo.rank (trace_info.csv's `rank`), not by file
        # order: trace_diff's single-rank captures are HTA ranks 3 and 1
        hta_rank = {
            str((TRACES / r["source_file"]).resolve()): int(r["rank"])
            for r in _csv(HTA / name / "trace_info.csv")
        }
        ranks = {hta_rank[str(f.resolve())]: by_path[str(f.resolve())] for f in files}
        out[name] = (report, con, ranks)
    yield out
    for _, con, _ in out.values():
        con.close()


UNION_SQL = """
WITH src AS (
    SELECT start_us AS s, end_us AS e FROM {tbl} WHERE rank = ? AND end_us > start_us
),
ordered AS (
    SELECT s, e, max(e) OVER (ORDER BY s, e ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev
    FROM src
),
grouped AS (
    SELECT s, e, sum(CASE WHEN prev IS NULL OR s > prev THEN 1 ELSE 0 END) OVER (ORDER BY s, e) AS g
    FROM ordered
)
SELECT coalesce(sum(ge - gs), 0) FROM (SELECT min(s) AS gs, max(e) AS ge FROM grouped GROUP BY g)
"""


def union_us(con, rank: int, where: str) -> int:
    """|∪ kernels| in µs after HTA's rounding ([ceil(start), floor(end)) µs), by window functions."""
    con.execute(
        "CREATE OR REPLACE TEMP TABLE _k AS SELECT rank, (start_ns + 999) // 1000 AS start_us, "
        f"end_ns // 1000 AS end_us FROM kernels WHERE {where}"
    )
    return int(con.execute(UNION_SQL.format(tbl="_k"), [rank]).fetchone()[0])


def union_ns(con, rank: int, where: str) -> int:
    """|∪ kernels| in exact ns."""
    con.execute(
        "CREATE OR REPLACE TEMP TABLE _k AS SELECT rank, start_ns AS start_us, end_ns AS end_us "
        f"FROM kernels WHERE {where}"
    )
    return int(con.execute(UNION_SQL.format(tbl="_k"), [rank]).fetchone()[0])


# HTA 0.5's kernel types (oracle README): COMMUNICATION = name matches ^nccl.*Kernel; every
# other kernel here is COMPUTATION (no kernel name contains Memcpy/Sync or starts with Memset).
NCCL = "regexp_matches(name, '^nccl.*Kernel')"
COMM = NCCL
COMPUTE = f"NOT {NCCL}"
# Kernels our rules call 'comms' that HTA 0.5 calls COMPUTATION (not NCCL): PyTorch
# symmetric-memory all-reduce in the B200 trace. A difference of definition, stated here (73 =
# the kernel events named multimem_all_reduce_kernel in eager_trace.json.gz, counted with json).
NON_NCCL_COMMS = {"tracelens__b200__eager_trace": ("multimem_all_reduce_kernel", 73)}


def write_trace(path: Path, events: list[dict], **top) -> Path:
    doc = {"schemaVersion": 1, **top, "traceEvents": events}
    text = json.dumps(doc)
    if path.name.endswith(".gz"):
        with gzip.open(path, "wt") as fh:
            fh.write(text)
    else:
        path.write_text(text)
    return path


def op_dict(
    name: str, ts: int, dur: int, ext: int, dims: list | None = None, types: list | None = None
) -> dict:
    """A cpu_op event (pid/tid 9) with its External id; with record_shapes, `Input Dims` / `Input type`."""
    args: dict = {"External id": ext}
    if dims is not None:
        args |= {"Input Dims": dims, "Input type": types}
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 9, "tid": 9, "ts": ts, "dur": dur, "args": args}


def launch_dict(ts: int, corr: int, ext: int) -> dict:
    """A 4 us cudaLaunchKernel on the op's thread, linked by correlation and External id."""
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 9, "tid": 9, "ts": ts,
            "dur": 4, "args": {"correlation": corr, "External id": ext}}  # fmt: skip


def kernel_dict(name: str, ts: int, dur: int, corr: int, ext: int) -> dict:
    """A kernel on device 0, stream 7, grid 64 blocks of 256 threads."""
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
            "args": {"device": 0, "stream": 7, "correlation": corr, "External id": ext,
                     "grid": [64, 1, 1], "block": [256, 1, 1]}}  # fmt: skip


def kernel_event(ts: str, dur: str, name: str = "gemm_kernel", corr: int = 1, **args) -> str:
    """A kernel event as JSON text, ts/dur verbatim (so decimals keep their digits)."""
    a = {"device": 0, "stream": 7, "correlation": corr, "grid": [1, 1, 1], "block": [32, 1, 1], **args}
    return (
        f'{{"ph": "X", "cat": "kernel", "name": {json.dumps(name)}, "pid": 0, "tid": 7, '
        f'"ts": {ts}, "dur": {dur}, "args": {json.dumps(a)}}}'
    )


# ------------------------------------------------------------------------------------------
# sniff / probe
# ------------------------------------------------------------------------------------------
def test_sniff_accepts_kineto_and_rejects_other_json(tmp_path):
    good = write_trace(tmp_path / "rank3.pt.trace.json", [])
    gz = write_trace(tmp_path / "worker.json.gz", [])
    truth = tmp_path / "ground_truth.json"
    truth.write_text(json.dumps({"ranks": 8, "events": [1, 2, 3]}))
    other = tmp_path / "trace.sqlite"
    other.write_bytes(b"SQLite format 3\x00")
    broken_gz = tmp_path / "bad.json.gz"
    broken_gz.write_bytes(b"\x1f\x8bnot gzip at all")
    assert kineto.sniff(good) and kineto.sniff(gz)
    assert not kineto.sniff(truth)
    assert not kineto.sniff(other)
    assert not kineto.sniff(broken_gz)


@requires_shared
def test_sniff_every_shared_kineto_trace():
    files = sorted(KINETO.rglob("*.json.gz"))
    assert files and all(kineto.sniff(f) for f in files)


@requires_shared
@pytest.mark.parametrize(
    "rel, rank, world, gpu",
    # expected: each file's distributedInfo rank / world_size and the name of its deviceProperties
    # entry (read with Python's json; None where the file has no such key)
    [
        ("hta/trace_filter/sampled_rank-1.json.gz", 1, 128, None),  # deviceProperties empty
        ("hta/nccl_parser_config/nccl_data.json.gz", 0, 2, "NVIDIA A100-PG509-200"),
        # distributedInfo written after traceEvents: read from the tail
        ("hta/cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz", 0, None, None),
        # no distributedInfo; deviceProperties after traceEvents
        ("tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz", None, None, "NVIDIA H100 80GB HBM3"),
        # 8 GPUs listed and no GPU event in the head: the device is only known after load()
        ("tracelens/b200/eager_trace.json.gz", 0, 8, None),
    ],
)
def test_probe_reads_rank_and_gpu(rel, rank, world, gpu):
    probe = kineto.probe(KINETO / rel)
    assert probe.format == "kineto-json"
    (proc,) = probe.processes
    assert proc.claimed_rank == rank
    assert proc.rank_source == ("kineto:distributedInfo" if rank is not None else None)
    assert proc.world_size == world
    assert proc.gpu_name == gpu


def test_probe_rejects_truncated_and_non_kineto(tmp_path):
    full = write_trace(
        tmp_path / "t.json",
        [json.loads(kernel_event("10", "5"))] * 50,
        traceName="x",
        distributedInfo={"rank": 2},
    )
    cut = tmp_path / "cut.json"
    cut.write_bytes(full.read_bytes()[:-40])
    with pytest.raises(BadInput):
        kineto.probe(cut)
    other = tmp_path / "other.json"
    other.write_text('{"a": 1}')
    with pytest.raises(BadInput, match="traceEvents"):
        kineto.probe(other)
    assert kineto.probe(full).processes[0].claimed_rank == 2


def test_bad_files_fail_in_one_line_and_leave_the_workspace_usable(tmp_path):
    data = tmp_path / "in"
    data.mkdir()
    one = [json.loads(kernel_event("10", "5"))]
    good = write_trace(data / "rank0.json", one, distributedInfo={"rank": 0})
    bad = data / "rank1.json"
    text = good.read_text().replace('"traceEvents": [', '"traceEvents": [{"ph": "X", "cat": "kernel", ,')
    bad.write_text(text.replace('"rank": 0', '"rank": 1'))
    gz = data / "rank2.json.gz"
    write_trace(gz, [json.loads(kernel_event("10", "5"))] * 2000, distributedInfo={"rank": 2})
    gz.write_bytes(gz.read_bytes()[:-200])  # truncated gzip stream
    report, con = ingest_fresh([data], tmp_path / "ws.duckdb")
    status = {o.path.name: (o.status, o.message) for o in report.outcomes}
    assert status["rank0.json"][0] == "ok"
    for name in ("rank1.json", "rank2.json.gz"):
        assert status[name][0] == "failed" and "\n" not in status[name][1] and status[name][1]
    assert con.execute("SELECT list(rank ORDER BY rank) FROM ranks").fetchone()[0] == [0]
    assert con.execute("SELECT count(*) FROM kernels").fetchone()[0] == 1


# ------------------------------------------------------------------------------------------
# exact times
# ------------------------------------------------------------------------------------------
@pytest.fixture(params=[True, False], ids=["duckdb", "ijson"])
def kineto_path(request, monkeypatch):
    """Run a test with each Kineto parser: DuckDB's JSON reader (default) and the ijson stream."""
    monkeypatch.setattr(kineto, "FAST_PATH", request.param)
    return request.param


def test_fractional_us_keep_ns_exactly(tmp_path, kineto_path):
    events = ",".join(
        [
            kernel_event("1712188298123.456", "0.789", corr=1),
            kernel_event("1712188298123456.001", "1.5", corr=2),  # 19 significant digits in ns
            kernel_event("17", "3", corr=3),
            kernel_event("17.0", "3.0", corr=4),
        ]
    )
    path = tmp_path / "r.json"
    path.write_text('{"schemaVersion": 1, "distributedInfo": {"rank": 0}, "traceEvents": [' + events + "]}")
    _, con = ingest_fresh([path], tmp_path / "ws.duckdb")
    sql = "SELECT correlation_id, start_ns, end_ns, duration_ns FROM kernels ORDER BY 1"
    rows = con.execute(sql).fetchall()
    assert rows == [
        (1, 1712188298123456, 1712188298124245, 789),
        (2, 1712188298123456001, 1712188298123457501, 1500),
        (3, 17000, 20000, 3000),
        (4, 17000, 20000, 3000),
    ]
    assert con.execute("SELECT typeof(start_ns) FROM kernels LIMIT 1").fetchone()[0] == "BIGINT"


@requires_shared
def test_ns_resolution_trace_is_exact_to_the_decimal_text(tmp_path, kineto_path):
    """Every kernel start/end equals the decimal text × 1000, which float64 cannot hold."""
    path = KINETO / "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
    doc = json.loads(gzip.open(path).read(), parse_float=Decimal)
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    expected = sorted(
        (int(Decimal(e["ts"]) * 1000), int((Decimal(e["ts"]) + Decimal(e["dur"])) * 1000)) for e in kernels
    )
    _, con = ingest_fresh([path], tmp_path / "ws.duckdb")
    got = sorted(con.execute("SELECT start_ns, end_ns FROM kernels").fetchall())
    assert got == expected
    lossy = sum(1 for e in kernels if round(float(Decimal(e["ts"])) * 1000) != int(Decimal(e["ts"]) * 1000))
    assert lossy > 0  # the file really needs exact parsing
    # kernels that HTA's [ceil(ts), floor(ts + dur)) µs rounding erases keep their length here
    erased = con.execute(
        "SELECT count(*) FROM kernels WHERE end_ns // 1000 <= (start_ns + 999) // 1000 AND duration_ns > 0"
    ).fetchone()[0]
    assert erased > 0


def test_small_batches_give_the_same_workspace(tmp_path, monkeypatch):
    """Flushing every few rows (bounded memory) must not change what is loaded (ijson path;
    test_kineto_paths.py cuts the fast path's input into small pieces)."""
    monkeypatch.setattr(kineto, "FAST_PATH", False)
    events = ",".join(kernel_event(str(100 + 10 * i), "4.5", corr=i) for i in range(1000))
    path = tmp_path / "r.json"
    path.write_text('{"schemaVersion": 1, "traceEvents": [' + events + "]}")
    _, con = ingest_fresh([path], tmp_path / "a.duckdb")
    big = con.execute("SELECT count(*), sum(start_ns), sum(end_ns) FROM kernels").fetchone()
    monkeypatch.setattr(kineto, "BATCH_ROWS", 7)
    _, con2 = ingest_fresh([path], tmp_path / "b.duckdb")
    assert con2.execute("SELECT count(*), sum(start_ns), sum(end_ns) FROM kernels").fetchone() == big
    assert big[0] == 1000


# ------------------------------------------------------------------------------------------
# parity with HTA
# ------------------------------------------------------------------------------------------
@requires_shared
@pytest.mark.parametrize("name", SETS)
def test_every_set_ingests(hta_workspaces, name):
    report, _, _ = hta_workspaces[name]
    assert [o.status for o in report.outcomes] == ["ok"] * len(set_files(name)), report.outcomes


@requires_shared
@pytest.mark.parametrize("name", SETS)
def test_counts_equal_hta(hta_workspaces, name):
    """Kernels, NCCL kernels, memcpy/memset/sync rows and streams per rank (HTA view all_events)."""
    _, con, ranks = hta_workspaces[name]
    kern = derived(name, "all_events", "kernels")
    gpu = derived(name, "all_events", "hta_gpu_events")
    for hta_rank, rank in ranks.items():
        k, g = kern[hta_rank], gpu[hta_rank]
        q = con.execute(
            """SELECT count(*), count(*) FILTER (WHERE category = 'comms'),
                      count(DISTINCT stream_id) FILTER (WHERE stream_id IS NOT NULL)
               FROM kernels WHERE rank = ?""",
            [rank],
        ).fetchone()
        pattern, extra = NON_NCCL_COMMS.get(name, ("", 0))
        assert q == (int(k["n_cat_kernel"]), int(k["n_nccl_kernels"]) + extra, int(k["n_streams"]))
        # HTA COMPUTATION kernels = our non-comms kernels + the non-NCCL comms kernels
        assert int(k["n_type_computation"]) == q[0] - q[1] + extra
        memcpy, memset = con.execute(
            "SELECT count(*) FILTER (WHERE kind <> 'memset'), count(*) FILTER (WHERE kind = 'memset') "
            "FROM memops WHERE rank = ?",
            [rank],
        ).fetchone()
        assert (memcpy, memset) == (int(g["n_cat_gpu_memcpy"]), int(g["n_cat_gpu_memset"]))
        assert con.execute("SELECT count(*) FROM sync WHERE rank = ?", [rank]).fetchone()[0] == int(
            g["n_cat_cuda_sync"]
        )
        # our 'comms' category holds every NCCL kernel, plus only the known non-NCCL collectives
        assert (
            con.execute(
                f"SELECT count(*) FROM kernels WHERE rank = ? AND {NCCL} AND category <> 'comms'", [rank]
            ).fetchone()[0]
            == 0
        )
        assert (
            con.execute(
                f"SELECT count(*) FROM kernels WHERE rank = ? AND NOT {NCCL} AND category = 'comms' "
                "AND (? = '' OR NOT contains(name, ?))",
                [rank, pattern, pattern],
            ).fetchone()[0]
            == 0
        )


@requires_shared
@pytest.mark.parametrize("name", SETS)
def test_instances_per_kernel_name_equal_hta(hta_workspaces, name):
    _, con, ranks = hta_workspaces[name]
    path = HTA / name / "derived_per_kernel_name.csv"
    if not path.exists():  # HTA wrote none: the trace has no GPU rows (cupti_profiler)
        assert con.execute("SELECT count(*) FROM kernels").fetchone()[0] == 0
        return
    rows = [r for r in _csv(path) if r["view"] == "all_events" and r["category"] == "kernel"]
    for hta_rank, rank in ranks.items():
        expected = {r["name"]: int(r["count"]) for r in rows if int(r["rank"]) == hta_rank}
        sql = "SELECT name, count(*) FROM kernels WHERE rank = ? GROUP BY name"
        got = dict(con.execute(sql, [rank]).fetchall())
        assert got == expected


@requires_shared
@pytest.mark.parametrize("name", [s for s in SETS if s not in QUANTISED_IN_HTA])
def test_kernel_unions_equal_hta_at_us_resolution(hta_workspaces, name):
    """First start, last end, ∪all, ∪comm, ∪compute, comm ∩ compute, exposed comm, overlap %."""
    _, con, ranks = hta_workspaces[name]
    kern = derived(name, "all_events", "kernels")
    for hta_rank, rank in ranks.items():
        h = kern[hta_rank]
        if int(h["n_cat_kernel"]) == 0:
            assert con.execute("SELECT count(*) FROM kernels WHERE rank = ?", [rank]).fetchone()[0] == 0
            continue
        first, last = con.execute(
            "SELECT min((start_ns + 999) // 1000), max(end_ns // 1000) FROM kernels WHERE rank = ?", [rank]
        ).fetchone()
        assert (first, last) == (int(num(h["first_start_in_file_us"])), int(num(h["last_end_in_file_us"])))
        u_all = union_us(con, rank, "true")
        u_comm = union_us(con, rank, COMM)
        u_comp = union_us(con, rank, COMPUTE)
        inter = u_comm + u_comp - u_all  # |A ∩ B| = |A| + |B| - |A ∪ B|
        assert u_all == num(h["union_all_us"])
        assert u_comm == num(h["union_comm_us"])
        assert u_comp == num(h["union_compute_us"])
        assert inter == num(h["comm_compute_intersection_us"])
        assert u_comm - inter == num(h["exposed_comm_us"])
        assert (last - first) - u_all == num(h["idle_us"])
        if u_comm:
            hta_pct = round(100 * num(h["hta_overlap_numerator_us"]) / num(h["hta_merge_union_comm_us"]), 2)
            assert round(100 * inter / u_comm, 2) == hta_pct


@requires_shared
@pytest.mark.parametrize("name", [s for s in SETS if (HTA / s / "derived_per_rank_unrounded.csv").exists()])
def test_exact_unions_match_hta_unrounded(hta_workspaces, name):
    """Exact ns unions vs HTA with its rounding off (float64 µs: ~1e-3 µs per endpoint, and
    0.25 µs per endpoint for the epoch-µs ns_resolution trace)."""
    _, con, ranks = hta_workspaces[name]
    kern = derived(name, "all_events_unrounded", "kernels", unrounded=True)
    per_endpoint_us = 0.25 if name in QUANTISED_IN_HTA else 1e-3
    for hta_rank, rank in ranks.items():
        h = kern[hta_rank]
        n = int(h["n_cat_kernel"])
        tol = 2 * n * per_endpoint_us
        assert abs(union_ns(con, rank, "true") / 1000 - num(h["union_all_us"])) <= tol
        assert abs(union_ns(con, rank, COMPUTE) / 1000 - num(h["union_compute_us"])) <= tol
        assert abs(union_ns(con, rank, COMM) / 1000 - num(h["union_comm_us"])) <= tol


@requires_shared
def test_rounding_is_what_hta_loses(hta_workspaces):
    """HTA shrinks fractional intervals; our exact unions are never smaller than its rounded ones."""
    for name in ("hta__nccl_parser_config", "tracelens__b200__eager_trace"):
        _, con, ranks = hta_workspaces[name]
        h = derived(name, "all_events", "kernels")[0]
        exact = union_ns(con, ranks[0], COMPUTE)
        assert exact > num(h["union_compute_us"]) * 1000


@requires_shared
@pytest.mark.parametrize("name", ["hta__trace_filter", "hta__negative_queue_length_values_check"])
def test_time_partition_vs_hta_temporal_breakdown(hta_workspaces, name):
    """Our exclusive partition against HTA's breakdown, scope hta_gpu_events (kernels, memcpy,
    memset: these sets have no cuda_sync or stray rows, so both tools see the same GPU work).

    Same definitions: span (window), idle, ∪comm (comms_total), ∪all (busy).
    Different definitions, relations derived from HTA's numbers:
      * HTA compute = |∪ non-comm kernels| counts hidden comms as compute; ours splits busy
        time exclusively, so our compute_ns <= HTA compute <= compute + memory + other.
      * HTA's hidden comms are those under compute kernels only; ours also counts comms under
        memcpy/memset as hidden, so HTA exposed - union_memory <= our exposed <= HTA exposed,
        and HTA non_compute (= ∪all - HTA compute) >= our comms_exposed_ns.
    """
    _, con, ranks = hta_workspaces[name]
    gpu = derived(name, "all_events", "hta_gpu_events")
    for hta_rank, rank in ranks.items():
        h = {k: round(num(v) * 1000) for k, v in gpu[hta_rank].items() if k.endswith("_us")}
        assert gpu[hta_rank]["n_cat_cuda_sync"] == "0" and gpu[hta_rank]["n_cat_other"] == "0"
        p = con.execute(
            "SELECT window_ns, compute_ns, memory_ns, other_ns, comms_exposed_ns, idle_ns, comms_total_ns, "
            "comms_hidden_ns FROM time_partition WHERE rank = ? AND step IS NULL",
            [rank],
        ).fetchone()
        window, compute, memory, other, exposed, idle, total, hidden = p
        assert window == h["span_us"]
        assert idle == h["idle_us"]
        assert total == h["union_comm_us"]
        assert compute + memory + other + exposed == h["union_all_us"]
        assert compute <= h["union_compute_us"] <= compute + memory + other
        assert h["exposed_comm_us"] - h["union_memory_us"] <= exposed <= h["exposed_comm_us"]
        assert hidden == total - exposed
        assert h["union_all_us"] - h["union_compute_us"] >= exposed


# ------------------------------------------------------------------------------------------
# the job, NCCL metadata and the analyses
# ------------------------------------------------------------------------------------------
@requires_shared
def test_two_rank_job_is_one_workspace(hta_workspaces):
    report, con, ranks = hta_workspaces["hta__trace_filter"]
    assert ranks == {0: 0, 1: 1}
    # the two files' distributedInfo (rank 0 and 1, world_size 128), their kernels' args.device
    # (0 and 1) and their ProfilerStep#551/#552 annotations, read with Python's json
    rows = con.execute("SELECT rank, rank_source, world_size, device_id FROM ranks ORDER BY rank").fetchall()
    assert rows == [(0, "kineto:distributedInfo", 128, 0), (1, "kineto:distributedInfo", 128, 1)]
    sql = "SELECT rank, list(step ORDER BY step) FROM steps GROUP BY rank ORDER BY rank"
    steps = con.execute(sql).fetchall()
    assert steps == [(0, [551, 552]), (1, [551, 552])]
    assert (
        con.execute(
            "SELECT count(*) FROM nvtx WHERE domain = 'pytorch' AND event_type = 'push_pop' "
            "AND text LIKE 'ProfilerStep#%'"
        ).fetchone()[0]
        == 4
    )


@requires_shared
def test_gpu_of_the_rank_is_known_after_load(hta_workspaces):
    for name, gpu in [
        ("tracelens__b200__eager_trace", "NVIDIA B200"),
        ("hta__negative_queue_length_values_check", "NVIDIA A100-SXM4-80GB"),
    ]:
        _, con, _ = hta_workspaces[name]
        assert con.execute("SELECT device_id, gpu_name FROM ranks").fetchall() == [(0, gpu)]
        assert con.execute("SELECT name, source FROM gpus").fetchall() == [(gpu, "kineto")]


@requires_shared
def test_nccl_metadata_gives_bytes(hta_workspaces):
    _, con, ranks = hta_workspaces["hta__nccl_parser_config"]
    rows = con.execute(
        "SELECT collective, dtype, count(*), bool_and(in_bytes = in_nelems * 4 OR dtype <> 'Float'), "
        "bool_and(pg_ranks = [0, 1]), bool_and(group_size = 2) "
        "FROM kineto_collectives GROUP BY ALL ORDER BY 1, 2"
    ).fetchall()
    # the NCCL kernels' args in nccl_data.json.gz (Python's json): "Collective name", dtype,
    # "Group size" 2 and "Process Group Ranks" [0, 1] on every one, counted per (name, dtype)
    assert rows == [
        ("allreduce", "Float", 15, True, True, True),
        ("broadcast", "Float", 3, True, True, True),
        ("broadcast", "Long", 3, True, True, True),
    ]
    # every row is an NCCL kernel of the kernels table (same rank and correlation id); 21 = the
    # file's NCCL kernels (cat "kernel", name containing "nccl", each with args "Collective name":
    # 15 AllReduce + 6 Broadcast, counted with Python's json on nccl_data.json.gz)
    assert (
        con.execute(
            "SELECT count(*) FROM kineto_collectives c JOIN kernels k USING (rank, correlation_id) "
            "WHERE k.category = 'comms' AND k.start_ns = c.start_ns"
        ).fetchone()[0]
        == 21
    )
    # eager_trace.json.gz has one kernel with "Collective name": _allgather_base, BFloat16 (2 bytes),
    # In/Out msg nelems 25136/201088, 8 process-group ranks (its args, read with Python's json)
    _, con, _ = hta_workspaces["tracelens__b200__eager_trace"]
    assert con.execute(
        "SELECT collective, dtype_bytes, in_nelems, out_nelems, in_bytes, out_bytes, len(pg_ranks), source "
        "FROM kineto_collectives"
    ).fetchall() == [("_allgather_base", 2, 25136, 201088, 50272, 402176, 8, "kernel-args")]


def test_nccl_metadata_from_record_param_comms(tmp_path):
    """Older PyTorch puts the metadata only on the CPU op; the kernel shares its External id."""
    op = {
        "ph": "X",
        "cat": "cpu_op",
        "name": "record_param_comms",
        "pid": 9,
        "tid": 9,
        "ts": 5,
        "dur": 2,
        "args": {
            "External id": 42,
            "Collective name": "allreduce",
            "dtype": "BFloat16",
            "In msg nelems": 1000,
            "Out msg nelems": 1000,
            "Group size": 4,
            "Process Group Ranks": "[0, 1, 2, 3]",
        },
    }
    events = [
        op,
        json.loads(
            kernel_event(
                "10", "5", name="ncclDevKernel_AllReduce_Sum_bf16_RING_LL(x)", corr=7, **{"External id": 42}
            )
        ),
    ]
    path = write_trace(tmp_path / "r.json", events, distributedInfo={"rank": 0, "world_size": 4})
    _, con = ingest_fresh([path], tmp_path / "ws.duckdb")
    assert con.execute(
        "SELECT correlation_id, collective, in_bytes, group_size, pg_ranks, source FROM kineto_collectives"
    ).fetchall() == [(7, "allreduce", 2000, 4, [0, 1, 2, 3], "record_param_comms")]


def test_memop_names_parse(tmp_path):
    names = [
        "Memcpy HtoD (Pageable -> Device)",
        "Memcpy DtoH (Device -> Pinned)",
        "Memcpy DtoD (Device -> Device)",
        "Memcpy PtoP (Device -> Device)",
        "Memset (Device)",
    ]
    events = [
        {
            "ph": "X",
            "cat": "gpu_memset" if n.startswith("Memset") else "gpu_memcpy",
            "name": n,
            "pid": 0,
            "tid": 7,
            "ts": 10 * i,
            "dur": 1,
            "args": {"device": 0, "stream": 7, "correlation": i, "bytes": 64},
        }
        for i, n in enumerate(names)
    ]
    _, con = ingest_fresh([write_trace(tmp_path / "r.json", events)], tmp_path / "ws.duckdb")
    sql = "SELECT kind, src_kind, dst_kind, bytes FROM memops ORDER BY correlation_id"
    assert con.execute(sql).fetchall() == [
        ("HtoD", "Pageable", "Device", 64),
        ("DtoH", "Device", "Pinned", 64),
        ("DtoD", "Device", "Device", 64),
        ("PtoP", "Device", "Device", 64),
        ("memset", None, "Device", 64),
    ]


@requires_shared
def test_gpu_annotations_do_not_make_extra_steps(hta_workspaces):
    """gpu_user_annotation ProfilerStep ranges live in kineto_gpu_annotations, not nvtx."""
    _, con, ranks = hta_workspaces["tracelens__h100__Qwen_Qwen1.5-0.5B-Chat__1016005"]
    assert con.execute("SELECT text FROM kineto_gpu_annotations").fetchall() == [("ProfilerStep#6",)]
    assert con.execute("SELECT step FROM steps WHERE source = 'nvtx'").fetchall() == [(6,)]


@requires_shared
def test_launch_calls_join_gpu_work(hta_workspaces):
    """cuda_api rows carry the CUPTI correlation id of the GPU work they launched."""
    _, con, _ = hta_workspaces["tracelens__b200__eager_trace"]
    unjoined = con.execute(
        "SELECT count(*) FROM kernels k ANTI JOIN cuda_api a USING (rank, correlation_id)"
    ).fetchone()[0]
    assert unjoined == 0
    # 221 = the events of cat "cuda_driver" in eager_trace.json.gz (Python's json; each has ts and dur)
    assert con.execute("SELECT count(*) FROM cuda_api WHERE api_class = 'driver'").fetchone()[0] == 221


@requires_shared
@pytest.mark.parametrize(
    "name",
    [
        "hta__trace_filter",
        pytest.param("hta__cupti_profiler", marks=pytest.mark.slow),  # no GPU rows at all
        pytest.param("hta__nccl_parser_config", marks=pytest.mark.slow),  # NCCL metadata, 3 steps
        pytest.param("hta__critical_path", marks=pytest.mark.slow),  # cuda_sync rows, no steps
    ],
)
def test_every_view_runs_on_a_kineto_workspace(hta_workspaces, name):
    """Every public table and view of queries/ answers on a Kineto workspace (the analyses know no
    file format)."""
    from nsight_analyze.store import query_layer

    _, con, _ = hta_workspaces[name]
    views = [q.name for q in query_layer.layer() if not q.private and q.kind == "view"]
    assert "time_partition" in views and "steps" in views
    for view in views:
        con.execute(f'SELECT count(*) FROM "{view}"').fetchone()
    if name == "hta__trace_filter":
        parts = con.execute(
            "SELECT count(*), bool_and(window_ns = compute_ns + memory_ns + other_ns + comms_exposed_ns "
            "+ idle_ns) FROM time_partition"
        ).fetchone()
        assert parts[0] >= 6 and parts[1]


@requires_shared
def test_mixed_nsys_and_kineto_is_refused(tmp_path):
    from nsight_analyze.errors import UserError

    nsys = TRACES / "nsys" / "nsys-ai" / "mock.sqlite"
    with pytest.raises(UserError, match="mix"):
        ingest_fresh([nsys, KINETO / "hta/trace_filter/sampled_rank-0.json.gz"], tmp_path / "ws.duckdb")


@requires_shared
def test_no_distributed_info_falls_back_to_ingest_numbering(tmp_path):
    src = KINETO / "tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz"
    data = tmp_path / "job"
    data.mkdir()
    shutil.copy(src, data / "trace.json.gz")  # a name without digits: numbered by order
    _, con = ingest_fresh([data], tmp_path / "ws.duckdb")
    assert con.execute("SELECT rank, rank_source, gpu_name FROM ranks").fetchall() == [
        (0, "order", "NVIDIA H100 80GB HBM3")
    ]


def test_regex_helpers_are_anchored():
    assert kineto._STEP_NAME.match("ProfilerStep#12") and not kineto._STEP_NAME.match("xProfilerStep#1")
    event = b'{"ph": "X", "cat": "kernel", "name": "a\\"b", "pid": 3, "tid": 7}'
    assert re.search(kineto._GPU_EVENT_PID, event).group(1) == b"3"
