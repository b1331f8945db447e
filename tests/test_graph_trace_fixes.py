"""The `cuda-graphs` note's fix fits what recorded the trace (issue 52).

`nsys --cuda-graph-trace=node` is an Nsight Systems flag: offered on a PyTorch-profiler trace
(which already records each kernel a graph replays, linked to the graph launch by correlation id)
or on a ROCm one (no such flag), it sends the engineer to a capture that changes nothing.

Oracles: the raw trace JSON (the graph launch calls' names, `cudaGraphLaunch` vs `hipGraphLaunch`,
and the ROCm tracer's `roctracer_version` key), and the synthetic generator, whose nsys export
gives every graph-replayed kernel a graph node id (synth/job.py `gpu_graph_node`).
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from conftest import TRACES

from nsight_analyze.diagnose import diagnose
from nsight_analyze.ingest.run import ingest
from nsight_analyze.rules.base import Ctx
from nsight_analyze.rules.cuda_graphs import _GRAPH_FIXES, _graph_trace_fixes
from nsight_analyze.store.workspace import open_workspace

TRACE_DIFF_TEST = TRACES / "kineto" / "hta" / "trace_diff" / "test" / "test.json.gz"
VLLM_REPLAY = TRACES / "kineto" / "tracelens" / "inference" / "vllm_decode_full" / "graph_execution.json.gz"
SYN = dict(ranks=4, gpus_per_node=2, steps=8, seed=1)  # test_diagnose's shape: generated once per run


def _raw(path: Path) -> tuple[set[str], dict]:
    """The graph launch calls' names and the top-level metadata, straight from the JSON."""
    with gzip.open(path, "rt") as f:
        doc = json.load(f)
    names = {e["name"] for e in doc["traceEvents"] if "GraphLaunch" in str(e.get("name", ""))}
    return names, {k: v for k, v in doc.items() if k != "traceEvents"}


def _graph_note(path: Path, tmp_path: Path):
    db = tmp_path / "ws.duckdb"
    ingest([path], db)
    con = open_workspace(db, read_only=True)
    try:
        found = {f.id: f for f in diagnose(con)}
    finally:
        con.close()
    assert "cuda-graphs" in found, sorted(found)
    return found["cuda-graphs"]


@pytest.mark.parametrize(
    "path, launch, kind",
    [(TRACE_DIFF_TEST, "cudaGraphLaunch", "kineto"), (VLLM_REPLAY, "hipGraphLaunch", "kineto-rocm")],
    ids=["trace_diff-test", "vllm-graph_execution"],
)
def test_kineto_graph_note_never_asks_for_the_nsys_flag(path, launch, kind, tmp_path):
    if not path.exists():
        pytest.skip(f"{path} (shared real traces) is absent")
    names, top = _raw(path)
    assert names == {launch}  # the oracle: which runtime replayed the graphs
    assert ("roctracer_version" in top) == (kind == "kineto-rocm")
    note = _graph_note(path, tmp_path)
    assert note.fixes == [_GRAPH_FIXES[kind]]
    text = " ".join(f"{x.action} {x.trade_off}" for x in note.fixes)
    assert "capture again with nsys" not in text and "Nothing to change for per-kernel times" in text
    assert launch in text


def test_nsys_graph_note_follows_the_node_ids(synth_job, tmp_path):
    """The generator's nsys export records graph node ids: already traced per node, so the flag is
    not offered; the same kernels without node ids (a graph-level capture) get the flag."""
    job = synth_job(["cuda-graph"], **SYN)
    con = open_workspace(job.db, read_only=True)
    try:
        found = {f.id: f for f in diagnose(con)}
    finally:
        con.close()
    assert found["cuda-graphs"].fixes == [_GRAPH_FIXES["nsys-node"]]
    copy = tmp_path / "ws.duckdb"
    shutil.copy(job.db, copy)
    con = open_workspace(copy)
    try:
        con.execute("UPDATE kernels SET graph_node_id = NULL")
        ranks = [int(r) for (r,) in con.execute("SELECT rank FROM ranks ORDER BY rank").fetchall()]
        fixes = _graph_trace_fixes(Ctx(con, {}), ranks)
    finally:
        con.close()
    assert fixes == [_GRAPH_FIXES["nsys"]] and "--cuda-graph-trace=node" in fixes[0].action
