"""Communication fixes have one home (issue 52): rules/comm_families.py.

The `dominant-kernel` finding, the `exposed-comm` findings and the `comms` command's advice all pick
from `comm_families.FIXES` by the collective / dimension of the communication they are about, so a
rank dominated by NCCL send/recv gets point-to-point (pipeline schedule, batched transfers) fixes,
never DDP gradient bucketing, and an all-reduce kernel still gets bucketing.

Oracle: each NCCL kernel's time summed straight from the raw Kineto JSON (the `kernel` events'
`dur`), independently of the workspace; which collective a kernel runs is in its NCCL name.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from pathlib import Path

import pytest
from conftest import TRACES, copy_workspace, requires_shared, shared_ingest

from nsight_analyze.comms import comms
from nsight_analyze.diagnose import diagnose
from nsight_analyze.rules import advice
from nsight_analyze.rules.base import Ctx
from nsight_analyze.rules.comm_families import FIXES, kernel_comm_fixes

HTA = TRACES / "kineto" / "hta"
FILTER = HTA / "trace_filter"
CONTROL = HTA / "trace_diff" / "control"
# DDP / gradient all-reduce advice: what a send/recv kernel must never get
DDP_WORDS = re.compile(r"bucket|DDP|gradient reduction|no_sync|overlap-grad-reduce", re.I)
P2P_WORDS = re.compile(r"send/recv|point-to-point", re.I)


def _nccl_time_us(folder: Path) -> Counter:
    """Per NCCL kernel name, its summed duration (µs) over the folder's JSON files: the oracle."""
    out: Counter = Counter()
    for path in sorted(folder.glob("*.json.gz")):
        with gzip.open(path) as fh:
            for e in json.load(fh)["traceEvents"]:
                if str(e.get("cat", "")).lower() == "kernel" and "nccl" in str(e.get("name", "")).lower():
                    out[e["name"]] += e.get("dur", 0)
    return out


@pytest.fixture(scope="module")
def workspaces(tmp_path_factory):
    out = {}
    for key, folder in (("filter", FILTER), ("control", CONTROL)):
        if not folder.is_dir():
            pytest.skip(f"{folder} is absent")
        out[key] = copy_workspace(shared_ingest([folder])[1], tmp_path_factory.mktemp(key) / "ws.duckdb")
    return out


def _text(fixes) -> str:
    return " ".join(f"{x.action} {x.trade_off}" for x in fixes)


def test_subcategory_fixes_follow_the_collective():
    """Without a workspace, a comms kernel's subcategory picks its collective's fixes from the one
    list (a hand mapping of the NCCL collectives: send/recv is point-to-point, all-reduce gradient
    reduction)."""
    sendrecv = advice.comms_fixes("sendrecv")
    assert not DDP_WORDS.search(_text(sendrecv)) and P2P_WORDS.search(_text(sendrecv))
    assert all(x in sendrecv for x in FIXES["p2p"])
    allreduce = advice.comms_fixes("allreduce")
    assert all(x in allreduce for x in FIXES["dp"]) and DDP_WORDS.search(_text(allreduce))
    # no subcategory: how to make the dimension known, never a guessed dimension's fixes
    unknown = advice.comms_fixes(None)
    assert all(x in unknown for x in FIXES["unknown"]) and not DDP_WORDS.search(_text(unknown))


@requires_shared
@pytest.mark.parametrize("key", ["filter", "control"])
def test_sendrecv_dominated_rank_never_gets_ddp_advice(workspaces, key):
    from nsight_analyze.store.workspace import open_workspace

    oracle = _nccl_time_us({"filter": FILTER, "control": CONTROL}[key])
    top, _ = oracle.most_common(1)[0]
    assert "SendRecv" in top  # both traces: send/recv holds most NCCL kernel time
    con = open_workspace(workspaces[key], read_only=True)
    try:
        found = diagnose(con)
        ctx = Ctx(con, {})
        fixes, fams = kernel_comm_fixes(ctx, top, "sendrecv")
        # each NCCL kernel's time in the workspace's family rows equals the JSON's (µs -> ns)
        assert [f["family"] for f in fams] == ["p2p"]
        assert fams[0]["exposed_ns"] == oracle[top] * 1000
        assert fixes[: len(FIXES["p2p"])] == FIXES["p2p"] and not DDP_WORDS.search(_text(fixes))
        if "AllReduce" in " ".join(oracle):  # control: its all-reduce kernel does get bucketing
            ar = next(n for n in oracle if "AllReduce" in n)
            ar_fixes, ar_fams = kernel_comm_fixes(ctx, ar, "allreduce")
            assert [f["family"] for f in ar_fams] == ["dp"] and ar_fams[0]["exposed_ns"] == oracle[ar] * 1000
            assert DDP_WORDS.search(_text(ar_fixes))
        advice_rows = comms(con)["advice"]
    finally:
        con.close()
    assert found.job["rule_errors"] == []
    dom = next((f for f in found if f.id == "dominant-kernel"), None)
    if key == "filter":  # the SendRecv kernel is ~62 % of kernel time (above the 40 % threshold)
        assert dom is not None and dom.metrics["name"] == top
    if dom is not None and "SendRecv" in dom.metrics["name"]:
        assert not DDP_WORDS.search(_text(dom.fixes)) and P2P_WORDS.search(_text(dom.fixes))
    for f in found:
        if f.id.startswith("exposed-comm"):
            assert not DDP_WORDS.search(_text(f.fixes)), f.id
    # comms' advice: the unknown dimension (no process-group metadata in these traces) gets its
    # send/recv's fixes and how to name the groups, instead of nothing
    assert [a["dimension"] for a in advice_rows] == ["unknown"]
    assert advice_rows[0]["families"] == ["p2p"]
    assert P2P_WORDS.search(advice_rows[0]["advice"]) and not DDP_WORDS.search(advice_rows[0]["advice"])
    assert "Name the process groups" in advice_rows[0]["advice"]
