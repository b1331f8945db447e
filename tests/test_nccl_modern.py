"""Modern NCCL in nsys traces (issue 52): the advanced NCCL trace's apiId and copy-engine collectives.

No public capture of Nsight Systems' advanced NCCL trace (2025.6.1+, NCCL >= 2.28) exists yet: the
layout (range names `API Group`, `GroupLaunch`, `KernelLaunch`, `CE Sync`, `CE Batch`; payload keys
`apiId`, `apiGroupId`, `commHash`, `seqNumber`) follows the documents (docs/metrics.md "Collectives").
Expected values come from the generator's ground truth (`synth --parallel ... --nccl-trace
--ce-collectives`: synth/parallel.py records every operation instance it simulated, its apiId and
its members' correlation ids, and computes the time partition from its own events, treating the
copy-engine copies as communication), never from the SQL under test.
"""

from __future__ import annotations

import duckdb
import pytest
from conftest import nsys_traces, requires_shared

from nsight_analyze.errors import UserError
from nsight_analyze.ingest.run import ingest
from nsight_analyze.partition import TP_COLUMNS
from nsight_analyze.store.workspace import open_workspace
from nsight_analyze.synth import generate

# 4 ranks, 2 per node: TP pairs inside a node (AllReduce kernels and copy-engine AllGathers), PP
# send/recv across the two nodes
JOB = {"ranks": 4, "gpus_per_node": 2, "steps": 2, "parallel": "tp=2,pp=2,dp=1"}


@pytest.fixture(scope="module")
def modern(tmp_path_factory):
    out = tmp_path_factory.mktemp("modern")
    truth = generate(out / "job", nccl_trace=True, ce_collectives=True, **JOB)
    db = str(out / "ws.duckdb")
    ingest([out / "job"], db, analyze="all")  # the tests read its tables with plain connections
    return db, truth


def _groups(rows) -> set[frozenset]:
    """{(op, comm, seq): members} -> the set of member sets (the instances as groups of operations)."""
    out: dict[tuple, set] = {}
    for rank, corr, *key in rows:
        out.setdefault(tuple(key), set()).add((rank, corr))
    return {frozenset(v) for v in out.values()}


def _truth_groups(truth: dict, copy_engine: bool | None = None) -> set[frozenset]:
    """The truth's instances as member sets: kernels' (False), copy-engine ones (True) or all (None)."""
    ops = [o for o in truth["parallel"]["operations"] if copy_engine in (None, o["copy_engine"])]
    return {frozenset((r, c) for r, c in o["members"]) for o in ops}


def _matched(db: str) -> tuple[list, list]:
    con = duckdb.connect(db, read_only=True)
    try:
        rows = con.execute("SELECT rank, correlation_id, op, comm, seq FROM merge_coll_members").fetchall()
        keys = con.execute(
            "SELECT op, key_source, COUNT(*), BOOL_AND(complete) FROM merge_coll_members "
            "GROUP BY ALL ORDER BY ALL"
        ).fetchall()
    finally:
        con.close()
    return rows, keys


def test_api_id_matches_the_truths_instances(modern):
    """Every NCCL kernel (and copy-engine collective: nccl_ce_ops) is grouped with exactly the truth's
    partners. The kernel's launch lies in NCCL's KernelLaunch range, which names only its group
    (apiGroupId): the apiId comes from the group's API range (_merge_nccl_payload); without that step
    the kernels fell back to stream ordinals (key_source 'stream-ordinal')."""
    db, truth = modern
    rows, keys = _matched(db)
    assert _groups(rows) == _truth_groups(truth)
    # truth: every all-reduce instance has the 2 kernels of its TP pair (2 steps x 2 pairs x 16 =
    # 64 instances); the send/recv kernels (2 steps x 4 ranks x 4) are paired by peer (apiId is not
    # used for point-to-point)
    n_ar = sum(1 for o in truth["parallel"]["operations"] if o["op"] == "AllReduce")
    n_p2p = sum(len(o["members"]) for o in truth["parallel"]["operations"] if o["op"] in ("Send", "Recv"))
    # and one copy-engine AllGather per forward micro-batch and TP pair (2 steps x 2 pairs x 2)
    n_ag = sum(1 for o in truth["parallel"]["operations"] if o["op"] == "AllGather")
    assert (n_ar, n_p2p, n_ag) == (64, 32, 8)
    assert keys == [
        ("AllGather", "nccl-api-id", 2 * n_ag, True),
        ("AllReduce", "nccl-api-id", 2 * n_ar, True),
        ("SendRecv", "peer", n_p2p, True),
    ]
    con = duckdb.connect(db, read_only=True)
    try:
        got = dict(
            con.execute(
                "SELECT rank || ':' || correlation_id, seq FROM merge_nccl_kernels WHERE op = 'AllReduce'"
            ).fetchall()
        )
    finally:
        con.close()
    want = {
        f"{r}:{c}": o["api_id"]
        for o in truth["parallel"]["operations"]
        if o["op"] == "AllReduce"
        for r, c in o["members"]
    }
    assert got == want  # seq = NCCL's apiId as written by the generator


def test_api_id_holds_when_timestamps_mislead(modern, tmp_path):
    """Rank 0's first two tensor-parallel all-reduce kernels swap places in time (as a capture whose
    rows come in no guaranteed order, or a clock glitch, could show them): an ordinal pairs each with
    the other's partner; the apiId keeps the truth's instances."""
    db, truth = modern
    copy = tmp_path / "ws.duckdb"
    copy.write_bytes(open(db, "rb").read())
    con = duckdb.connect(str(copy))
    first_two = con.execute(
        "SELECT correlation_id, start_ns, end_ns FROM kernels WHERE rank = 0 "
        "AND name LIKE 'ncclDevKernel_AllReduce%' ORDER BY start_ns LIMIT 2"
    ).fetchall()
    (c1, s1, e1), (c2, s2, e2) = first_two
    con.execute(f"UPDATE kernels SET start_ns = {s2}, end_ns = {e2} WHERE rank = 0 AND correlation_id = {c1}")
    con.execute(f"UPDATE kernels SET start_ns = {s1}, end_ns = {e1} WHERE rank = 0 AND correlation_id = {c2}")
    con.execute("UPDATE files SET sha256 = 'edited-' || sha256")  # same row counts: mark the ranks changed
    con.close()
    con = open_workspace(str(copy))  # recomputes
    con.close()
    rows, keys = _matched(str(copy))
    want = _truth_groups(truth)
    assert _groups(rows) == want
    # the edit does mislead an ordinal: by start time rank 0's first all-reduce is now c2, whose
    # truth partner on rank 1 is not rank 1's first all-reduce
    con = duckdb.connect(str(copy), read_only=True)
    try:
        firsts = con.execute(
            "SELECT rank, arg_min(correlation_id, start_ns) FROM kernels "
            "WHERE rank IN (0, 1) AND name LIKE 'ncclDevKernel_AllReduce%' GROUP BY rank ORDER BY rank"
        ).fetchall()
    finally:
        con.close()
    assert frozenset(firsts) not in want


def test_copy_engine_collectives_count_as_communication(modern):
    """The copy-engine AllGathers' memcpys are exactly the truth's (nccl_ce_copies), are category
    comms in gpu_ops, and the time partition equals the truth's, which counts them as communication
    (the job has no other copy: copies_total_ns is 0 in the truth)."""
    db, truth = modern
    ce = _truth_groups(truth, copy_engine=True)
    assert ce  # truth: one AllGather per forward micro-batch and TP pair
    con = duckdb.connect(db, read_only=True)
    try:
        got = set(con.execute("SELECT rank, correlation_id FROM nccl_ce_copies").fetchall())
        cats = con.execute("SELECT DISTINCT category FROM gpu_ops WHERE op = 'memcpy'").fetchall()
        cols = ", ".join(TP_COLUMNS)
        tp = {
            (r[0], r[1]): dict(zip(TP_COLUMNS, r[2:], strict=True))
            for r in con.execute(f"SELECT rank, step, {cols} FROM time_partition").fetchall()
        }
    finally:
        con.close()
    assert got == set().union(*ce)
    assert cats == [("comms",)]
    assert len(tp) == len(truth["partition"])
    for want in truth["partition"]:
        key = (want["rank"], want["step"])
        assert {c: int(tp[key][c]) for c in TP_COLUMNS} == {c: want[c] for c in TP_COLUMNS}, key
    assert all(w["copies_total_ns"] == 0 for w in truth["partition"])
    # the copies are there: the comms time of a rank exceeds its NCCL kernels' union by their time
    assert sum(w["comms_total_ns"] for w in truth["partition"] if w["step"] is None) > sum(
        d["total_ns"] for d in truth["comms_by_dimension"].values()
    )


def _ce_members_by_rank(truth: dict) -> dict[int, set[int]]:
    """{rank: correlation ids of its copy-engine copies}, from the generator's truth."""
    out: dict[int, set[int]] = {}
    for o in truth["parallel"]["operations"]:
        if o["copy_engine"]:
            for r, c in o["members"]:
                out.setdefault(r, set()).add(c)
    return out


def test_copy_engine_copies_are_not_copy_findings(modern, tmp_path):
    """A copy-engine collective's memcpy is communication: the copy rules (diag_copy_calls, read by
    diag_sync_copies, the excessive-sync rule's nsys cuda-async-memcpy list) leave it out, and
    memop_summary lists it flagged comms, not silently dropped.

    Edited copy of the workspace: every copy's destination is made Pageable (so nsys'
    cuda-async-memcpy rule would list each cudaMemcpyAsync), and rank 0's `CE Batch` / `CE Sync`
    ranges are renamed, so its copies are no longer NCCL's (the control: the same copies, only the
    ranges differ); rank 0's first copy is made a device-to-device peer copy (kind PtoP, which
    gpu_ops counts as communication too). Expected from the generator's truth: rank 0's other
    copy-engine copies are listed, those of ranks 1-3 are not; memop_summary has each rank's
    copies, comms on ranks 1-3 and for rank 0's PtoP copy only."""
    db, truth = modern
    ce = _ce_members_by_rank(truth)
    assert sorted(ce) == [0, 1, 2, 3] and all(ce.values())  # truth: every TP rank runs CE AllGathers
    con = duckdb.connect(db, read_only=True)
    try:
        # unedited: the job's only memops are the truth's CE copies (copies_total_ns 0), none paired
        assert con.execute("SELECT COUNT(*) FROM diag_copy_calls").fetchone()[0] == 0
        summary = con.execute(
            "SELECT rank, kind, instances, comms FROM memop_summary ORDER BY rank"
        ).fetchall()
    finally:
        con.close()
    # truth: the CE copies are DtoD memcpys (synth/parallel_program.py: K.memcpy("DtoD", ...))
    assert summary == [(r, "DtoD", len(ce[r]), True) for r in sorted(ce)]

    copy = tmp_path / "ws.duckdb"
    copy.write_bytes(open(db, "rb").read())
    con = duckdb.connect(str(copy))
    con.execute("UPDATE memops SET dst_kind = 'Pageable'")
    con.execute(
        "UPDATE nvtx SET text = 'not NCCL ' || text WHERE rank = 0 AND text IN ('CE Batch', 'CE Sync')"
    )
    peer = min(ce[0])
    con.execute(
        f"UPDATE memops SET kind = 'PtoP', dst_kind = 'Device' WHERE rank = 0 AND correlation_id = {peer}"
    )
    con.execute("UPDATE files SET sha256 = 'edited-' || sha256")  # mark the ranks changed
    con.close()
    con = open_workspace(str(copy))  # recomputes
    con.close()
    con = duckdb.connect(str(copy), read_only=True)
    try:
        listed = con.execute(
            "SELECT rank, correlation_id, nsys_rule FROM diag_sync_copies() ORDER BY ALL"
        ).fetchall()
        summary = con.execute(
            "SELECT rank, kind, instances, comms FROM memop_summary ORDER BY rank, kind"
        ).fetchall()
    finally:
        con.close()
    assert listed == [(0, c, "cuda-async-memcpy") for c in sorted(ce[0] - {peer})]
    assert summary == [(0, "DtoD", len(ce[0]) - 1, False), (0, "PtoP", 1, True)] + [
        (r, "DtoD", len(ce[r]), True) for r in sorted(ce) if r != 0
    ]


def test_ce_collectives_need_the_advanced_trace(tmp_path):
    with pytest.raises(UserError, match="needs --nccl-trace"):
        generate(tmp_path / "a", ce_collectives=True, **JOB)


@requires_shared
@pytest.mark.slow
@pytest.mark.parametrize("trace", nsys_traces(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_real_traces_have_no_copy_engine_collectives(trace, workspace_of):
    """The shared nsys captures predate NCCL 2.28 (legacy NCCL ranges or none): no memop is a
    copy-engine collective's, so gpu_ops keeps every memcpy but PtoP as memory."""
    con = workspace_of(trace)
    assert con.execute("SELECT COUNT(*) FROM nccl_ce_copies").fetchone()[0] == 0
    got = con.execute("SELECT COUNT(*) FILTER (WHERE category = 'comms') FROM gpu_ops WHERE op <> 'kernel'")
    assert got.fetchone()[0] == con.execute("SELECT COUNT(*) FROM memops WHERE kind = 'PtoP'").fetchone()[0]


# ------------------------------------------------------------------------------------------------
# PyTorch-profiler traces: the collective's "Seq" in its process group, then the group and order


def _kineto_rank(path, rank: int, seqs: list[int], with_seq: bool = True):
    """One rank's Kineto trace: an all-reduce kernel per entry of seqs on process group '0' (2 ranks),
    10 us apart, each with PyTorch's kernel args (newer PyTorch puts them on the kernel)."""
    import json

    kernel = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
    events = []
    for i, s in enumerate(seqs):
        args = {
            "device": 0, "stream": 20, "correlation": 100 + s, "grid": [1, 1, 1], "block": [32, 1, 1],
            "Collective name": "allreduce", "dtype": "BFloat16", "In msg nelems": 1024,
            "Out msg nelems": 1024, "Group size": 2, "Process Group Name": "0",
            "Process Group Description": "default_pg", "Process Group Ranks": "[0, 1]",
        }  # fmt: skip
        if with_seq:
            args["Seq"] = s
        events.append({
            "ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 20,
            "ts": 1000 + 10 * i, "dur": 5, "args": args,
        })  # fmt: skip
    doc = {"schemaVersion": 1, "distributedInfo": {"rank": rank, "world_size": 2}, "traceEvents": events}
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("fast", [True, False])
def test_kineto_seq_matches_across_ranks(tmp_path, monkeypatch, fast):
    """Rank 1's trace lacks the collective of Seq 2 (hand-made: rank 0 ran Seq 1-4, rank 1 Seq 1, 3,
    4). Matching by PyTorch's Seq pairs Seq 3 with Seq 3 and leaves rank 0's Seq 2 alone; an ordinal
    would pair rank 1's second kernel (Seq 3) with rank 0's second (Seq 2). Both Kineto readers (the
    DuckDB fast path and the ijson fallback) store the Seq."""
    from nsight_analyze.sources import kineto

    monkeypatch.setattr(kineto, "FAST_PATH", fast)
    a = _kineto_rank(tmp_path / "rank0.json", 0, [1, 2, 3, 4])
    b = _kineto_rank(tmp_path / "rank1.json", 1, [1, 3, 4])
    db = str(tmp_path / "ws.duckdb")
    ingest([a, b], db)
    con = duckdb.connect(db, read_only=True)
    try:
        stored = con.execute(
            "SELECT rank, correlation_id, seq FROM kineto_collectives ORDER BY ALL"
        ).fetchall()
        rows = con.execute(
            "SELECT rank, correlation_id, op, comm, seq FROM merge_coll_members ORDER BY ALL"
        ).fetchall()
        sources = con.execute("SELECT DISTINCT key_source, comm FROM merge_coll_members").fetchall()
    finally:
        con.close()
    # correlation id = 100 + Seq in the hand-made traces
    assert stored == [
        (0, 101, 1),
        (0, 102, 2),
        (0, 103, 3),
        (0, 104, 4),
        (1, 101, 1),
        (1, 103, 3),
        (1, 104, 4),
    ]
    assert _groups(rows) == {
        frozenset({(0, 101), (1, 101)}),
        frozenset({(0, 102)}),
        frozenset({(0, 103), (1, 103)}),
        frozenset({(0, 104), (1, 104)}),
    }
    assert sources == [("kineto-seq", "pg:0[0,1]")]


def test_kineto_process_group_and_order_without_seq(tmp_path):
    """Without Seq (older PyTorch), kernels are matched by process group and their order in it: the
    n-th all-reduce of group '0' on each rank (hand-made: 3 on each rank, correlation id 100 + n)."""
    a = _kineto_rank(tmp_path / "rank0.json", 0, [1, 2, 3], with_seq=False)
    b = _kineto_rank(tmp_path / "rank1.json", 1, [1, 2, 3], with_seq=False)
    db = str(tmp_path / "ws.duckdb")
    ingest([a, b], db)
    con = duckdb.connect(db, read_only=True)
    try:
        rows = con.execute("SELECT rank, correlation_id, op, comm, seq FROM merge_coll_members").fetchall()
        sources = con.execute("SELECT DISTINCT key_source, complete FROM merge_coll_members").fetchall()
    finally:
        con.close()
    assert _groups(rows) == {frozenset({(0, 100 + n), (1, 100 + n)}) for n in (1, 2, 3)}
    assert sources == [("kineto-pg-order", True)]
