"""Jobs and partial rank sets: which ranks belong together, and what is never invented.

Ground truth: hand-made ranks/kernels rows (the timeline model of test_ranks) whose jobs are
known by construction, and two real sets from ../shared/traces: ranks 0 and 1 of a 128-rank
Kineto job (HTA's trace_filter) and the nsys folder of 12 unrelated captures.
"""

from __future__ import annotations

import csv
import gzip
import json
import shutil
import sqlite3
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from nsight_analyze.analysis import refresh
from nsight_analyze.store.workspace import open_workspace
from tests.conftest import TRACES, requires_shared
from tests.test_ranks import NCCL_SR, timeline

HOUR_NS = 3_600_000_000_000
JOB_RANKS, JOB_STEPS = (
    4,
    6,
)  # each job of two_jobs: ranks, and steps (one AllReduce each, test_ranks.timeline)
PIPE_RANKS, PIPE_STEPS, PIPE_KEEP = 8, 5, [0, 4]  # _pipeline: the job's size, its steps, the ranks kept


@pytest.fixture(scope="module")
def empty_workspace(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("jobs") / "empty.duckdb"
    con = open_workspace(path)
    refresh(con, force=True)
    con.close()
    return path


@pytest.fixture
def ws(tmp_path, empty_workspace):
    path = tmp_path / "ws.duckdb"
    shutil.copy(empty_workspace, path)
    con = open_workspace(path)
    yield con
    con.close()


def load(con: duckdb.DuckDBPyConnection, r: pd.DataFrame, k: pd.DataFrame) -> None:
    """ranks rows (with optional world_size / job_rank columns) and kernels rows."""
    r = r.copy()
    for col in ("world_size", "job_rank"):
        if col not in r:
            r[col] = pd.array([pd.NA] * len(r), dtype="Int64")
    con.register("r_df", r)
    con.register("k_df", k)
    con.execute(
        "INSERT INTO ranks (rank, file_id, hostname, device_id, session_start_utc_ns, world_size, job_rank) "
        "SELECT rank, file_id, hostname, device_id, session_start_utc_ns, world_size, job_rank FROM r_df"
    )
    con.execute(
        "INSERT INTO kernels (rank, device_id, stream_id, start_ns, end_ns, duration_ns, name, short_name, "
        "correlation_id, category) SELECT rank, device_id, stream_id, start_ns, end_ns, duration_ns, name, "
        "short_name, correlation_id, category FROM k_df"
    )
    con.unregister("r_df")
    con.unregister("k_df")


def two_jobs(apart_ns: int, ranks: int = JOB_RANKS, **kw) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two identical data-parallel jobs of `ranks` ranks each, the second started `apart_ns` later."""
    r1, k1, _ = timeline(ranks=ranks, gpus_per_node=2, steps=JOB_STEPS, seed=1, **kw)
    r2, k2, _ = timeline(ranks=ranks, gpus_per_node=2, steps=JOB_STEPS, seed=2)
    r2 = r2.assign(
        rank=r2["rank"] + ranks,
        file_id=r2.file_id + ranks,
        session_start_utc_ns=r2.session_start_utc_ns + apart_ns,
    )
    r2["hostname"] = r2.hostname + "b"
    k2 = k2.assign(rank=k2["rank"] + ranks, correlation_id=k2.correlation_id + 10_000_000)
    return pd.concat([r1, r2], ignore_index=True), pd.concat([k1, k2], ignore_index=True)


def jobs_of(con: duckdb.DuckDBPyConnection) -> list[int]:
    return [j for (j,) in con.execute("SELECT job FROM ranks ORDER BY rank").fetchall()]


# by construction of two_jobs: ranks 0..JOB_RANKS-1 are the first job, the next JOB_RANKS the second
TWO_JOBS = [1] * JOB_RANKS + [2] * JOB_RANKS
ONE_JOB = [1] * (2 * JOB_RANKS)


# --- the job rule ----------------------------------------------------------------------------


def test_captures_an_hour_apart_are_two_jobs_never_compared(ws):
    slow = 1  # the straggler injected into the first job: rank 1 computes 25 % longer
    r, k = two_jobs(HOUR_NS, straggler=(slow, 25))
    load(ws, r, k)
    notes = refresh(ws, force=True)
    assert jobs_of(ws) == TWO_JOBS
    assert any(n.startswith("2 jobs found") for n in notes), notes
    # collectives: JOB_STEPS steps x one AllReduce per job, each with the job's JOB_RANKS ranks only
    c = ws.sql("SELECT job, ranks, complete, COUNT(*) FROM collectives GROUP BY ALL ORDER BY ALL").fetchall()
    assert c == [(j, JOB_RANKS, True, JOB_STEPS) for j in (1, 2)]
    spans = ws.sql("SELECT COUNT(DISTINCT job) FROM merge_coll_members GROUP BY coll_id").fetchall()
    assert {n for (n,) in spans} == {1}
    # clocks: each job placed by its own earliest session start (the second is not an hour off):
    # timeline's session starts lie within 2 ms and its hosts have no skew, so 10 ms bounds any
    # offset, far below the hour between the jobs
    off = ws.sql("SELECT MAX(ABS(clock_offset_ns)) FROM ranks").fetchone()[0]
    assert off < 10_000_000
    # timeline's AllReduce ends within +-300 ns on every rank: residuals of microseconds (20 us
    # bound), not the 2 ms of the session starts
    q = ws.sql("SELECT job, MAX(residual_p95_ns) FROM alignment_quality GROUP BY job ORDER BY job").fetchall()
    assert [j for j, _ in q] == [1, 2] and all(p < 20_000 for _, p in q)
    # imbalance per step and the verdict per job: the model has no NVTX steps, but its compute
    # kernel and AllReduce repeat once per step (timeline's construction), so each job has
    # JOB_STEPS periodic steps (docs/metrics.md), plus its whole-capture row (step NULL); rank
    # `slow` (25 % more compute in every step) is job 1's slowest in each, job 2 (ranks JOB_RANKS
    # and up) is balanced
    imb = ws.sql("SELECT job, step, ranks, slowest_rank FROM imbalance ORDER BY job, step NULLS LAST").df()
    per_job = list(range(JOB_STEPS)) + [None]
    assert imb.job.tolist() == [1] * len(per_job) + [2] * len(per_job) and (imb.ranks == JOB_RANKS).all()
    assert [None if pd.isna(s) else int(s) for s in imb.step] == per_job * 2
    assert (imb[imb.job == 1].slowest_rank == slow).all()
    assert (imb[imb.job == 2].slowest_rank >= JOB_RANKS).all()
    v = ws.sql("SELECT job, verdict, straggler_rank FROM merge_straggler_verdict ORDER BY job").fetchall()
    assert v == [(1, "persistent", slow), (2, "balanced", None)]
    roll = ws.sql("SELECT rank, job, straggler FROM rank_rollup ORDER BY rank").df()
    assert roll.straggler.tolist() == [r == slow for r in range(2 * JOB_RANKS)]
    jobs = ws.sql("SELECT job, ranks, complete, label FROM jobs ORDER BY job").fetchall()
    assert jobs == [(j, JOB_RANKS, True, f"{JOB_RANKS} ranks (world size unknown)") for j in (1, 2)]


def test_captures_within_the_gap_are_one_job_and_the_gap_is_a_setting(ws):
    # one minute apart, distinct ranks: within the default gap (schema.sql job_session_gap_s: 300 s),
    # one job of both; with a 30 s gap, two
    r, k = two_jobs(60_000_000_000)
    load(ws, r, k)
    assert not [n for n in refresh(ws, force=True) if "jobs found" in n]
    assert jobs_of(ws) == ONE_JOB
    ws.execute("UPDATE settings SET value = '30' WHERE key = 'job_session_gap_s'")
    refresh(ws)
    assert jobs_of(ws) == TWO_JOBS


def test_different_world_sizes_or_a_rank_named_twice_are_different_jobs(ws):
    r, k = two_jobs(1_000_000)  # 1 ms apart: one time group
    # the first job's files say world size JOB_RANKS, the second's twice that
    r["world_size"] = pd.array([JOB_RANKS] * JOB_RANKS + [2 * JOB_RANKS] * JOB_RANKS, dtype="Int64")
    load(ws, r, k)
    refresh(ws, force=True)
    assert jobs_of(ws) == TWO_JOBS
    # both jobs name ranks 0..JOB_RANKS-1
    ws.execute(f"UPDATE ranks SET world_size = NULL, job_rank = rank % {JOB_RANKS}")
    refresh(ws, force=True)
    assert jobs_of(ws) == TWO_JOBS
    ws.execute("UPDATE ranks SET job_rank = rank")  # distinct numbers, same time: one job
    refresh(ws, force=True)
    assert jobs_of(ws) == ONE_JOB


def test_a_file_without_session_start(ws):
    r, k = two_jobs(1_000_000)  # 1 ms apart: one time group
    last = 2 * JOB_RANKS - 1  # the file without a session start: the last rank
    r["session_start_utc_ns"] = r.session_start_utc_ns.astype("Int64")
    r.loc[r["rank"] == last, "session_start_utc_ns"] = pd.NA
    load(ws, r, k)
    refresh(ws, force=True)
    assert jobs_of(ws) == ONE_JOB  # one time group: it joins it
    # the second job's files an hour later: two time groups, and the last rank a job of its own
    ws.execute(
        f"UPDATE ranks SET session_start_utc_ns = session_start_utc_ns + {HOUR_NS} WHERE rank >= {JOB_RANKS}"
    )
    refresh(ws, force=True)
    assert jobs_of(ws) == [1] * JOB_RANKS + [2] * (JOB_RANKS - 1) + [3]  # several: a job of its own


# --- partial jobs and point-to-point peers ----------------------------------------------------


def _launch_payloads(con: duckdb.DuckDBPyConnection, k: pd.DataFrame, payload: pd.Series) -> None:
    """A launch call and an NCCL NVTX range with `payload` around it, for each kernel of k."""
    api = pd.DataFrame(
        {
            "rank": k["rank"],
            "tid": 100,
            "start_ns": k.start_ns - 50_000,
            "end_ns": k.start_ns - 40_000,
            "duration_ns": 10_000,
            "name": "cudaLaunchKernel",
            "correlation_id": k.correlation_id,
        }
    )
    nv = pd.DataFrame(
        {
            "rank": k["rank"],
            "tid": 100,
            "start_ns": k.start_ns - 60_000,
            "end_ns": k.start_ns - 30_000,
            "text": "ncclSend",
            "domain": "NCCL",
            "event_type": "push_pop",
            "payload": payload.to_numpy(),
        }
    )
    con.register("api_df", api)
    con.register("nv_df", nv)
    con.execute(
        "INSERT INTO cuda_api (rank, tid, start_ns, end_ns, duration_ns, name, correlation_id) "
        "SELECT * FROM api_df"
    )
    con.execute(
        "INSERT INTO nvtx (rank, tid, start_ns, end_ns, text, domain, event_type, payload) "
        "SELECT * FROM nv_df"
    )


def _comm_init(con: duckdb.DuckDBPyConnection, rows: list[tuple[int, int, int, int]]) -> None:
    """ncclCommInitRank payloads: (rank, communicator id, rank in it, its size)."""
    for rank, comm, comm_rank, size in rows:
        con.execute(
            "INSERT INTO nvtx (rank, tid, start_ns, end_ns, text, domain, event_type, payload) "
            "VALUES (?, 100, 1, 2, 'ncclCommInitRank', 'NCCL', 'push_pop', ?)",
            [rank, f'{{"NCCL communicator ID": {comm}, "No. of ranks": {size}, "Rank": {comm_rank}}}'],
        )


def _pipeline(world: int | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Ranks PIPE_KEEP (0 and 4) of a job of PIPE_RANKS exchanging SendRecv once per step, PIPE_STEPS
    steps (compute + SendRecv kernels)."""
    r, k, _ = timeline(ranks=PIPE_RANKS, gpus_per_node=4, steps=PIPE_STEPS)
    r = r[r["rank"].isin(PIPE_KEEP)].reset_index(drop=True)
    k = k[k["rank"].isin(PIPE_KEEP)].copy()
    k.loc[k.category == "comms", "name"] = NCCL_SR
    r["world_size"] = pd.array([world] * len(r), dtype="Int64")
    return r, k


def test_p2p_without_a_known_peer_is_not_paired_in_a_partial_job(ws):
    r, k = _pipeline(world=PIPE_RANKS)
    load(ws, r, k)
    notes = refresh(ws, force=True)
    assert any(f"{len(PIPE_KEEP)} of {PIPE_RANKS} ranks (partial)" in n for n in notes), notes
    m = ws.sql("SELECT DISTINCT key_source, n_ranks, complete FROM merge_coll_members").fetchall()
    assert m == [("peer-unknown", 1, False)]
    assert ws.sql("SELECT COUNT(*) FROM collective_waits").fetchone()[0] == 0
    # no wait, and every SendRecv kernel loaded (one per kept rank and step) has no known peer
    sendrecv = int((k.category == "comms").sum())
    assert sendrecv == len(PIPE_KEEP) * PIPE_STEPS
    assert ws.sql("SELECT SUM(wait_suffered_ns), SUM(peer_unknown) FROM rank_rollup").fetchone() == (
        0,
        sendrecv,
    )


def test_p2p_paired_by_the_only_two_ranks_of_a_complete_job(ws):
    r, k = _pipeline(world=None)  # world size unknown: the two ranks are the job
    load(ws, r, k)
    assert refresh(ws, force=True) == []
    # one SendRecv per step between the two kept ranks, each with a wait row per member
    c = ws.sql("SELECT op, comm, ranks, complete, COUNT(*) FROM collectives GROUP BY ALL").fetchall()
    assert c == [("SendRecv", "p2p:0-4", len(PIPE_KEEP), True, PIPE_STEPS)]
    assert ws.sql("SELECT COUNT(*) FROM collective_waits").fetchone()[0] == len(PIPE_KEEP) * PIPE_STEPS


@pytest.mark.parametrize("how", ["peer-rank", "two-rank-comm"])
def test_p2p_paired_with_the_peer_its_payload_names(ws, how):
    """Partial job (2 of 8): the peer comes from NCCL's payload, through the communicator's members."""
    r, k = _pipeline(world=PIPE_RANKS)
    load(ws, r, k)
    sr = k[k.category == "comms"]
    if how == "peer-rank":  # the world communicator 9: ranks keep their numbers; "Peer rank" names the other
        _comm_init(ws, [(0, 9, 0, 8), (4, 9, 4, 8)])
        payload = sr["rank"].map(lambda x: f'{{"NCCL communicator ID": 9, "Peer rank": {4 - x}}}')
    else:  # a 2-rank communicator 5 (PyTorch's per-pair p2p communicator) with both members present
        _comm_init(ws, [(0, 5, 0, 2), (4, 5, 1, 2)])
        payload = sr["rank"].map(lambda x: '{"NCCL communicator ID": 5, "Peer rank": 1}')
    _launch_payloads(ws, sr, payload)
    refresh(ws, force=True)
    # as above: one SendRecv per step between the two kept ranks, a wait row per member
    c = ws.sql("SELECT comm, ranks, complete, COUNT(*) FROM collectives GROUP BY ALL").fetchall()
    assert c == [("p2p:0-4", len(PIPE_KEEP), True, PIPE_STEPS)]
    w = ws.sql("SELECT COUNT(*), MIN(wait_ns) FROM collective_waits").fetchone()
    assert w[0] == len(sr) == len(PIPE_KEEP) * PIPE_STEPS and w[1] >= 0


def test_collective_with_participants_missing_gets_no_wait(ws):
    """AllReduce of a 2-of-8 job: over the 8-rank world communicator (size from the init payload)
    it is incomplete; over a 2-rank communicator whose members are both present, complete."""
    r, k, _ = timeline(ranks=8, gpus_per_node=4, steps=3)
    r = r[r["rank"].isin([0, 4])].reset_index(drop=True)
    r["world_size"] = pd.array([8, 8], dtype="Int64")  # the 8 ranks of the timeline above
    k = k[k["rank"].isin([0, 4])].copy()
    load(ws, r, k)
    ar = k[k.category == "comms"]
    _comm_init(ws, [(0, 9, 0, 8), (4, 9, 4, 8)])
    _launch_payloads(ws, ar, pd.Series(['{"NCCL communicator ID": 9}'] * len(ar)))
    refresh(ws, force=True)
    # 2 of the communicator's 8 ranks (its init payload above): every AllReduce incomplete, and
    # every AllReduce kernel loaded (one per kept rank and step: len(ar)) counted as such
    c = ws.sql("SELECT ranks, expected_ranks, complete, start_skew_ns FROM collectives").df()
    assert (c.ranks == 2).all() and (c.expected_ranks == 8).all() and (~c.complete).all()
    assert c.start_skew_ns.isna().all()
    assert ws.sql("SELECT COUNT(*) FROM collective_waits").fetchone()[0] == 0
    assert ws.sql("SELECT SUM(incomplete) FROM rank_rollup").fetchone()[0] == len(ar) == 2 * 3
    ws.execute(
        "UPDATE nvtx SET payload = replace(replace(payload, '8,', '2,'), '\"Rank\": 4', "
        "'\"Rank\": 1') WHERE text = 'ncclCommInitRank'"
    )
    refresh(ws, force=True)
    assert ws.sql("SELECT bool_and(complete) FROM collectives").fetchone()[0]
    assert ws.sql("SELECT COUNT(*) FROM collective_waits").fetchone()[0] == len(ar)  # a wait row per kernel


# --- real traces -----------------------------------------------------------------------------

TRACE_FILTER = TRACES / "kineto" / "hta" / "trace_filter"
HTA_TRACE_FILTER = TRACES / "oracles" / "hta-0.5" / "hta__trace_filter"  # HTA 0.5's numbers on it
NSYS = TRACES / "nsys"


def _raw_trace_filter() -> list[dict]:
    """The trace_filter files read with json.load, in rank order: what the expected values of
    these tests come from (their distributedInfo and kernel events), never nsight_analyze's reader."""
    docs = []
    for path in sorted(TRACE_FILTER.glob("*.json.gz")):
        with gzip.open(path, "rt") as fh:
            docs.append(json.load(fh))
    return sorted(docs, key=lambda d: d["distributedInfo"]["rank"])


def _sendrecv_kernels(doc: dict) -> int:
    return sum(1 for e in doc["traceEvents"] if e.get("cat") == "kernel" and "SendRecv" in e.get("name", ""))


@pytest.fixture(scope="module")
def trace_filter(tmp_path_factory):
    from nsight_analyze.ingest.run import ingest

    db = tmp_path_factory.mktemp("trace_filter") / "tf.duckdb"
    report = ingest([TRACE_FILTER], db)
    return report, db


@requires_shared
def test_trace_filter_whatif_is_unknown_for_a_partial_job(trace_filter):
    """2 of 128 ranks (distributedInfo.world_size, test above): the collectives' other 126
    participants are absent, so no replay, and the reason names the partial job."""
    from nsight_analyze.cli import main

    _, db = trace_filter
    out = CliRunner().invoke(main, ["whatif", "--db", str(db), "--format", "json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert doc["scenarios"] == [] and "partial (2 of 128 ranks)" in doc["reason"]


@requires_shared
def test_trace_filter_is_2_of_128_ranks(trace_filter):
    from nsight_analyze.cli import main

    report, db = trace_filter
    # the files' own distributedInfo (json.load): ranks 0 and 1 of a world of 128
    raw = [d["distributedInfo"] for d in _raw_trace_filter()]
    (world,) = {d["world_size"] for d in raw}
    label = f"{len(raw)} of {world} ranks"
    assert label == "2 of 128 ranks"  # as the shared traces' README states
    assert any(f"{label} (partial)" in n for n in report.notes), report.notes
    con = open_workspace(db, read_only=True)
    ranks = con.sql("SELECT rank, job, world_size FROM ranks ORDER BY rank").fetchall()
    assert ranks == [(d["rank"], 1, world) for d in raw]
    assert con.sql("SELECT ranks, world_size, complete, label FROM jobs").fetchall() == [
        (len(raw), world, False, label)
    ]
    con.close()
    out = json.loads(CliRunner().invoke(main, ["ranks", "--db", str(db), "--format", "json"]).output)
    assert out["jobs"][0]["label"] == label and out["jobs"][0]["complete"] is False
    table = CliRunner().invoke(main, ["ranks", "--db", str(db)])
    assert table.exit_code == 0 and label in table.output
    info = json.loads(CliRunner().invoke(main, ["info", "--db", str(db), "--format", "json"]).output)
    assert info["jobs"][0]["label"] == label
    assert any(f"job 1 is partial: {label}" in w for w in info["warnings"])
    text = CliRunner().invoke(main, ["info", "--db", str(db)])
    assert label in text.output


@requires_shared
def test_trace_filter_sendrecv_without_peer_gets_no_waits(trace_filter):
    """Their SendRecv kernels (all-to-all of 128 ranks, no peer in the trace) were paired by ordinal
    before, with 381 ms and 132 ms of "wait" between ends 21 ms apart; now none is paired."""
    _, db = trace_filter
    # the SendRecv kernel events of each file (json.load): 10 per rank, as the README states
    per_rank = [_sendrecv_kernels(d) for d in _raw_trace_filter()]
    con = open_workspace(db, read_only=True)
    m = con.sql(
        "SELECT op, key_source, n_ranks, complete, COUNT(*) FROM merge_coll_members GROUP BY ALL"
    ).fetchall()
    assert m == [("SendRecv", "peer-unknown", 1, False, sum(per_rank))]
    assert con.sql("SELECT COUNT(*) FROM collective_waits").fetchone()[0] == 0
    roll = con.sql(
        "SELECT wait_suffered_ns, wait_caused_ns, peer_unknown, residual_p95_ns FROM rank_rollup"
    ).df()
    assert (roll.wait_suffered_ns == 0).all() and (roll.wait_caused_ns == 0).all()
    assert roll.peer_unknown.tolist() == per_rank and roll.residual_p95_ns.isna().all()
    assert con.sql("SELECT SUM(wait_ns) FROM diag_comm_exposure").fetchone()[0] == 0
    assert con.sql("SELECT COUNT(*) FROM collectives WHERE start_skew_ns IS NOT NULL").fetchone()[0] == 0
    con.close()


@requires_shared
def test_trace_filter_diagnose_names_the_exposed_communication(trace_filter):
    """Expected value from time_partition alone: no wait (nothing complete) and no last-reduction
    transfer (SendRecv is no gradient reduction) is taken off, so the finding's recoverable time is,
    per step, the least exposed comms over the ranks (comms_exposed_ns), averaged over the steps,
    as a share of the mean step (the longest window per step). Over the whole capture each rank's
    exposed share comms_exposed_ns / window_ns lies where HTA's numbers put it (the oracle
    derived_per_rank.csv: exposed_comm_us / span_us at most, less the memory ops that may hide
    some of it), 27.5 % on rank 0 and 24.3 % on rank 1: the finding's lies between them."""
    from nsight_analyze.cli import main

    _, db = trace_filter
    con = open_workspace(db, read_only=True)
    expected = con.sql(
        """WITH s AS (SELECT step, MIN(comms_exposed_ns) AS exposed, MAX(window_ns) AS w
                      FROM time_partition WHERE step IS NOT NULL GROUP BY step)
           SELECT 100.0 * AVG(exposed) / AVG(w) FROM s"""
    ).fetchone()[0]
    shares = dict(
        con.sql(
            "SELECT rank, 100.0 * comms_exposed_ns / window_ns FROM time_partition WHERE step IS NULL"
        ).fetchall()
    )
    con.close()
    lo, hi = min(shares.values()), max(shares.values())
    # the HTA oracle, per rank (whole file, HTA's GPU events): communication not overlapped by
    # compute over the span; memory ops (union_memory_us) may hide some more of it here
    with open(HTA_TRACE_FILTER / "derived_per_rank.csv", newline="") as fh:
        oracle = [
            r for r in csv.DictReader(fh) if (r["view"], r["scope"]) == ("all_events", "hta_gpu_events")
        ]
    assert sorted(int(r["rank"]) for r in oracle) == sorted(shares)
    for r in oracle:
        exposed, memory, span = (float(r[c]) for c in ("exposed_comm_us", "union_memory_us", "span_us"))
        assert 100.0 * (exposed - memory) / span <= shares[int(r["rank"])] <= 100.0 * exposed / span, r[
            "rank"
        ]
    result = CliRunner().invoke(main, ["diagnose", "--db", str(db), "--format", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    findings, mean_step = doc["findings"], doc["job"]["mean_step_ns"]
    performance = [f["id"] for f in findings if f["kind"] == "performance"]
    assert "exposed-comm" in performance[:3], performance
    found = next(f for f in findings if f["id"] == "exposed-comm")
    # the rule's own measure is the partition's (rules/_whatif.py would bound it by the what-if
    # replay's gain for hiding communication, were there one)
    own_pct = 100.0 * found["metrics"]["recoverable_ns_per_step_rule"] / mean_step
    assert abs(own_pct - expected) < 0.05, (own_pct, expected)
    assert lo - 0.5 <= own_pct <= hi
    # no replay of a partial job (test_trace_filter_whatif_is_unknown_for_a_partial_job): the
    # rule's own bound is kept, and the finding says the what-if bound is unknown and why
    assert found["metrics"]["whatif_gain_ns"] is None
    assert "unknown (the job is partial (2 of 128 ranks)" in found["recoverable_method"]
    assert abs(found["recoverable_pct"] - expected) < 0.05, (found["recoverable_pct"], expected)


def _has_kernels(path: Path) -> bool:
    """Whether an nsys export has a kernel table (sqlite3 on the raw file)."""
    raw = sqlite3.connect(path)
    try:
        return bool(
            raw.execute(
                "SELECT count(*) FROM sqlite_master WHERE name = 'CUPTI_ACTIVITY_KIND_KERNEL'"
            ).fetchone()[0]
        )
    finally:
        raw.close()


@pytest.fixture(scope="module")
def nsys_folder(tmp_path_factory):
    from conftest import copy_workspace, shared_ingest

    report, shared = shared_ingest([NSYS])
    return report, copy_workspace(shared, tmp_path_factory.mktemp("nsys_folder") / "nsys.duckdb")


@requires_shared
def test_a_workspace_of_several_jobs_against_itself_is_cut_once(nsys_folder, monkeypatch):
    """compare W W of a workspace of several jobs: the chosen job's files are ingested into one
    temporary workspace for both sides (they were ingested twice, and each side analysed apart),
    and each side's note names its own option."""
    from nsight_analyze.compare.sides import workspaces
    from nsight_analyze.ingest import run as ingest_module

    _, db = nsys_folder
    calls = []
    real = ingest_module.ingest
    monkeypatch.setattr(ingest_module, "ingest", lambda *a, **k: calls.append(a) or real(*a, **k))
    with workspaces(db, db) as (before, after, notes):
        assert before == after != db  # one temporary workspace: the job's own
    assert len(calls) == 1
    assert [n.split(":")[0] for n in notes] == ["before", "after"]
    assert "--before-job N" in notes[0] and "--after-job N" in notes[1]


@requires_shared
def test_nsys_folder_is_many_jobs(nsys_folder):
    report, db = nsys_folder
    assert not report.failed, [(o.path, o.message) for o in report.by_status("failed")]
    n_files = len(report.by_status("ok"))
    assert n_files == len(list(NSYS.rglob("*.sqlite"))) == 12  # the folder's nsys exports (README: 12)
    note = next(n for n in report.notes if "jobs found" in n)
    con = open_workspace(db, read_only=True)
    jobs = con.sql("SELECT * FROM jobs ORDER BY job").df()
    assert note.startswith(f"{len(jobs)} jobs found")
    # one file, one capture, one job: every file here is its own run (two names rank 0: pipit's)
    assert len(jobs) == n_files and (jobs.files == 1).all()
    assert con.sql("SELECT COUNT(DISTINCT job) FROM ranks GROUP BY file_id").df().iloc[:, 0].eq(1).all()
    con.close()


@requires_shared
def test_nsys_folder_compares_nothing_across_jobs(nsys_folder):
    from nsight_analyze.cli import main

    _, db = nsys_folder
    con = open_workspace(db, read_only=True)
    job_of = dict(con.sql("SELECT rank, job FROM ranks").fetchall())
    size = dict(con.sql("SELECT job, ranks FROM jobs").fetchall())
    # collectives and imbalance rows stay inside one job
    members = con.sql(
        "SELECT coll_id, list(DISTINCT job) AS jobs FROM merge_coll_members GROUP BY coll_id"
    ).df()
    assert members.jobs.map(len).eq(1).all()
    imb = con.sql("SELECT job, ranks, slowest_rank FROM imbalance").df()
    assert all(job_of[s] == j and n <= size[j] for j, n, s in imb.itertuples(index=False))
    verdicts = con.sql("SELECT job, straggler_rank FROM merge_straggler_verdict").df()
    # one verdict per job with GPU work (the CPU-only and runtime-only captures have no partition:
    # the exports without a kernel table, counted with sqlite3)
    assert verdicts.job.is_unique and set(verdicts.job) <= set(size)
    assert len(verdicts) >= len(size) - sum(not _has_kernels(p) for p in NSYS.rglob("*.sqlite"))
    named = verdicts.dropna(subset=["straggler_rank"])
    assert all(job_of[int(s)] == j for j, s in named.itertuples(index=False))
    roll = con.sql("SELECT rank, straggler, cost_ns FROM rank_rollup").df()
    assert not roll.straggler.any()  # unrelated runs: no rank is slow against another job's
    # clock placement per job: nothing is moved by minutes (60 s bound), residuals are microseconds
    assert con.sql("SELECT MAX(ABS(clock_offset_ns)) FROM ranks").fetchone()[0] < 60_000_000_000
    p95 = con.sql("SELECT MAX(residual_p95_ns) FROM alignment_quality").fetchone()[0]
    assert p95 is not None and p95 < 1_000_000  # the MFU captures' SendRecv pairs: within 1 ms
    con.close()
    out = json.loads(CliRunner().invoke(main, ["ranks", "--db", str(db), "--format", "json"]).output)
    assert len(out["jobs"]) == len(size) and not any(r["straggler"] for r in out["ranks"])
    assert len(out["verdicts"]) == len(verdicts)


def test_job_rule_is_sql_over_ranks_only(ws):
    """merge_jobs reads ranks, files, tp_capture and settings: hand-inserted ranks get a job."""
    r, k = two_jobs(HOUR_NS)
    load(ws, r, k)
    refresh(ws, force=True)
    got = ws.sql("SELECT rank, job, time_group, part FROM merge_jobs ORDER BY rank").df()
    assert got.job.tolist() == TWO_JOBS
    assert got.time_group.nunique() == 2 and (got.part == 1).all()  # an hour apart: two time groups
    assert np.array_equal(got["rank"].to_numpy(), np.arange(2 * JOB_RANKS))
