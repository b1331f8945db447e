"""`nsight-analyze export`: Parquet files equal to the workspace, and a Chrome trace that viewers
and nsight-analyze's own Kineto reader open, with every kernel, rank and matched collective.

One workspace of sample_traces/ (4 synthetic ranks on 2 hosts) is built once per test run
(conftest.sample_workspace) and copied for the module; each test exports it through the CLI (what
users run) into its own folder.
"""

from __future__ import annotations

import json
from collections import Counter
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner
from conftest import copy_workspace

from nsight_analyze.cli import main
from nsight_analyze.export import chrome_trace, parse_ranks
from nsight_analyze.export.parquet import MANIFEST
from nsight_analyze.ingest.run import ingest
from nsight_analyze.sources import kineto
from nsight_analyze.store import query_layer
from nsight_analyze.store.schema import schema_tables
from nsight_analyze.store.workspace import open_workspace


@pytest.fixture(scope="module")
def db(tmp_path_factory, sample_workspace) -> Path:
    path = copy_workspace(sample_workspace, tmp_path_factory.mktemp("export") / "ws.duckdb")
    open_workspace(path, read_only=True).close()  # any recompute happens here, once
    return path


def _con(db: Path) -> duckdb.DuckDBPyConnection:
    return open_workspace(db, read_only=True)


def _export(db: Path, *args: str, code: int = 0) -> str:
    result = CliRunner().invoke(main, ["export", *args, "--db", str(db)])
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    return result.output


def _trace(path: Path) -> dict:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


# --- parquet ------------------------------------------------------------------------------------
def test_parquet_files_equal_the_workspace(db, tmp_path):
    out = tmp_path / "pq"
    printed = _export(db, str(out), "--format", "parquet")
    assert "manifest.json" in printed
    manifest = json.loads((out / MANIFEST).read_text())
    listed = {t["name"]: t for t in manifest["tables"]}
    public = {
        q.name for q in query_layer.layer() if not q.private and q.result == "stored" and q.stage != "live"
    }
    views = {q.name for q in query_layer.layer() if not q.private and q.stage == "live" and q.kind == "view"}
    assert set(schema_tables()) | public | views <= set(listed)
    assert {"kernels", "time_partition", "gaps", "aligned_kernels", "collectives"} <= set(listed)
    assert not [p for p in out.iterdir() if p.name.startswith(".")], "temporary files left behind"
    assert {p.name for p in out.iterdir()} == {t["file"] for t in manifest["tables"]} | {MANIFEST}

    con = _con(db)
    try:
        for name, entry in listed.items():
            file = str(out / entry["file"])
            rows = con.execute("SELECT count(*) FROM read_parquet(?)", [file]).fetchone()[0]
            assert rows == entry["rows"] == con.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0], name
            described = [
                (c[0], c[1]) for c in con.execute(f"DESCRIBE SELECT * FROM read_parquet('{file}')").fetchall()
            ]
            assert [c["name"] for c in entry["columns"]] == [n for n, _ in described], name
        for table, column in (
            ("kernels", "duration_ns"),
            ("time_partition", "compute_ns"),
            ("gaps", "duration_ns"),
        ):
            file = str(out / f"{table}.parquet")
            ws = con.execute(f"SELECT sum({column}) FROM {table}").fetchone()[0]
            pq = con.execute(f"SELECT sum({column}) FROM read_parquet(?)", [file]).fetchone()[0]
            assert ws == pq and ws > 0, table
        codec = con.execute(
            "SELECT DISTINCT compression FROM parquet_metadata(?)", [str(out / "kernels.parquet")]
        ).fetchall()
        assert codec == [("ZSTD",)]
    finally:
        con.close()


def test_parquet_refuses_a_non_empty_folder_unless_forced(db, tmp_path):
    out = tmp_path / "pq"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    printed = _export(db, str(out), "--format", "parquet", code=2)
    assert printed.startswith("error:") and "--force" in printed and len(printed.strip().splitlines()) == 1
    _export(db, str(out), "--format", "parquet", "--force")
    assert (out / "notes.txt").exists()  # --force overwrites the export's files, nothing else
    # A file an earlier export listed and this one does not write is removed with --force.
    manifest = json.loads((out / MANIFEST).read_text())
    manifest["tables"].append({"name": "old_table", "file": "old_table.parquet"})
    (out / MANIFEST).write_text(json.dumps(manifest))
    (out / "old_table.parquet").write_bytes(b"stale")
    _export(db, str(out), "--format", "parquet", "--force")
    assert not (out / "old_table.parquet").exists()


def test_parquet_ranks_filter_rank_tables_only(db, tmp_path):
    out = tmp_path / "pq"
    _export(db, str(out), "--format", "parquet", "--ranks", "1-2")
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["ranks"] == [1, 2]
    con = _con(db)
    try:
        ranks = con.execute(
            f"SELECT DISTINCT rank FROM read_parquet('{out / 'kernels.parquet'}') ORDER BY 1"
        ).fetchall()
        assert ranks == [(1,), (2,)]
        want = con.execute("SELECT count(*) FROM kernels WHERE rank IN (1, 2)").fetchone()[0]
        by_name = {t["name"]: t for t in manifest["tables"]}
        assert by_name["kernels"]["rows"] == want and by_name["kernels"]["filtered_by_rank"]
        whole = con.execute("SELECT count(*) FROM collectives").fetchone()[0]
        assert by_name["collectives"]["rows"] == whole and not by_name["collectives"]["filtered_by_rank"]
    finally:
        con.close()


# --- chrome trace -------------------------------------------------------------------------------
def _check_structure(trace: dict, ranks: list[int]) -> list[dict]:
    assert trace["displayTimeUnit"] == "ns"
    events = trace["traceEvents"]
    # the Trace Event Format's phases used: complete slices, metadata, flow start / finish
    assert {e["ph"] for e in events} <= {"X", "M", "s", "f"}
    assert all(isinstance(e["pid"], int) and isinstance(e["tid"], int) for e in events)
    procs = [e for e in events if e["ph"] == "M" and e["name"] == "process_name"]
    assert sorted(e["pid"] for e in procs) == ranks  # one process per rank
    for e in procs:
        assert e["args"]["name"].startswith(f"rank {e['pid']} · ")
    named = {(e["pid"], e["tid"]) for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    slices = [e for e in events if e["ph"] == "X"]
    for e in slices:
        for key in ("ts", "dur", "pid", "tid", "name", "cat"):
            assert e.get(key) is not None, (key, e)
        assert isinstance(e["ts"], (int, float)) and e["dur"] >= 0
        assert (e["pid"], e["tid"]) in named  # every track has a name
    kernels = [e for e in slices if e["cat"] == "kernel"]
    assert {e["args"]["category"] for e in kernels} <= {"compute", "memory", "comms", "other"}
    # coloured by category: each category its own colour (chrome_trace.CNAME, 'grey' for other)
    assert all(e["cname"] == chrome_trace.CNAME.get(e["args"]["category"], "grey") for e in kernels)
    idle = [e for e in slices if e["cat"] == "idle"]
    assert all(e["name"] == e["args"]["cause"] for e in idle)  # idle gaps named by their cause
    starts = Counter(e["id"] for e in events if e["ph"] == "s")
    ends = Counter(e["id"] for e in events if e["ph"] == "f")
    assert starts == ends and all(n == 1 for n in starts.values())  # every flow start has one finish
    return events


def _instances(db: Path, ranks: list[int]) -> set[int]:
    """Matched collective instances with more than one of `ranks` taking part (SQL, not the export)."""
    con = _con(db)
    try:
        rows = con.execute(
            "SELECT coll_id FROM merge_coll_members WHERE coll_id IS NOT NULL AND list_contains(?, rank) "
            "GROUP BY coll_id HAVING count(DISTINCT rank) > 1",
            [ranks],
        ).fetchall()
    finally:
        con.close()
    return {r for (r,) in rows}


def test_chrome_trace_has_every_rank_kernel_and_collective(db, tmp_path):
    out = tmp_path / "trace.json"
    printed = _export(db, str(out), "--format", "chrome-trace")
    events = _check_structure(_trace(out), [0, 1, 2, 3])
    assert f"{len(events):,} events" in printed
    con = _con(db)
    try:
        # one process per rank named "rank N · host · GPU", from the ranks table
        labels = {
            r: f"rank {r} · {host} · {gpu} (device {dev})"
            for r, host, gpu, dev in con.execute(
                "SELECT rank, hostname, gpu_name, device_id FROM ranks"
            ).fetchall()
        }
        streams = set(
            con.execute(
                "SELECT rank, stream_id FROM kernels UNION SELECT rank, stream_id FROM memops"
            ).fetchall()
        )
        matched = {c for (c,) in con.execute("SELECT coll_id FROM collectives WHERE ranks > 1").fetchall()}
        n_kernels = con.execute("SELECT count(*) FROM kernels").fetchone()[0]
        starts = sorted(r[0] for r in con.execute("SELECT aligned_start_ns FROM aligned_kernels").fetchall())
        n_idle = con.execute("SELECT count(*) FROM gaps WHERE step IS NULL").fetchone()[0]
        n_steps = con.execute("SELECT count(*) FROM steps").fetchone()[0]
        members = dict(con.execute("SELECT coll_id, count(*) FROM merge_coll_members GROUP BY 1").fetchall())
        comm_kernels = {
            (r, round(mid / 1000, 3))
            for r, mid in con.execute(
                "SELECT rank, (arrive_ns + aligned_end_ns) // 2 FROM merge_coll_members"
            ).fetchall()
        }
    finally:
        con.close()
    assert {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"} == labels
    tracks = {
        (e["pid"], e["tid"])
        for e in events
        if e["name"] == "thread_name" and e["tid"] < chrome_trace.STEPS_TID
    }
    assert tracks == streams  # one track per CUDA stream
    # flow events for every matched collective (the collectives table's, not the export's view)
    assert {e["args"]["coll_id"] for e in events if e["ph"] == "s"} == matched != set()
    kernels = [e for e in events if e["ph"] == "X" and e["cat"] == "kernel"]
    assert len(kernels) == n_kernels
    assert sorted(round(e["ts"] * 1000) for e in kernels) == starts  # aligned clock, exact ns
    assert sum(e.get("cat") == "idle" for e in events) == n_idle
    assert sum(e.get("cat") == "step" for e in events) == n_steps
    flows = [e for e in events if e["ph"] in ("s", "f")]
    assert {e["args"]["coll_id"] for e in flows} == _instances(db, [0, 1, 2, 3]) != set()
    assert all((e["pid"], e["ts"]) in comm_kernels for e in flows)  # bound inside an NCCL kernel
    assert all(e.get("bp") == "e" for e in flows if e["ph"] == "f")
    # each instance is one chain through its participants: n kernels, n - 1 arrows
    per = Counter(e["args"]["coll_id"] for e in flows if e["ph"] == "s")
    assert per == {c: n - 1 for c, n in members.items()}


def test_chrome_trace_round_trips_through_the_kineto_reader(db, tmp_path):
    out = tmp_path / "in" / "trace.json"
    out.parent.mkdir()
    _export(db, str(out), "--format", "chrome-trace")
    again = tmp_path / "again.duckdb"
    report = ingest([out], again)
    assert [o.status for o in report.outcomes] == ["ok"], report.outcomes
    con, back = _con(db), duckdb.connect(str(again), read_only=True)
    try:
        query = "SELECT count(*), sum(duration_ns) FROM kernels"
        assert back.execute(query).fetchone() == con.execute(query).fetchone()
        query = "SELECT category, count(*) FROM kernels GROUP BY ALL ORDER BY ALL"
        assert back.execute(query).fetchall() == con.execute(query).fetchall()
        query = "SELECT kind, src_kind, dst_kind, bytes, count(*) FROM memops GROUP BY ALL ORDER BY ALL"
        assert back.execute(query).fetchall() == con.execute(query).fetchall()
    finally:
        con.close()
        back.close()


@pytest.mark.parametrize("fast_path, decimal_ts", [(True, False), (False, True)])
def test_chrome_trace_of_one_rank_comes_back_as_that_rank(db, tmp_path, monkeypatch, fast_path, decimal_ts):
    """Both Kineto parsers read it; so do `ts` written as DECIMALs (the path for epoch-based
    clocks, whose µs do not fit a double exactly)."""
    monkeypatch.setattr(kineto, "FAST_PATH", fast_path)
    if decimal_ts:
        monkeypatch.setattr(chrome_trace, "DOUBLE_EXACT_NS", 0)
    out = tmp_path / "in" / "rank2.json.gz"
    out.parent.mkdir()
    _export(db, str(out), "--format", "chrome-trace", "--ranks", "2")
    assert out.read_bytes()[:2] == b"\x1f\x8b"  # gzip's magic: a .gz name is written compressed
    again = tmp_path / "again.duckdb"
    ingest([out], again)
    con, back = _con(db), duckdb.connect(str(again), read_only=True)
    try:
        assert (
            back.execute("SELECT rank, device_id, gpu_name FROM ranks").fetchall()
            == con.execute("SELECT rank, device_id, gpu_name FROM ranks WHERE rank = 2").fetchall()
        )
        mine = con.execute(
            "SELECT aligned_start_ns, duration_ns, name, correlation_id, stream_id, grid_x, block_x "
            "FROM aligned_kernels WHERE rank = 2 ORDER BY ALL"
        ).fetchall()
        theirs = back.execute(
            "SELECT start_ns, duration_ns, name, correlation_id, stream_id, grid_x, block_x "
            "FROM kernels ORDER BY ALL"
        ).fetchall()
        assert theirs == mine and mine
    finally:
        con.close()
        back.close()


def test_chrome_trace_selects_steps_and_ranks(db, tmp_path):
    out = tmp_path / "part.json"
    _export(db, str(out), "--format", "chrome-trace", "--steps", "3:5", "--ranks", "0,2-3")
    events = _check_structure(_trace(out), [0, 2, 3])
    steps = [e for e in events if e["ph"] == "X" and e["cat"] == "step"]
    assert sorted({e["name"] for e in steps}) == ["step 3", "step 4", "step 5"]
    assert {e["pid"] for e in events if e["ph"] != "M"} == {0, 2, 3}
    con = _con(db)
    try:
        windows = dict(
            (r, (lo, hi))
            for r, lo, hi in con.execute(
                "SELECT s.rank, min(s.start_ns + r.clock_offset_ns), max(s.end_ns + r.clock_offset_ns) "
                "FROM steps s JOIN ranks r USING (rank) WHERE step BETWEEN 3 AND 5 GROUP BY 1"
            ).fetchall()
        )
        want = con.execute(
            "SELECT count(*) FROM aligned_kernels k JOIN (SELECT s.rank, "
            "min(s.start_ns + r.clock_offset_ns) lo, max(s.end_ns + r.clock_offset_ns) hi "
            "FROM steps s JOIN ranks r USING (rank) "
            "WHERE step BETWEEN 3 AND 5 AND s.rank IN (0, 2, 3) GROUP BY 1) w USING (rank) "
            "WHERE aligned_start_ns >= lo AND aligned_start_ns < hi"
        ).fetchone()[0]
    finally:
        con.close()
    kernels = [e for e in events if e["ph"] == "X" and e["cat"] == "kernel"]
    assert len(kernels) == want > 0
    for e in kernels:
        lo, hi = windows[e["pid"]]
        assert lo <= round(e["ts"] * 1000) < hi
    flows = {e["args"]["coll_id"] for e in events if e["ph"] == "s"}
    assert flows and flows <= _instances(db, [0, 2, 3])


@pytest.mark.parametrize(
    "args, message",
    [
        (["--format", "chrome-trace", "--ranks", "0,9"], "no rank 9"),
        (["--format", "chrome-trace", "--ranks", "1-x"], "bad --ranks"),
        (["--format", "chrome-trace", "--steps", "40:50"], "no such step"),
        (["--format", "chrome-trace", "--steps", "5:3"], "before the first"),
        (["--format", "parquet", "--steps", "3:5"], "chrome-trace only"),
    ],
)
def test_bad_options_are_one_line_errors(db, tmp_path, args, message):
    out = tmp_path / ("x.json" if "chrome-trace" in args else "pq")
    printed = _export(db, str(out), *args, code=2)
    assert printed.startswith("error:") and message in printed, printed
    assert not out.exists()


def test_existing_trace_file_needs_force(db, tmp_path):
    out = tmp_path / "t.json"
    out.write_text("{}")
    assert "--force" in _export(db, str(out), "--format", "chrome-trace", code=2)
    assert out.read_text() == "{}"
    _export(db, str(out), "--format", "chrome-trace", "--force")
    assert _trace(out)["traceEvents"]
    assert [p.name for p in tmp_path.iterdir()] == ["t.json"]  # no temporary file left


def test_parse_ranks():
    assert parse_ranks(None) is None and parse_ranks(" ") is None
    assert parse_ranks("3, 0-1,1") == [0, 1, 3]


def test_help_lists_export():
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0 and "export" in result.output


def test_a_failed_export_leaves_no_partial_file(db, tmp_path, monkeypatch):
    """Files appear under their names only when complete; a failed Parquet export has no manifest,
    and the folder it created is removed (one that existed keeps the complete files)."""
    from nsight_analyze.errors import UserError
    from nsight_analyze.export import parquet

    real = parquet.exported_objects
    monkeypatch.setattr(parquet, "exported_objects", lambda: [*real()[:3], ("no_such_table", "view")])
    monkeypatch.setattr(parquet, "_present", lambda con: {n for n, _ in parquet.exported_objects()})
    con = _con(db)
    try:
        with pytest.raises(UserError, match="cannot export no_such_table"):
            parquet.export_parquet(con, tmp_path / "new", None)
        assert not (tmp_path / "new").exists()
        (tmp_path / "pq").mkdir()
        with pytest.raises(UserError, match="cannot export no_such_table"):
            parquet.export_parquet(con, tmp_path / "pq", None)
        assert sorted(p.name for p in (tmp_path / "pq").iterdir()) == sorted(
            f"{n}.parquet" for n, _ in real()[:3]
        )

        queries = chrome_trace._queries
        monkeypatch.setattr(
            chrome_trace, "_queries", lambda us, steps: {**queries(us, steps), "flows": "SELECT x"}
        )
        with pytest.raises(duckdb.Error):
            chrome_trace.export_chrome_trace(con, tmp_path / "t.json", [0, 1])
        assert sorted(p.name for p in tmp_path.iterdir()) == ["pq"]
        # the connection is left clean for the next export
        assert (
            con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name LIKE '_export%'").fetchone()[0]
            == 0
        )
    finally:
        con.close()


def test_chrome_trace_never_writes_a_negative_duration(tmp_path):
    """Kernels whose recorded end precedes their start (a tracer clock error) were written with a
    negative `dur`, which trace viewers reject or misdraw; they now have `dur` 0 and their
    recorded duration in args. Expected values: the 5 kernels inverted here by 2,000 ns."""
    import shutil
    import sqlite3

    from conftest import ROOT

    trace = tmp_path / "rank0.sqlite"
    shutil.copy(ROOT / "sample_traces" / "report_rank0.sqlite", trace)
    with sqlite3.connect(trace) as lite:
        lite.execute(
            'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = start - 2000 '
            "WHERE rowid IN (SELECT rowid FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start LIMIT 5)"
        )
    db = tmp_path / "ws.duckdb"
    ingest([trace], db)
    out = tmp_path / "t.json"
    _export(db, str(out), "--format", "chrome-trace")
    events = _trace(out)["traceEvents"]
    assert [e for e in events if e.get("dur", 0) < 0] == []
    inverted = [e for e in events if "recorded duration ns" in e.get("args", {})]
    assert [(e["cat"], e["dur"], e["args"]["recorded duration ns"]) for e in inverted] == [
        ("kernel", 0, -2000)
    ] * 5


def _union(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted, merged [start, end) intervals."""
    out: list[tuple[int, int]] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        elif e > s:
            out.append((s, e))
    return out


def _minus(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    """ns of the union `a` not covered by the union `b`."""
    covered = 0
    for s, e in a:
        for bs, be in b:
            covered += max(0, min(e, be) - max(s, bs))
    return sum(e - s for s, e in a) - covered


def test_chrome_trace_labels_copies_apart_from_memory_kernels(db, tmp_path):
    """memcpy / memset operations are category `copies` with their own colour, memory-bound
    kernels stay `memory` (README export paragraph): per rank, the exported copies not under a
    compute or memory kernel and the memory kernels not under a compute kernel are exactly the
    stored partition's copies_ns and memory_kernels_ns of the whole capture (time_partition,
    step IS NULL: the oracle, computed by queries/partition/tp_breakdown.sql, not by the export)."""
    out = tmp_path / "trace.json"
    _export(db, str(out), "--format", "chrome-trace")
    with open(out, encoding="utf-8") as fh:  # Decimal: exact ns even for epoch-based clocks
        slices = [e for e in json.load(fh, parse_float=Decimal)["traceEvents"] if e["ph"] == "X"]
    memops = [e for e in slices if e["cat"] in ("gpu_memcpy", "gpu_memset")]
    con = _con(db)
    try:
        assert len(memops) == con.execute("SELECT count(*) FROM memops").fetchone()[0] > 0
        want = {
            r: (mk, cp)
            for r, mk, cp in con.execute(
                "SELECT rank, memory_kernels_ns, copies_ns FROM time_partition WHERE step IS NULL"
            ).fetchall()
        }
    finally:
        con.close()
    assert {e["args"]["category"] for e in memops} == {"copies"}
    assert {e["cname"] for e in memops} == {chrome_trace.CNAME["copies"]} != {chrome_trace.CNAME["memory"]}

    def spans(rank: int, keep) -> list[tuple[int, int]]:
        return _union(
            [
                (int(e["ts"] * 1000), int((e["ts"] + e["dur"]) * 1000))
                for e in slices
                if e["pid"] == rank and keep(e)
            ]
        )

    def kernel_of(*cats: str):
        return lambda e: e["cat"] == "kernel" and e["args"]["category"] in cats

    for rank, (mk, cp) in want.items():
        compute = spans(rank, kernel_of("compute"))
        kernels = spans(rank, kernel_of("compute", "memory"))
        copies = spans(rank, lambda e: e["args"].get("category") == "copies")
        assert _minus(spans(rank, kernel_of("memory")), compute) == mk, rank
        assert _minus(copies, kernels) == cp, rank
    assert sum(cp for _, cp in want.values()) > 0  # the sample traces have exposed copies
