"""kernel_flops: counted FLOPs of every counter source in one view (queries/hfu/kernel_flops.sql).

Expected values are computed here by hand from the raw inputs (the trace's JSON read with
json.load, the ncu CSV with the csv module), never with nsight_analyze's readers, using the
arithmetic of ../shared/docs/nsys-sqlite-schema.md §10.1 for FP64/FP32 (add + mul + 2·fma) and, for
FP16, ncu's half-roofline convention 2·hadd + 2·hmul + 4·hfma that hfu_ncu_flops already uses
(tests/test_ncu.py): the range profiler records the same smsp__ counters, so both sources must give
the same FLOPs for the same counters.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from conftest import TRACES, requires_shared
from test_kineto import kernel_event, write_trace
from test_ncu import LELEUCAS, hand_counters, hand_flops

from nsight_analyze import mfu
from nsight_analyze.ingest.run import ingest
from nsight_analyze.store.workspace import open_workspace

CUPTI_TRACE = TRACES / "kineto/hta/cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz"
OPS = ("dadd", "dmul", "dfma", "fadd", "fmul", "ffma", "hadd", "hmul", "hfma")
METRIC = "smsp__sass_thread_inst_executed_op_{}_pred_on.sum"


def hand_range_flops(args: dict) -> dict[str, int]:
    """FLOPs per precision from one cuda_profiler_range event's own counters."""
    g = {op: args[METRIC.format(op)] for op in OPS}
    return {
        "fp64": g["dadd"] + g["dmul"] + 2 * g["dfma"],
        "fp32": g["fadd"] + g["fmul"] + 2 * g["ffma"],
        "fp16": 2 * g["hadd"] + 2 * g["hmul"] + 4 * g["hfma"],
    }


def flops_by_kernel(con, source: str) -> dict[int, dict[str, float]]:
    rows = con.execute(
        "SELECT kernel_id, precision, flops FROM kernel_flops WHERE source = ? AND pipe = 'cuda_core'",
        [source],
    ).fetchall()
    out: dict[int, dict[str, float]] = {}
    for kernel_id, precision, flops in rows:
        out.setdefault(int(kernel_id), {})[precision] = flops
    return out


@requires_shared
def test_cupti_range_flops_equal_a_hand_computation(tmp_path: Path) -> None:
    with gzip.open(CUPTI_TRACE, "rt") as fh:
        events = json.load(fh)["traceEvents"]
    ranges = [e for e in events if e.get("cat") == "cuda_profiler_range"]
    assert len(ranges) == 77  # ../shared/traces/README.md: 77 cuda_profiler_range events
    # range_id is the time order (ts, then dur, then name)
    ranges.sort(key=lambda e: (e["ts"], e["dur"], e["name"]))
    expected = {i: hand_range_flops(e["args"]) for i, e in enumerate(ranges)}
    assert sum(f["fp32"] for f in expected.values()) > 0  # the trace does count FP32 work

    ingest([CUPTI_TRACE], tmp_path / "ws.duckdb")
    con = open_workspace(tmp_path / "ws.duckdb")
    got = flops_by_kernel(con, "cupti_range")
    assert got == {i: {k: float(v) for k, v in f.items()} for i, f in expected.items()}
    names = dict(
        con.execute("SELECT kernel_id, name FROM kernel_flops WHERE source = 'cupti_range'").fetchall()
    )
    assert [names[i] for i in range(77)] == [e["name"] for e in ranges]
    # the trace has no kernel events: no range can be joined, and that is said, not dropped
    assert con.execute("SELECT status, count(*) FROM cupti_range_joins GROUP BY ALL").fetchall() == [
        ("no kernel events in the trace", 77)
    ]
    warnings = [w for (ws,) in con.execute("SELECT warnings FROM files").fetchall() for w in ws or []]
    assert any("77 of 77 CUPTI range-profiler kernels cannot be joined" in w for w in warnings), warnings
    notes = mfu.hfu_mfu_summary(con)["notes"]
    assert any("77 CUPTI range-profiler kernels" in n and "not on the timeline" in n for n in notes), notes


def _range_event(ts: int, name: str, **counters: int) -> str:
    args = {METRIC.format(op): counters.get(op, 0) for op in OPS}
    return json.dumps(
        {"ph": "X", "cat": "cuda_profiler_range", "name": name, "pid": 0, "tid": 0, "ts": ts, "dur": 100,
         "args": args}
    )  # fmt: skip


@pytest.mark.parametrize("fast", [True, False], ids=["duckdb", "ijson"])
def test_ranges_join_kernels_by_name_and_order(tmp_path: Path, monkeypatch, fast: bool) -> None:
    """Kernels A, B, A on the timeline; ranges A, B, A, A, __missing__: the n-th range of a name
    goes to the n-th kernel of that name, the rest say why they cannot be joined."""
    from nsight_analyze.sources import kineto

    monkeypatch.setattr(kineto, "FAST_PATH", fast)
    kernels = [
        kernel_event("1000", "10", name="kA", corr=1),
        kernel_event("1020", "10", name="kB", corr=2),
        kernel_event("1040", "10", name="kA", corr=3),
    ]
    ranges = [
        _range_event(5000, "kA", ffma=10, fadd=1),  # kA #0 -> corr 1: 1 + 2*10 = 21 FLOP (fp32)
        _range_event(5200, "kB", dfma=4),  # kB #0 -> corr 2: 2*4 = 8 FLOP (fp64)
        _range_event(5400, "kA", hfma=3),  # kA #1 -> corr 3: 4*3 = 12 FLOP (fp16, packed pairs)
        _range_event(5600, "kA", fmul=7),  # kA #2: no third kA kernel
        _range_event(5800, "__missing__", fadd=5),  # CUPTI did not know the name
    ]
    text = '{"schemaVersion": 1, "traceEvents": [' + ", ".join(kernels + ranges) + "]}"
    path = tmp_path / "rank0.pt.trace.json"
    path.write_text(text)
    ingest([path], tmp_path / "ws.duckdb")
    con = open_workspace(tmp_path / "ws.duckdb")
    joins = con.execute(
        "SELECT range_id, name, correlation_id, status FROM cupti_range_joins ORDER BY range_id"
    ).fetchall()
    assert joins == [
        (0, "kA", 1, "joined"),
        (1, "kB", 2, "joined"),
        (2, "kA", 3, "joined"),
        (3, "kA", None, "more ranges than kernels of this name"),
        (4, "__missing__", None, "no kernel name (__missing__)"),
    ]
    timeline = con.execute(
        "SELECT correlation_id, flops, fp32_flops, fp64_flops, fp16_flops, match FROM hfu_timeline_flops "
        "ORDER BY correlation_id"
    ).fetchall()
    assert timeline == [
        (1, 21.0, 21.0, 0.0, 0.0, "cupti_range"),
        (2, 8.0, 0.0, 8.0, 0.0, "cupti_range"),
        (3, 12.0, 0.0, 0.0, 12.0, "cupti_range"),
    ]
    warnings = [w for (ws,) in con.execute("SELECT warnings FROM files").fetchall() for w in ws or []]
    assert any("2 of 5 CUPTI range-profiler kernels cannot be joined" in w for w in warnings), warnings
    hfu = mfu.hfu_table(con, peak_tflops=1.0)
    assert int(hfu["kernels_counted"].sum()) == 3
    assert float(hfu["counted_flops"].sum()) == 21 + 8 + 12


@requires_shared
def test_ncu_counters_land_in_kernel_flops(tmp_path: Path) -> None:
    path = LELEUCAS / "bert_torch_nsight.csv"
    ingest([path], tmp_path / "ws.duckdb")
    con = open_workspace(tmp_path / "ws.duckdb")
    expected = {i: hand_flops(c) for i, c in hand_counters(path).items()}
    got = flops_by_kernel(con, "ncu")
    assert set(got) == set(expected) and len(got) == 26  # README: 26 profiled launches
    for launch, flops in expected.items():
        assert got[launch] == pytest.approx(flops), launch
    # every launch is in kernel_flops, and the rows of one launch add up to hfu_ncu_flops.flops
    diff = con.execute(
        """SELECT count(*) FROM (SELECT file_id, kernel_id, sum(flops) AS s FROM kernel_flops
                                 WHERE source = 'ncu' GROUP BY ALL) k
           FULL JOIN hfu_ncu_flops f ON f.file_id = k.file_id AND f.launch_id = k.kernel_id
           WHERE k.s IS DISTINCT FROM f.flops"""
    ).fetchone()[0]
    assert diff == 0


def test_kernel_without_counters_keeps_one_row(tmp_path: Path) -> None:
    """A range event without any FLOP counter: one row with flops NULL, never dropped."""
    event = json.dumps(
        {"ph": "X", "cat": "cuda_profiler_range", "name": "k", "pid": 0, "tid": 0, "ts": 10, "dur": 5,
         "args": {"sm__cycles_elapsed.avg": 100}}
    )  # fmt: skip
    path = write_trace(tmp_path / "rank0.pt.trace.json", [json.loads(event)])
    ingest([path], tmp_path / "ws.duckdb")
    con = open_workspace(tmp_path / "ws.duckdb")
    rows = con.execute("SELECT pipe, precision, flops, missing FROM kernel_flops").fetchall()
    assert rows == [
        (
            None,
            None,
            None,
            "CUDA-core FLOP counters, tensor FLOP counters (record kineto__tensor_core_insts), DRAM bytes",
        )
    ]


H100_PROPS = [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "computeMajor": 9, "computeMinor": 0, "numSms": 132}]


@pytest.mark.parametrize("fast", [True, False], ids=["duckdb", "ijson"])
def test_cupti_range_kernels_on_the_roofline(tmp_path: Path, monkeypatch, fast: bool) -> None:
    """Range-profiler kernels with FLOP, tensor and DRAM counters get roofline points; one with
    FLOPs but no bytes, or with tensor FLOPs unknown, gets none and says why (never guessed)."""
    from nsight_analyze.sources import kineto

    monkeypatch.setattr(kineto, "FAST_PATH", fast)
    tensor, rd, wr, total = (
        "sm__inst_executed_pipe_tensor.sum",
        "dram__bytes_read.sum",
        "dram__bytes_write.sum",
        "dram__bytes.sum",
    )

    def rng(ts: int, name: str, extra: dict, **ops: int) -> dict:
        event = json.loads(_range_event(ts, name, **ops))
        event["args"].update(extra)
        return event

    events = [
        json.loads(kernel_event("1000", "10", name="kE", corr=1)),  # 10 us on the timeline
        json.loads(kernel_event("1020", "20", name="kG", corr=2)),  # 20 us
        rng(5000, "kE", {tensor: 0, rd: 3000, wr: 1000}, ffma=1000),
        rng(5200, "kG", {tensor: 0, total: 1000}, ffma=1_000_000),
        rng(5400, "kT", {tensor: 5, total: 1000}, ffma=10),
        rng(5600, "kN", {tensor: 0}, fadd=7),
    ]
    path = write_trace(tmp_path / "rank0.pt.trace.json", events, deviceProperties=H100_PROPS)
    ingest([path], tmp_path / "ws.duckdb")
    con = open_workspace(tmp_path / "ws.duckdb")
    got = {
        r[0]: r[1:]
        for r in con.execute(
            """SELECT name, flops, dram_bytes, intensity, bound, duration_ns, tensor_source, unplaced,
                      ridge_flop_per_byte, achieved_flops, attainable_flops
               FROM roofline WHERE source = 'cupti_range'"""
        ).fetchall()
    }
    # ridge: the H100 SXM table row (data/gpus.csv, the deviceProperties name's alias):
    # 66.9 TFLOP/s FP32 / 3350 GB/s
    ridge = 66.9e12 / 3350e9
    # kE: 2*1000 FLOP / (3000 + 1000 B) = 0.5 FLOP/byte < ridge; 10 us -> 2e8 FLOP/s achieved,
    # roof 0.5 * 3350e9 B/s
    f, b, i, bound, dur, ts, why, r, ach, att = got["kE"]
    assert (f, b, i, bound, dur, ts, why) == (
        2000.0,
        4000.0,
        0.5,
        "memory",
        10_000,
        "no tensor instructions",
        None,
    )
    assert (
        r == pytest.approx(ridge)
        and ach == pytest.approx(2000 / 10e-6)
        and att == pytest.approx(0.5 * 3350e9)
    )
    # kG: 2e6 FLOP / 1000 B (dram__bytes.sum) = 2000 FLOP/byte > ridge
    assert got["kG"][:5] == (2e6, 1000.0, 2000.0, "compute", 20_000)
    # kT: the tensor pipe ran 5 instructions on CC 9.0: tensor FLOPs unknown -> no point
    assert got["kT"][2:4] == (None, None) and "tensor FLOPs unknown" in got["kT"][6]
    # kN: 7 FLOP (fadd) but no DRAM counter -> no point, and the reason names the metrics to record
    assert got["kN"][:4] == (7.0, None, None, None)
    assert got["kN"][6].startswith("FLOPs but no DRAM bytes (record dram__bytes_read.sum")
    # the tensor row of a kernel whose pipe ran nothing counts 0 FLOP, so HFU is unchanged
    assert con.execute("SELECT flops FROM kernel_flops WHERE name = 'kE' AND pipe = 'tensor'").fetchall() == [
        (0.0,)
    ]
    # diagnose reads the same roofline: kE's 10 us of the 30 us of placed, timed kernels (kT and kN
    # joined no timeline kernel, so they have no duration) are memory-bound: 33.3 % >= the 30 % default
    from nsight_analyze.diagnose import diagnose

    f = next(f for f in diagnose(con) if f.id == "memory-bound")
    assert f.title == "Memory-bound kernels dominate (CUPTI range profiler roofline)"
    assert f.metrics["memory_bound_pct_of_profiled"] == pytest.approx(100 * 10 / 30)


@requires_shared
def test_real_cupti_trace_has_flops_but_no_roofline_points(tmp_path: Path) -> None:
    """The HTA trace records only the nine FLOP counters (kineto__cuda_core_flops): every kernel
    has FLOPs, none has DRAM bytes, so none is placed; the peak is its A100's table row."""
    with gzip.open(CUPTI_TRACE, "rt") as fh:
        doc = json.load(fh)
    keys = {k for e in doc["traceEvents"] if e.get("cat") == "cuda_profiler_range" for k in e["args"]}
    assert keys == {METRIC.format(op) for op in OPS}  # no dram__*, no sm__inst_executed_pipe_tensor
    # no kernel event names the device, but the 8 GPUs the trace lists are one model: the rank's
    models = {d["name"] for d in doc["deviceProperties"]}
    assert models == {"NVIDIA A100-PG509-200"} and len(doc["deviceProperties"]) == 8
    ingest([CUPTI_TRACE], tmp_path / "ws.duckdb")
    con = open_workspace(tmp_path / "ws.duckdb")
    rows = con.execute(
        "SELECT count(*), count(intensity), count(bound), count(DISTINCT unplaced), any_value(unplaced), "
        "any_value(peak_source) FROM roofline WHERE source = 'cupti_range'"
    ).fetchone()
    assert rows[:4] == (77, 0, 0, 1)
    assert rows[4].startswith("FLOPs but no DRAM bytes") and rows[5] == "table"
    assert con.execute("SELECT device_id, gpu_name FROM ranks").fetchall() == [
        (None, "NVIDIA A100-PG509-200")
    ]
    assert con.execute("SELECT name, source FROM gpus").fetchall() == [("NVIDIA A100-PG509-200", "kineto")]


def test_tensor_instructions_on_volta_count_512_flops_each(tmp_path: Path) -> None:
    """kineto__tensor_core_insts on CC 7.x: 512 FLOP per tensor instruction, the rule hfu_ncu_flops
    applies to ncu's sm__inst_executed_pipe_tensor.sum (queries/hfu/hfu_ncu_flops.sql header)."""
    event = json.loads(_range_event(10, "volta_h884gemm", fadd=3))
    event["args"]["sm__inst_executed_pipe_tensor.sum"] = 10
    props = [{"id": 0, "name": "Tesla V100-SXM2-32GB", "computeMajor": 7, "computeMinor": 0, "numSms": 80}]
    path = write_trace(tmp_path / "rank0.pt.trace.json", [event], deviceProperties=props)
    ingest([path], tmp_path / "ws.duckdb")
    con = open_workspace(tmp_path / "ws.duckdb")
    rows = con.execute(
        "SELECT pipe, precision, flops FROM kernel_flops WHERE flops > 0 ORDER BY pipe"
    ).fetchall()
    assert rows == [("cuda_core", "fp32", 3.0), ("tensor", "fp16", 10 * 512.0)]
    assert con.execute("SELECT tensor_source, precision FROM roofline").fetchall() == [("inst_x512", "fp16")]
