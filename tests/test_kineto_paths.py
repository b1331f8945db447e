"""The two Kineto parsers give the same workspace: DuckDB's JSON reader on pieces of the
traceEvents array (sources/kineto/duck_json.py, the default) and the ijson stream (the fallback).

Each test ingests the same files once per path and compares every table the Kineto source
fills, row for row, with the files' warnings and skipped counts. The fast path must not fall
back to ijson unless the test says so (`_stream` raises).
"""

from __future__ import annotations

import gzip
import json
import threading
from pathlib import Path

import pytest
from conftest import TRACES, requires_shared
from test_kineto import kernel_event, write_trace

from nsight_analyze.ingest.run import ingest
from nsight_analyze.sources import kineto
from nsight_analyze.sources.kineto import duck_json as kineto_duck
from nsight_analyze.store.workspace import open_workspace

KINETO = TRACES / "kineto"
TABLES = [
    "kernels",
    "memops",
    "cuda_api",
    "sync",
    "nvtx",
    "kineto_gpu_annotations",
    "kineto_collectives",
    "threads",
    "gpus",
    "memory_usage",
    "kineto_profiler_ranges",
]
SHARED_JOBS = [  # one job per folder (a job's ranks are distinct)
    "hta/critical_path",
    "hta/cupti_profiler",
    "hta/nccl_parser_config",
    "hta/negative_queue_length_values_check",
    "hta/ns_resolution_trace",
    "hta/trace_filter",
    "tracelens/b200",
    "tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
    "tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz",
]


def workspace(paths: list[Path], db: Path, fast: bool, monkeypatch, may_fall_back: bool = False) -> dict:
    """Every Kineto table (sorted rows), the ranks and what the files record, after one ingest."""
    with monkeypatch.context() as patch:
        patch.setattr(kineto, "FAST_PATH", fast)
        if fast and not may_fall_back:

            def no_fallback(self):
                raise AssertionError(f"the fast path fell back to ijson for {self.path}")

            patch.setattr(kineto._Loader, "_stream", no_fallback)
        report = ingest(paths, db)
    con = open_workspace(db, read_only=True)
    try:
        out = {t: sorted(con.execute(f"SELECT * FROM {t}").fetchall(), key=repr) for t in TABLES}
        out["ranks"] = con.execute("SELECT * EXCLUDE (file_id) FROM ranks ORDER BY rank").fetchall()
        out["files"] = con.execute(
            "SELECT path, source_format, status, warnings, skipped FROM files ORDER BY path"
        ).fetchall()
        out["outcomes"] = sorted((o.path.name, o.status, o.message) for o in report.outcomes)
    finally:
        con.close()
    return out


def assert_same(paths: list[Path], tmp_path: Path, monkeypatch, may_fall_back: bool = False) -> dict:
    slow = workspace(paths, tmp_path / "ijson.duckdb", False, monkeypatch)
    fast = workspace(paths, tmp_path / "fast.duckdb", True, monkeypatch, may_fall_back)
    for key in slow:
        assert fast[key] == slow[key], key
    return fast


@requires_shared
@pytest.mark.parametrize("job", SHARED_JOBS)
def test_both_paths_load_every_shared_trace_alike(job, tmp_path, monkeypatch):
    target = KINETO / job
    paths = sorted(target.glob("*.json.gz")) if target.is_dir() else [target]
    out = assert_same(paths, tmp_path, monkeypatch)
    assert all(status == "ok" for _, status, _ in out["outcomes"])


@requires_shared
def test_small_pieces_give_the_same_workspace(tmp_path, monkeypatch):
    """Many pieces per file (cut between events anywhere in the file) change nothing."""
    path = KINETO / "hta/nccl_parser_config/nccl_data.json.gz"
    whole = workspace([path], tmp_path / "whole.duckdb", True, monkeypatch)
    monkeypatch.setattr(kineto_duck, "PIECE_BYTES", 64 << 10)
    monkeypatch.setattr(kineto, "FIRST_PIECE_BYTES", 1 << 10)
    cut = workspace([path], tmp_path / "cut.duckdb", True, monkeypatch)
    assert cut == whole
    assert whole["kernels"]
    # every piece file was deleted once parsed: the parser's private folder is empty again
    assert list(kineto._shared_parser().dir.iterdir()) == []


def test_fractional_epoch_us_are_exact_on_both_paths(tmp_path, monkeypatch):
    """19 significant digits in ns: the fast path re-reads such a piece's literals as text."""
    events = ",".join(
        [
            kernel_event("1712188298123456.001", "1.5", corr=1),
            kernel_event("1712188298123456.999", "0.0015", corr=2),  # sub-ns digits: half-even
            kernel_event("1712188298123457", "2", corr=3),
            kernel_event("17.25", "3.125", corr=4),
        ]
    )
    path = tmp_path / "r.json"
    path.write_text('{"schemaVersion": 1, "traceEvents": [' + events + "]}")
    out = assert_same([path], tmp_path, monkeypatch)
    spans = sorted((k[8], k[3], k[4]) for k in out["kernels"])  # correlation_id, start_ns, end_ns
    assert spans == [
        (1, 1712188298123456001, 1712188298123457501),
        (2, 1712188298123456999, 1712188298123457001),
        (3, 1712188298123457000, 1712188298123459000),
        (4, 17250, 20375),
    ]


def test_odd_values_mean_the_same_on_both_paths(tmp_path, monkeypatch):
    """Integral floats are integers, other floats and numeric strings are not; events without
    a numeric ts/dur are counted, not loaded; non-string names and unknown categories too."""
    events = [
        json.loads(kernel_event("10", "5", corr=1, stream=7.0, grid=[2.0, 1, 1], device=0)),
        json.loads(
            kernel_event("20", "5", corr=2, stream=7.5, block=["32", 1], **{"registers per thread": "8"})
        ),
        {"ph": "X", "cat": "kernel", "name": "no ts", "pid": 0, "tid": 7, "dur": 3, "args": {}},
        {"ph": "X", "cat": "kernel", "name": "string ts", "pid": 0, "tid": 7, "ts": "30", "dur": 3},
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel_v7000",
            "pid": 9,
            "tid": "main",
            "ts": 8,
            "dur": 1,
            "args": {"correlation": 1},
        },
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaMemcpyAsync",
            "pid": 9.0,
            "tid": 5,
            "ts": 18,
            "dur": 1,
            "args": {"correlation": 2.5},
        },
        {
            "ph": "X",
            "cat": "cuda_sync",
            "name": "Event Sync",
            "pid": 9,
            "tid": 5,
            "ts": 40,
            "dur": 2,
            "args": {"device": 0, "stream": 7, "cuda_sync_kind": ""},
        },
        {"ph": "X", "cat": "user_annotation", "name": 42, "pid": 9, "tid": 5, "ts": 1, "dur": 50},
        {"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#3", "pid": 9, "tid": 5, "ts": 1, "dur": 60},
        {"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#x", "pid": 9, "tid": 5, "ts": 1, "dur": 60},
        {"ph": "M", "name": "thread_name", "pid": 9, "tid": 5, "args": {"name": "main"}},
        {"ph": "M", "name": "process_name", "pid": 9, "args": {"name": "python"}},
        {"ph": "i", "cat": "", "name": "marker", "pid": 9, "tid": 5, "ts": 3},
        {"ph": "X", "name": "no cat", "pid": 9, "tid": 5, "ts": 3, "dur": 1},
        {"ph": "f", "cat": "ac2g", "id": 1, "pid": 9, "tid": 5, "ts": 3},
    ]
    path = write_trace(tmp_path / "r.json", events, distributedInfo={"rank": 0})
    out = assert_same([path], tmp_path, monkeypatch)
    ((skipped,),) = [f[4:] for f in out["files"]]
    assert "cpu_op: 1 events (not used by nsight-analyze)" in skipped
    assert "ac2g: 1 events (not used by nsight-analyze)" in skipped
    assert len(out["kernels"]) == 2 and len(out["nvtx"]) == 2


def test_cut_inside_a_string_falls_back_to_ijson(tmp_path, monkeypatch):
    """A piece cut at a `}, {` inside a name does not parse; the file then loads through ijson,
    with nothing of the fast path's first pieces left behind."""
    tricky = "fn" + "x" * 200 + "(}, {x})"  # most of each event: a piece boundary lands in it
    events = (
        ",".join(
            kernel_event(str(100 + 10 * i), "4", name=tricky if i % 2 else "gemm", corr=i) for i in range(400)
        )
        + ',{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "pid": 0, "tid": 7,'
        ' "ts": 9000, "dur": 2, "args": {"device": 0, "stream": 7, "correlation": 999, "bytes": 8}}'
    )
    path = tmp_path / "r.json"
    path.write_text('{"schemaVersion": 1, "traceEvents": [' + events + "]}")
    monkeypatch.setattr(kineto_duck, "PIECE_BYTES", 4 << 10)
    fell_back = []
    original = kineto._Loader._stream
    monkeypatch.setattr(kineto._Loader, "_stream", lambda self: (fell_back.append(1), original(self))[1])
    report = ingest([path], tmp_path / "ws.duckdb")
    assert [o.status for o in report.outcomes] == ["ok"] and fell_back == [1]
    con = open_workspace(tmp_path / "ws.duckdb", read_only=True)
    assert con.execute("SELECT count(*), count(DISTINCT correlation_id) FROM kernels").fetchone() == (
        400,
        400,
    )
    assert con.execute("SELECT count(*) FROM kernels WHERE name = ?", [tricky]).fetchone()[0] == 200
    assert con.execute("SELECT count(*) FROM memops").fetchone()[0] == 1


def test_non_object_entries_are_counted_on_both_paths(tmp_path, monkeypatch):
    path = tmp_path / "r.json"
    path.write_text(
        '{"schemaVersion": 1, "traceEvents": ['
        + kernel_event("10", "5")
        + ', 5, "x", null, '
        + kernel_event("20", "5", corr=2)
        + "]}"
    )
    out = assert_same([path], tmp_path, monkeypatch)
    assert "non-object entries: 3 events (not used by nsight-analyze)" in out["files"][0][4]
    assert len(out["kernels"]) == 2


@pytest.mark.parametrize("piece_bytes", [kineto_duck.PIECE_BYTES, 64 << 10])
def test_gpu_from_device_properties_after_the_events(tmp_path, monkeypatch, piece_bytes):
    """A large gzip whose deviceProperties follow traceEvents: probe() leaves them to the load's
    single pass (no extra decompression), and the rank still gets its GPU and time base. The
    `}, {` between two devices is never taken for a gap between events."""
    monkeypatch.setattr(kineto_duck, "PIECE_BYTES", piece_bytes)
    one = kernel_event("1000", "5", device=0)
    filler = ",".join(
        f'{{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 9, "tid": 9, "ts": {i}, "dur": 1, '
        f'"args": {{"pad": "{"x" * 200}"}}}}'
        for i in range(kineto.SNIFF_BYTES // 250)
    )
    head = '{"schemaVersion": 1, "distributedInfo": {"rank": 5, "world_size": 8}, "traceEvents": ['
    tail = (
        '], "deviceProperties": [{"id": 0, "name": "GPU A", "numSms": 132}, {"id": 1, "name": "GPU B"}],'
        ' "baseTimeNanoseconds": 1700000000000000000}'
    )
    path = tmp_path / "rank5.pt.trace.json.gz"
    path.write_bytes(gzip.compress((head + one + "," + filler + tail).encode(), compresslevel=1))
    assert kineto.read_meta(path).tail_pending
    out = assert_same([path], tmp_path, monkeypatch)
    (rank,) = out["ranks"]
    assert rank[0] == 5 and rank[4:7] == (0, "GPU A", 1700000000000000000)
    assert out["gpus"] == [(5, 0, "GPU A", 132, None, None, None, None, None, None, None, "kineto")]


def _rank_files(folder: Path, ranks: int, events: int = 3000) -> list[Path]:
    folder.mkdir()
    body = ",".join(kernel_event(str(100 + 10 * i), "4.5", corr=i) for i in range(events))
    paths = []
    for r in range(ranks):
        path = folder / f"rank{r}.json"
        path.write_text(
            f'{{"schemaVersion": 1, "distributedInfo": {{"rank": {r}}}, "traceEvents": [{body}]}}'
        )
        paths.append(path)
    return paths


def test_the_next_file_is_read_ahead_while_one_loads(tmp_path, monkeypatch):
    """The ingest asks the source to read its first file ahead while it prepares them all, and
    each next file while one loads; every load takes its read-ahead, and the workspace is the
    one the ijson path gives."""
    paths = _rank_files(tmp_path / "job", 3)
    taken = []
    original = kineto._take_read_ahead
    monkeypatch.setattr(kineto, "_take_read_ahead", lambda path: taken.append(original(path)) or taken[-1])
    out = assert_same(paths, tmp_path, monkeypatch)
    assert [t is not None for t in taken] == [True, True, True]
    assert len(out["kernels"]) == 9000 and not kineto._read_ahead


def test_an_early_read_ahead_of_a_file_not_loaded_is_dropped(tmp_path):
    """Ingesting the same files again loads nothing (same content): the first file's early
    read-ahead is cancelled when the ingest ends, not left running."""
    paths = _rank_files(tmp_path / "job", 2)
    db = tmp_path / "w.duckdb"
    ingest(paths, db)
    report = ingest(paths, db)
    assert [o.status for o in report.outcomes] == ["unchanged", "unchanged"]
    assert not kineto._read_ahead
    assert not [t for t in threading.enumerate() if t.name.startswith("kineto-read-ahead")]


def test_read_ahead_of_a_file_never_loaded_is_dropped(tmp_path, monkeypatch):
    monkeypatch.setattr(kineto_duck, "PIECE_BYTES", 4 << 10)  # many pieces: cancelled mid-file
    monkeypatch.setattr(kineto, "FIRST_PIECE_BYTES", 1 << 10)
    paths = _rank_files(tmp_path / "job", 3)
    for path in paths:
        kineto.prefetch(path)
    assert list(kineto._read_ahead) == paths[1:]  # READ_AHEAD_FILES = 2: the oldest is dropped
    for path in paths[1:]:
        ahead = kineto._take_read_ahead(path)
        ahead.cancel()
        assert ahead.future.done()
    assert not kineto._read_ahead
    # no piece file is left in the folder every file's parse shares
    assert list(kineto._shared_parser().dir.iterdir()) == []


def test_empty_and_broken_arrays_on_both_paths(tmp_path, monkeypatch):
    """No events: loads, nothing in the tables; invalid JSON after an empty array: the same
    one-line failure as the ijson path gives (the fast path hands such files to it)."""
    empty = write_trace(tmp_path / "rank0.json", [], distributedInfo={"rank": 0})
    broken = tmp_path / "rank1.json"
    broken.write_text(  # metadata all in the head: probe() does not read the end
        '{"deviceProperties": [{"id": 0}], "distributedInfo": {"rank": 1}, "traceEvents": [] xyz}'
    )
    out = assert_same([empty, broken], tmp_path, monkeypatch, may_fall_back=True)
    assert [o[1] for o in out["outcomes"]] == ["ok", "failed"]
    assert not out["kernels"]
