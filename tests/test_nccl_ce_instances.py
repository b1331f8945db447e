"""Copy-engine NCCL collectives as collective instances (issue 52, "Modern stacks").

A copy-engine collective (NCCL >= 2.28 `ce-coll`) has no kernel: its transfer is a memcpy issued
inside NCCL's `CE Batch` range. _nccl_ce_ops makes it one operation per rank, merge_nccl_kernels keys
it like a kernel (apiId of its API range), so it becomes a row of `collectives` with its waits, skew
and bus bandwidth, and enters comm_groups / comm_ops. No public capture has such collectives: the
expected values are the generator's ground truth (`synth --parallel ... --nccl-trace
--ce-collectives`; synth/nccl_instances.py derives each instance's skew, last rank, waits, transfer
time and bus bandwidth, and the communication per dimension counting the copies, from the
generator's own events), never from the SQL under test.
"""

from __future__ import annotations

import duckdb
import pytest

from nsight_analyze.comms import comms
from nsight_analyze.ingest.run import ingest
from nsight_analyze.store.workspace import open_workspace
from nsight_analyze.synth import generate

# 4 ranks, 2 per node: TP pairs inside a node (AllReduce kernels and copy-engine AllGathers), PP
# send/recv across the two nodes (as tests/test_nccl_modern.py)
JOB = {"ranks": 4, "gpus_per_node": 2, "steps": 2, "parallel": "tp=2,pp=2,dp=1"}


@pytest.fixture(scope="module")
def ce_job(tmp_path_factory):
    out = tmp_path_factory.mktemp("ce")
    truth = generate(out / "job", nccl_trace=True, ce_collectives=True, **JOB)
    db = str(out / "ws.duckdb")
    ingest([out / "job"], db, analyze="all")
    return db, truth


def _ce_instances(truth: dict) -> list[dict]:
    got = [i for i in truth["parallel"]["instances"] if i["copy_engine"]]
    assert got  # truth: one AllGather per forward micro-batch and TP pair
    return got


def _query(db: str, sql: str) -> list[tuple]:
    con = duckdb.connect(db, read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_each_copy_engine_collective_is_one_operation_per_rank(ce_job):
    """merge_nccl_kernels has one copy-engine row per truth member (rank, correlation id of its
    memcpy), keyed by the truth's apiId, with the API range's op, communicator and message size."""
    db, truth = ce_job
    got = _query(
        db,
        "SELECT rank, correlation_id, op, comm, seq, bytes, key_source, comm_size FROM merge_nccl_kernels "
        "WHERE engine = 'copy-engine' ORDER BY ALL",
    )
    want = sorted(
        (r, c, i["op"], i["comm"], i["api_id"], i["bytes"], "nccl-api-id", 2)
        for i in _ce_instances(truth)
        for r, c in i["members"]
    )  # comm_size 2: the TP pairs' CommInit payloads (truth communicators)
    assert got == want
    # no copy is counted as a kernel too: the kernel rows are exactly the truth's kernel members
    kernels = _query(db, "SELECT rank, correlation_id FROM merge_nccl_kernels WHERE engine = 'kernel'")
    members = {
        (r, c) for o in truth["parallel"]["operations"] if not o["copy_engine"] for r, c in o["members"]
    }
    assert sorted(kernels) == sorted(members)


def test_copy_engine_instances_have_skew_waits_and_bandwidth(ce_job):
    """Each copy-engine AllGather is a complete `collectives` row whose skew, last rank, transfer
    time and bus bandwidth are the truth's, and collective_waits has each member's wait. The TP
    pairs share a node (one clock), so the aligned times equal the truth's to the nanosecond."""
    db, truth = ce_job
    coll_of = dict(
        ((r, c), k) for r, c, k in _query(db, "SELECT rank, correlation_id, coll_id FROM merge_coll_members")
    )
    rows = {
        r[0]: r[1:]
        for r in _query(
            db,
            "SELECT coll_id, op, comm, seq, ranks, complete, bytes, start_skew_ns, last_rank, transfer_ns, "
            "busbw_gbps, key_source FROM collectives",
        )
    }
    waits = {(k, r): w for k, r, w in _query(db, "SELECT coll_id, rank, wait_ns FROM collective_waits")}
    for i in _ce_instances(truth):
        (coll,) = {coll_of[tuple(m)] for m in i["members"]}
        op, comm, seq, ranks, complete, nbytes, skew, last, transfer, busbw, source = rows[coll]
        assert (op, comm, seq, ranks, complete, nbytes, source) == (
            i["op"], i["comm"], i["api_id"], len(i["members"]), True, i["bytes"], "nccl-api-id",
        )  # fmt: skip
        assert (skew, last, transfer) == (i["start_skew_ns"], i["last_rank"], i["transfer_ns"])
        assert busbw == pytest.approx(i["busbw_gbps"], rel=1e-12)
        assert {r: waits[(coll, r)] for r, _ in i["members"]} == {int(r): w for r, w in i["waits_ns"].items()}


def test_communication_by_dimension_counts_copy_engine_collectives(ce_job):
    """comms by dimension (comm_groups, which `runs` reads too) equals the truth counting kernels and
    copy-engine copies (total exact, exposed within 1 % as tests/test_comms.py), more than the
    kernels-only truth; comms by collective lists the AllGathers of each TP pair with the truth's
    instances and bytes."""
    db, truth = ce_job
    con = open_workspace(db, read_only=True)
    try:
        by_dim = {r["dimension"]: r for r in comms(con, "dimension")["rows"]}
        by_op = [r for r in comms(con, "collective")["rows"] if r["op"] == "AllGather"]
    finally:
        con.close()
    want = truth["parallel"]["comms_by_dimension_with_ce"]
    assert set(by_dim) == set(want) == {"tp", "pp"}
    for dim, w in want.items():
        assert by_dim[dim]["total_ns"] == w["total_ns"], dim
        assert by_dim[dim]["exposed_ns"] == pytest.approx(w["exposed_ns"], rel=0.01), dim
    assert want["tp"]["total_ns"] > truth["comms_by_dimension"]["tp"]["total_ns"]  # the copies' time
    inst = _ce_instances(truth)
    per_comm = {c: [i for i in inst if i["comm"] == c] for c in {i["comm"] for i in inst}}
    assert sorted((r["group_key"], r["dimension"], r["instances"], r["bytes"]) for r in by_op) == sorted(
        (c, "tp", len(v), sum(i["bytes"] * len(i["members"]) for i in v)) for c, v in per_comm.items()
    )


NEW_CORR = 1_000_000  # a correlation id no rank uses (the generator's are per-rank counters < 1000)


def _edited(ce_job, tmp_path, edit) -> tuple:
    """A copy of the job's workspace in which `edit(con, copy_corr)` changed rank 0's first
    copy-engine collective (its memcpy's correlation id copy_corr), its ranks marked changed and
    recomputed: (path, truth, that instance, copy_corr)."""
    db, truth = ce_job
    first = min(_ce_instances(truth), key=lambda i: i["api_id"])
    (copy_corr,) = [c for r, c in first["members"] if r == 0]
    path = tmp_path / "ws.duckdb"
    path.write_bytes(open(db, "rb").read())
    con = duckdb.connect(str(path))
    edit(con, copy_corr)
    con.execute("UPDATE files SET sha256 = 'edited-' || sha256")  # mark the ranks changed
    con.close()
    con = open_workspace(str(path))  # recomputes
    con.close()
    return str(path), truth, first, copy_corr


def test_a_collective_with_a_kernel_is_counted_once(ce_job, tmp_path):
    """Edited copy: rank 0's first copy-engine AllGather also launches an NCCL AllGather kernel (a
    cudaLaunchKernel call inside the same CE Batch range, so the same API range and apiId). The
    operation is then the kernel's: one row for it on rank 0, no copy-engine row, and the instance
    still has the truth's two members (rank 0's kernel instead of its memcpy)."""
    new = NEW_CORR

    def edit(con, copy_corr):
        con.execute(
            f"INSERT INTO cuda_api SELECT * REPLACE ({new} AS correlation_id, 'cudaLaunchKernel' AS name) "
            f"FROM cuda_api WHERE rank = 0 AND correlation_id = {copy_corr}"
        )
        con.execute(
            "INSERT INTO kernels SELECT k.* REPLACE ("
            f"{new} AS correlation_id, m.start_ns AS start_ns, m.end_ns AS end_ns, "
            "m.duration_ns AS duration_ns, "
            "'ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)' AS name) "
            "FROM (SELECT * FROM kernels WHERE rank = 0 AND name LIKE 'ncclDevKernel_AllReduce%' "
            "LIMIT 1) AS k, "
            f"(SELECT * FROM memops WHERE rank = 0 AND correlation_id = {copy_corr}) AS m"
        )

    path, truth, first, _ = _edited(ce_job, tmp_path, edit)
    got = _query(
        str(path),
        "SELECT rank, correlation_id, engine FROM merge_nccl_kernels WHERE op = 'AllGather' "
        f"AND seq = {first['api_id']} ORDER BY rank",
    )
    (peer,) = [(r, c) for r, c in first["members"] if r != 0]
    assert got == [(0, new, "kernel"), (peer[0], peer[1], "copy-engine")]
    members = _query(
        str(path),
        f"SELECT rank, correlation_id, complete FROM merge_coll_members WHERE op = 'AllGather' "
        f"AND seq = {first['api_id']} ORDER BY rank",
    )
    assert members == [(0, new, True), (peer[0], peer[1], True)]


def test_copies_of_one_api_range_are_one_operation(ce_job, tmp_path):
    """Edited copy: rank 0's first copy-engine AllGather issues a second memcpy from a second launch
    call inside the same CE Batch range (hand-made: call 10 ns after the first, copy from 1 us to
    3 us after the first copy's end, same stream). Its copies are one operation: still one row on
    rank 0 (the truth's count), spanning the first copy's start to the second's end, with the first
    copy's correlation id, and still one complete instance with the truth's partner."""
    new, first_copy = NEW_CORR, {}

    def edit(con, copy_corr):
        con.execute(
            f"INSERT INTO cuda_api SELECT * REPLACE ({new} AS correlation_id, start_ns + 10 AS start_ns) "
            f"FROM cuda_api WHERE rank = 0 AND correlation_id = {copy_corr}"
        )
        con.execute(
            f"INSERT INTO memops SELECT * REPLACE ({new} AS correlation_id, end_ns + 1000 AS start_ns, "
            "end_ns + 3000 AS end_ns, 2000 AS duration_ns) "
            f"FROM memops WHERE rank = 0 AND correlation_id = {copy_corr}"
        )
        first_copy["span"] = con.execute(
            f"SELECT start_ns, end_ns FROM memops WHERE rank = 0 AND correlation_id = {copy_corr}"
        ).fetchone()

    path, truth, first, copy_corr = _edited(ce_job, tmp_path, edit)
    (s, e) = first_copy["span"]
    n_rank0 = sum(1 for i in _ce_instances(truth) for r, _ in i["members"] if r == 0)
    got = _query(
        str(path),
        "SELECT correlation_id, start_ns, end_ns, duration_ns, seq FROM merge_nccl_kernels "
        "WHERE rank = 0 AND engine = 'copy-engine' ORDER BY seq",
    )
    assert len(got) == n_rank0
    assert [g for g in got if g[4] == first["api_id"]] == [
        (copy_corr, s, e + 3000, e + 3000 - s, first["api_id"])
    ]
    members = _query(
        str(path),
        "SELECT rank, correlation_id, complete FROM merge_coll_members WHERE op = 'AllGather' "
        f"AND seq = {first['api_id']} ORDER BY rank",
    )
    assert members == sorted((r, c, True) for r, c in first["members"])
    # both copies are communication in the partition's input
    cats = _query(
        str(path), f"SELECT category FROM gpu_ops WHERE rank = 0 AND correlation_id IN ({copy_corr}, {new})"
    )
    assert cats == [("comms",), ("comms",)]
