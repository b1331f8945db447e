"""Device memory: memory_usage (Kineto [memory] events, nsys CUDA_GPU_MEMORY_USAGE_EVENTS), the
per-rank peak and headroom (queries/partition/memory_peak.sql), and whether memory-hungry fixes fit.

Expected values come from the raw inputs: the TraceLens traces read with json.load, the generator's
ground truth (synth/memory.py replays its own rows in numpy) and the rows it wrote, read back with
sqlite3; never from nsight_analyze's readers.
"""

from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import TRACES, requires_shared
from test_kineto import kernel_event, write_trace

from nsight_analyze.diagnose import Fix
from nsight_analyze.rules.advice import annotate_memory, memory_fit
from nsight_analyze.store.workspace import open_workspace

H100 = TRACES / "kineto" / "tracelens" / "h100"
CUDA = 1  # c10::DeviceType::CUDA in the events' "Device Type"


def raw_memory(path: Path) -> tuple[list[dict], dict]:
    """The trace's [memory] events and its deviceProperties, by json.load."""
    with gzip.open(path, "rt") as fh:
        doc = json.load(fh)
    events = [e for e in doc["traceEvents"] if e.get("name") == "[memory]"]
    return events, {p["id"]: p for p in doc.get("deviceProperties", [])}


@requires_shared
@pytest.mark.parametrize(
    "name, events",  # ../shared/traces issue 20: 2,450 and 236 [memory] events
    [
        ("Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz", 2450),
        ("gaunernst_bert-small-uncased__1016001.json.gz", 236),
    ],
)
@pytest.mark.parametrize("fast", [True, False], ids=["duckdb", "ijson"])
def test_tracelens_peak_is_the_max_total_allocated(workspace_of, monkeypatch, name, events, fast):
    from nsight_analyze.sources import kineto

    monkeypatch.setattr(kineto, "FAST_PATH", fast)
    path = H100 / name
    raw, props = raw_memory(path)
    assert len(raw) == events
    cuda = [e for e in raw if e["args"]["Device Type"] == CUDA]
    expected_peak = max(e["args"]["Total Allocated"] for e in cuda)
    expected_reserved = max(e["args"]["Total Reserved"] for e in cuda)
    device = {e["args"]["Device Id"] for e in cuda}
    assert device == {0}
    capacity = props[0]["totalGlobalMem"]  # 85,018,279,936 B on this H100 80GB HBM3

    con = workspace_of(path)
    rows = con.execute(
        "SELECT rank, device_id, source, samples, peak_bytes_in_use, peak_bytes_reserved, capacity_bytes, "
        "capacity_source, headroom_bytes FROM memory_peak"
    ).fetchall()
    assert rows == [
        (
            0,
            0,
            "kineto",
            len(cuda),
            expected_peak,
            expected_reserved,
            capacity,
            "recorded",
            capacity - expected_peak,
        )
    ]
    # the CPU events are counted, not loaded
    skipped = con.execute("SELECT skipped FROM files").fetchone()[0]
    assert (
        f"[memory] of a non-CUDA device: {len(raw) - len(cuda)} events (not used by nsight-analyze)"
        in skipped
    )
    assert "it fits" in memory_fit(con)


def test_generator_memory_rows_give_their_known_peak(synth_job):
    job = synth_job(["memory-usage"], ranks=2, gpus_per_node=2, steps=3)
    out, doc = job.traces, job.truth
    truth = {r["rank"]: r for r in doc["memory_usage"]["ranks"]}
    assert doc["memory_usage"]["capacity_bytes"] == 85_045_870_592  # the generator's TARGET_INFO_GPU
    for rank, t in truth.items():  # the rows themselves, read back with sqlite3, in the layout of the
        # real saxpy export's table (columns checked below)
        con = sqlite3.connect(out / f"report_rank{rank}.sqlite")
        cols = [r[1] for r in con.execute("PRAGMA table_info(CUDA_GPU_MEMORY_USAGE_EVENTS)")]
        n, device = con.execute(
            "SELECT count(*), count(*) FILTER (WHERE memKind IN (2, 5)) FROM CUDA_GPU_MEMORY_USAGE_EVENTS"
        ).fetchone()
        con.close()
        assert cols == [
            "start", "globalPid", "deviceId", "contextId", "address", "pc", "bytes", "memKind",
            "memoryOperationType", "name", "correlationId",
        ]  # fmt: skip
        assert (n, device) == (t["rows"], t["device_rows"])
        assert t["peak_bytes_in_use"] > t["final_bytes_in_use"]  # the peak is reached mid-run
    ws = open_workspace(job.db, read_only=True)
    got = ws.execute(
        "SELECT rank, source, samples, peak_bytes_in_use, peak_ts_ns, capacity_bytes, capacity_source "
        "FROM memory_peak ORDER BY rank"
    ).fetchall()
    assert got == [
        (r, "nsys", t["device_rows"], t["peak_bytes_in_use"], t["peak_ts_ns"], 85_045_870_592, "recorded")
        for r, t in sorted(truth.items())
    ]
    skipped = ws.execute("SELECT skipped FROM files WHERE path LIKE '%.sqlite'").fetchall()
    assert len(skipped) == 2
    assert all(
        "CUDA_GPU_MEMORY_USAGE_EVENTS: 1 rows of host or managed memory (not device memory)" in s
        for (s,) in skipped
    )
    ws.close()


def test_clean_generated_job_has_no_memory_rows(synth_job):
    job = synth_job(ranks=1, gpus_per_node=1, steps=2)
    con = sqlite3.connect(job.traces / "report_rank0.sqlite")
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    con.close()
    assert "CUDA_GPU_MEMORY_USAGE_EVENTS" not in tables
    ws = open_workspace(job.db, read_only=True)
    assert ws.execute("SELECT count(*) FROM memory_peak").fetchone()[0] == 0
    assert "no device-memory events" in memory_fit(ws)
    ws.close()


@requires_shared
def test_empty_real_memory_table_loads_nothing(workspace_of):
    """The pipit saxpy export has CUDA_GPU_MEMORY_USAGE_EVENTS with its real columns and no rows."""
    ws = workspace_of(TRACES / "nsys" / "pipit" / "saxpy-mpi-cuda_nsys_perlmutter0.sqlite")
    assert ws.execute("SELECT count(*) FROM memory_usage").fetchone()[0] == 0


def _memory_event(ts: int, allocated: int, reserved: int, device_type: int = CUDA) -> dict:
    return {
        "ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts,
        "args": {"Total Reserved": reserved, "Total Allocated": allocated, "Bytes": 0, "Addr": 1,
                 "Device Id": 0 if device_type == CUDA else -1, "Device Type": device_type},
    }  # fmt: skip


@pytest.mark.parametrize(
    "props, capacity, source",
    [
        ([], None, "unknown"),  # no GPU recorded: capacity unknown, never guessed
        ([{"id": 0, "name": "NVIDIA A100-SXM4-40GB"}], 40_000_000_000, "name"),  # nominal 40 GB from the name
        (
            [{"id": 0, "name": "NVIDIA A100-SXM4-40GB", "totalGlobalMem": 42_505_273_344}],
            42_505_273_344,
            "recorded",
        ),
    ],
)
def test_capacity_recorded_nominal_or_unknown(tmp_path, workspace_of, props, capacity, source):
    gib = 1 << 30
    events = [
        json.loads(kernel_event("900", "10")),
        _memory_event(1000, 3 * gib, 4 * gib),
        _memory_event(1100, 5 * gib, 6 * gib),  # the peak: 5 GiB allocated, 6 GiB reserved
        _memory_event(1200, 2 * gib, 6 * gib),
        _memory_event(1150, 9 * gib, 9 * gib, device_type=0),  # host memory: not device memory
    ]
    path = write_trace(tmp_path / "rank0.pt.trace.json", events, deviceProperties=props)
    con = workspace_of(path)
    row = con.execute(
        "SELECT peak_bytes_in_use, peak_ts_ns, peak_bytes_reserved, capacity_bytes, capacity_source, "
        "headroom_bytes FROM memory_peak"
    ).fetchone()
    assert row == (
        5 * gib,
        1_100_000,
        6 * gib,
        capacity,
        source,
        None if capacity is None else capacity - 5 * gib,
    )
    fit = memory_fit(con)
    if capacity is None:
        assert "capacity is unknown, so whether it fits is unknown" in fit
    else:
        # 6 GiB reserved of 37.3 / 39.6 GiB: more than that again is free
        assert "it fits: room to about double" in fit


def test_memory_hungry_fixes_say_whether_they_fit(tmp_path, workspace_of):
    gib = 1 << 30
    events = [json.loads(kernel_event("900", "10")), _memory_event(1000, 70 * gib, 75 * gib)]
    props = [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85_018_279_936}]
    path = write_trace(tmp_path / "rank0.pt.trace.json", events, deviceProperties=props)
    con = workspace_of(path)
    batch = Fix("Larger micro-batch so each kernel gets more blocks", "more memory; convergence changes")
    other = Fix("Fuse the small kernels", "compile time")
    finding = SimpleNamespace(fixes=[batch, other])
    annotate_memory(con, [finding, SimpleNamespace(fixes=[batch])])  # the same Fix in two findings
    # 75 GiB reserved of 79.2 GiB: 4.2 GiB free, below 10% of the capacity
    assert batch.trade_off == (
        "more memory; convergence changes; memory: peak 70.0 GiB allocated (75.0 GiB reserved by the caching "
        "allocator) of 79.2 GiB on rank 0: it does not fit without freeing memory first"
    )
    assert other.trade_off == "compile time"
