"""Rank merger: clock alignment, collective matching, imbalance and straggler verdicts.

Ground truth comes from a small in-test timeline model (exact, vectorised numpy) written
straight into the canonical tables, from the project's synthetic generator when present,
and from a real 2-rank trace (SendRecv pairs) in ../shared/traces.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from nsight_analyze.analysis import refresh
from nsight_analyze.store import query_layer
from nsight_analyze.store.workspace import open_workspace
from tests.conftest import TRACES, requires_shared

NCCL_AR = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
NCCL_SR = "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"
GEMM = "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNT"
EPOCH = 1_779_782_330_000_000_000


def _views(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """Compute the stored results over the rows the test wrote (analysis.refresh, forced)."""
    refresh(con, force=True)
    return con


def timeline(
    ranks: int = 8,
    gpus_per_node: int = 4,
    steps: int = 20,
    skew_ns: dict[int, int] | None = None,
    straggler: tuple[int, float] | None = None,
    seed: int = 1,
    extra_unmatched: int = 0,
) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """ranks and kernels rows of a data-parallel job: compute, then an AllReduce per step.

    True time t; host h's clock reads t + skew[h]; rank r's file time is t - T0_r and its
    recorded session start (UTC, by its host clock) is T0_r + skew[h]. The AllReduce ends
    within +-300 ns on every rank once the last rank has arrived.
    """
    rng = np.random.default_rng(seed)
    skew_ns = skew_ns or {}
    hosts = np.arange(ranks) // gpus_per_node
    skew = np.array([skew_ns.get(int(h), 0) for h in hosts], dtype=np.int64)
    t0 = rng.integers(0, 2_000_000, ranks)  # session starts within 2 ms
    base_compute = 10_000_000
    compute = base_compute + rng.normal(0, 20_000, (steps, ranks))  # 0.2 % jitter
    if straggler is not None:
        compute[:, straggler[0]] *= 1 + straggler[1] / 100
    compute = compute.astype(np.int64)
    rows = []
    t = 50_000_000
    truth_delay = 0
    for s in range(steps):  # a handful of steps; each step is vectorised over ranks
        start = t + rng.integers(0, 5_000, ranks)
        arrive = start + compute[s] + 3_000
        last = arrive.max()
        end = last + 400_000 + rng.integers(-300, 300, ranks)
        others = np.delete(arrive, arrive.argmax())
        truth_delay += int(last - others.mean())
        for kind, st, en in (("c", start, start + compute[s]), ("ar", arrive, end)):
            rows.append(
                pd.DataFrame(
                    {
                        "rank": np.arange(ranks),
                        "stream_id": 7 if kind == "c" else 13,
                        "true_start": st,
                        "true_end": en,
                        "name": GEMM if kind == "c" else NCCL_AR,
                        "category": "compute" if kind == "c" else "comms",
                        "step": s,
                    }
                )
            )
        t = int(end.max()) + 1_000_000
    k = pd.concat(rows, ignore_index=True)
    if extra_unmatched:
        extra = pd.DataFrame(
            {
                "rank": 0,
                "stream_id": 13,
                "true_start": t + np.arange(extra_unmatched) * 1_000_000,
                "true_end": t + np.arange(extra_unmatched) * 1_000_000 + 100_000,
                "name": NCCL_AR,
                "category": "comms",
                "step": steps,
            }
        )
        k = pd.concat([k, extra], ignore_index=True)
    k["start_ns"] = k.true_start - t0[k["rank"]]
    k["end_ns"] = k.true_end - t0[k["rank"]]
    k["duration_ns"] = k.end_ns - k.start_ns
    k["device_id"] = k["rank"] % gpus_per_node
    k["short_name"] = k.name.str.split("(").str[0]
    k["correlation_id"] = np.arange(len(k))
    r = pd.DataFrame(
        {
            "rank": np.arange(ranks),
            "file_id": np.arange(ranks),
            "hostname": [f"node{h}" for h in hosts],
            "device_id": np.arange(ranks) % gpus_per_node,
            "session_start_utc_ns": EPOCH + t0 + skew,
        }
    )
    truth = {"t0": t0, "skew": skew, "hosts": hosts, "straggler_delay_ns": truth_delay}
    return r, k, truth


def load(con: duckdb.DuckDBPyConnection, r: pd.DataFrame, k: pd.DataFrame) -> None:
    con.register("r_df", r)
    con.register("k_df", k)
    con.execute(
        "INSERT INTO ranks (rank, file_id, hostname, device_id, session_start_utc_ns) "
        "SELECT rank, file_id, hostname, device_id, session_start_utc_ns FROM r_df"
    )
    con.execute(
        "INSERT INTO kernels (rank, device_id, stream_id, start_ns, end_ns, duration_ns, name, short_name, "
        "correlation_id, category) SELECT rank, device_id, stream_id, start_ns, end_ns, duration_ns, name, "
        "short_name, correlation_id, category FROM k_df"
    )


@pytest.fixture(scope="module")
def empty_workspace(tmp_path_factory) -> Path:
    """An empty workspace with every view loaded, made once and copied per test (view loading is slow)."""
    path = tmp_path_factory.mktemp("ranks") / "empty.duckdb"
    _views(open_workspace(path)).close()
    return path


@pytest.fixture
def ws(tmp_path, empty_workspace):
    path = tmp_path / "ws.duckdb"
    shutil.copy(empty_workspace, path)
    con = open_workspace(path)
    yield con
    con.close()


def recovered_error_ns(con: duckdb.DuckDBPyConnection, truth: dict) -> np.ndarray:
    """Per rank: aligned-time error relative to rank 0 (0 = perfectly aligned)."""
    off = con.execute("SELECT clock_offset_ns FROM ranks ORDER BY rank").fetchnumpy()["clock_offset_ns"]
    # aligned = file + off = t - T0 + off: aligned correctly when off - T0 is the same for all ranks.
    e = off.astype(np.int64) - truth["t0"]
    return e - e[0]


# --- clock alignment -------------------------------------------------------------------------


@pytest.mark.parametrize("skews", [{1: 5_000_000}, {1: -3_700_000, 2: 8_200_000, 3: 1_000}])
def test_alignment_recovers_per_host_skew(ws, skews):
    r, k, truth = timeline(ranks=16, gpus_per_node=4, skew_ns=skews, straggler=(5, 10))
    load(ws, r, k)
    warnings = refresh(ws, force=True)
    assert warnings == []
    err = recovered_error_ns(ws, truth)
    # 20 us: far above the spread of timeline()'s AllReduce ends (+-300 ns, what alignment uses)
    # and far below the injected skews (down to 3.7 ms; 1 us on host 3 is within it either way)
    assert np.abs(err).max() < 20_000, err
    # the session-start alignment alone is off by the injected skew
    coarse = (r.session_start_utc_ns - r.session_start_utc_ns.min()).to_numpy() - truth["t0"]
    assert np.abs(coarse - coarse[0]).max() > 900_000
    q = ws.sql("SELECT * FROM alignment_quality ORDER BY host").df()
    assert list(q.method) == ["collectives"] * 4
    assert (q.collectives_used == 20).all()  # timeline(): one AllReduce per step, 20 steps
    assert (q.residual_p95_ns < 20_000).all() and (q.residual_p50_ns >= 0).all()
    assert q.loc[q.host == "node0", "offset_ns"].item() == 0
    for h, s in skews.items():  # host h read its session start s too late: moved back by s
        assert abs(q.loc[q.host == f"node{h}", "offset_ns"].item() + s) < 20_000
    methods = ws.sql("SELECT DISTINCT alignment_method FROM ranks").fetchall()
    assert methods == [("collectives",)]


def test_alignment_is_idempotent(ws):
    r, k, truth = timeline(ranks=8, skew_ns={1: 2_000_000})
    load(ws, r, k)
    refresh(ws, force=True)
    first = ws.sql("SELECT clock_offset_ns FROM ranks ORDER BY rank").fetchall()
    refresh(ws, force=True)
    assert ws.sql("SELECT clock_offset_ns FROM ranks ORDER BY rank").fetchall() == first


def test_alignment_without_collectives_keeps_session_start(ws):
    r, k, truth = timeline(ranks=8, skew_ns={1: 2_000_000})
    load(ws, r, k[k.category == "compute"])
    warnings = refresh(ws, force=True)
    assert len(warnings) == 1 and "no NCCL kernels" in warnings[0] and "session-start" in warnings[0]
    got = ws.sql("SELECT clock_offset_ns FROM ranks ORDER BY rank").fetchnumpy()["clock_offset_ns"]
    assert (got == (r.session_start_utc_ns - r.session_start_utc_ns.min()).to_numpy()).all()
    q = ws.sql("SELECT method, collectives_used FROM alignment_quality").fetchall()
    assert q == [("session-start", 0), ("session-start", 0)]


def test_alignment_single_host_needs_no_refinement(ws):
    r, k, truth = timeline(ranks=4, gpus_per_node=4)
    load(ws, r, k)
    assert refresh(ws, force=True) == []
    q = ws.sql("SELECT * FROM alignment_quality").df()
    assert q.method.tolist() == ["session-start"] and q.offset_ns.tolist() == [0]
    assert q.residual_p95_ns.item() < 1_000  # ends agree within the model's +-300 ns


def test_aligned_views_add_the_offset(ws):
    r, k, truth = timeline(ranks=8, skew_ns={1: 4_000_000})
    load(ws, r, k)
    refresh(ws, force=True)
    bad = ws.sql(
        "SELECT COUNT(*) FROM aligned_kernels a JOIN ranks r USING (rank) "
        "WHERE a.aligned_start_ns - a.start_ns <> r.clock_offset_ns"
    ).fetchone()[0]
    assert bad == 0
    # after alignment, every AllReduce instance ends within a microsecond on all ranks
    spread = ws.sql("SELECT MAX(end_skew_ns) FROM collectives WHERE ranks = 8").fetchone()[0]
    assert spread < 2_000
    for view in ("aligned_memops", "aligned_nvtx", "aligned_cuda_api"):
        ws.sql(f"SELECT aligned_start_ns, aligned_end_ns FROM {view} LIMIT 1").fetchall()


def test_alignment_ignores_series_mixing_groups(ws):
    """Per-node tensor-parallel AllReduces (no NVTX communicator) are merged across nodes by
    ordinal matching; their ends disagree across hosts, so alignment must use the DP series."""
    r, k, truth = timeline(ranks=8, gpus_per_node=4, steps=20, skew_ns={1: 3_000_000})
    rng = np.random.default_rng(7)
    ar = k[k.category == "comms"]
    tp = []
    for node in (0, 1):
        sel = ar[ar["rank"] // 4 == node].copy()
        shift = rng.integers(-2_000_000, -500_000, len(sel) // 4)  # per instance, per node
        sel = sel.sort_values(["step", "rank"])
        sel["true_start"] = sel.true_start.to_numpy() + np.repeat(shift, 4) - 600_000
        sel["true_end"] = sel.true_start + 50_000
        tp.append(sel)
    tp = pd.concat(tp)
    tp["stream_id"] = 11  # a lower stream id: stream0 on every rank
    t0 = truth["t0"][tp["rank"]]
    tp["start_ns"] = tp.true_start - t0
    tp["end_ns"] = tp.true_end - t0
    tp["duration_ns"] = tp.end_ns - tp.start_ns
    tp["correlation_id"] = np.arange(len(tp)) + 10_000_000
    load(ws, r, pd.concat([k, tp], ignore_index=True))
    warnings = refresh(ws, force=True)
    assert len(warnings) == 1 and "AllReduce/stream0" in warnings[0]
    assert np.abs(recovered_error_ns(ws, truth)).max() < 20_000
    q = ws.sql("SELECT method FROM alignment_quality").fetchall()
    assert q == [("collectives",), ("collectives",)]


def test_different_collective_counts_do_not_derail(ws):
    """Pipeline-like job: ranks 4-7 run two extra AllReduces and ranks 0 and 4 exchange SendRecv."""
    r, k, truth = timeline(ranks=8, gpus_per_node=4, steps=10, skew_ns={1: -6_000_000})
    ar = k[(k.category == "comms") & (k["rank"] >= 4) & (k.step == 9)].copy()
    ar[["start_ns", "end_ns"]] += 3_000_000
    ar["correlation_id"] += 20_000_000
    ar2 = ar.copy()
    ar2[["start_ns", "end_ns"]] += 1_000_000
    ar2["correlation_id"] += 1_000
    sr = k[(k.category == "comms") & k["rank"].isin([0, 4])].copy()
    sr["name"] = NCCL_SR
    sr[["start_ns", "end_ns"]] -= 2_000_000
    sr["correlation_id"] += 30_000_000
    load(ws, r, pd.concat([k, ar, ar2, sr], ignore_index=True))
    assert refresh(ws, force=True) == []
    assert np.abs(recovered_error_ns(ws, truth)).max() < 20_000
    c = ws.sql(
        "SELECT op, ranks, expected_ranks, COUNT(*) AS n FROM collectives GROUP BY ALL ORDER BY ALL"
    ).fetchall()
    assert c == [("AllReduce", 4, 8, 2), ("AllReduce", 8, 8, 10), ("SendRecv", 2, 2, 10)]
    w = ws.sql("SELECT COUNT(*) FROM collective_waits").fetchone()[0]
    assert w == 8 * 10 + 4 * 2 + 2 * 10


# --- collective matching ---------------------------------------------------------------------


def test_collectives_match_and_count_unmatched(ws):
    r, k, truth = timeline(ranks=8, steps=10, straggler=(3, 20), extra_unmatched=2)
    load(ws, r, k)
    refresh(ws, force=True)
    c = ws.sql("SELECT * FROM collectives ORDER BY coll_id").df()
    assert len(c) == 12  # timeline(steps=10): 10 AllReduces of all 8 ranks + extra_unmatched=2
    assert (c.op == "AllReduce").all() and (c.comm == "stream0").all()
    assert c.ranks.tolist() == [8] * 10 + [1, 1]
    assert (c.expected_ranks == 8).all()
    assert (c.last_rank.iloc[:10] == 3).all()
    assert c.busbw_gbps.isna().all()  # no bytes without NCCL's payload
    w = ws.sql("SELECT * FROM collective_waits").df()
    assert len(w) == 80 and (w.wait_ns >= 0).all()
    assert (w[w["rank"] == 3].wait_ns == 0).all()
    roll = ws.sql(
        "SELECT rank, COUNT(*) FILTER (WHERE n_ranks < 2) AS unmatched "
        "FROM merge_coll_members GROUP BY rank ORDER BY rank"
    ).df()
    assert roll.unmatched.tolist() == [2] + [0] * 7


def test_collective_bytes_and_busbw_from_nvtx_payload(ws):
    """Communicator and size from NCCL's NVTX payload; bus bandwidth with nccl-tests factors."""
    r, k, truth = timeline(ranks=4, gpus_per_node=2, steps=3)
    load(ws, r, k)
    ar = k[k.category == "comms"].copy()
    api = pd.DataFrame(
        {
            "rank": ar["rank"],
            "tid": 100,
            "start_ns": ar.start_ns - 50_000,
            "end_ns": ar.start_ns - 40_000,
            "duration_ns": 10_000,
            "name": "cudaLaunchKernel",
            "correlation_id": ar.correlation_id,
        }
    )
    nv = pd.DataFrame(
        {
            "rank": ar["rank"],
            "tid": 100,
            "start_ns": ar.start_ns - 60_000,
            "end_ns": ar.start_ns - 30_000,
            "text": "ncclAllReduce",
            "domain": "NCCL",
            "event_type": "push_pop",
            "payload": '{"NCCL communicator ID": 77, "Message size [bytes]": 1000000, '
            '"Reduction operation": "sum"}',
        }
    )
    ws.register("api_df", api)
    ws.register("nv_df", nv)
    ws.execute(
        "INSERT INTO cuda_api (rank, tid, start_ns, end_ns, duration_ns, name, correlation_id) "
        "SELECT * FROM api_df"
    )
    ws.execute(
        "INSERT INTO nvtx (rank, tid, start_ns, end_ns, text, domain, event_type, payload) "
        "SELECT * FROM nv_df"
    )
    refresh(ws, force=True)
    c = ws.sql("SELECT * FROM collectives ORDER BY coll_id").df()
    assert c.comm.tolist() == ["77"] * 3 and (c.key_source == "nvtx-payload").all()
    assert c.bytes.tolist() == [1_000_000] * 3
    expected = 1_000_000 * 2 * 3 / 4 / c.transfer_ns
    assert np.allclose(c.busbw_gbps, expected)


# --- imbalance and stragglers ----------------------------------------------------------------


def _partition(con: duckdb.DuckDBPyConnection, k: pd.DataFrame) -> None:
    """A per-step compute partition as time_partition would give it (one compute kernel per step)."""
    comp = k[k.category == "compute"].groupby(["rank", "step"], as_index=False).duration_ns.sum()
    comp = comp.rename(columns={"duration_ns": "compute_ns"})
    con.register("tp_df", comp)
    con.execute("CREATE OR REPLACE TEMP TABLE tp AS SELECT rank, step::BIGINT AS step, compute_ns FROM tp_df")


def test_imbalance_names_persistent_straggler_and_cost(ws):
    r, k, truth = timeline(ranks=8, steps=20, straggler=(3, 20))
    _partition(ws, k)
    imb = ws.sql("SELECT * FROM merge_imbalance_of('tp') ORDER BY step").df()
    # timeline(steps=20, straggler=(3, 20)): rank 3 computes 20 % longer in each of the 20 steps
    assert len(imb) == 20 and (imb.slowest_rank == 3).all() and (~imb.balanced).all()
    assert np.allclose(imb.ratio, 1.2 / (1 + 0.2 / 8), atol=0.01)
    comp = k[k.category == "compute"].pivot(index="step", columns="rank", values="duration_ns")
    assert (imb.wait_gpu_ns.to_numpy() == (comp.max(axis=1) * 8 - comp.sum(axis=1)).to_numpy()).all()


def test_imbalance_balanced_without_injection(ws):
    r, k, truth = timeline(ranks=8, steps=20)
    _partition(ws, k)
    imb = ws.sql("SELECT * FROM merge_imbalance_of('tp')").df()
    assert imb.balanced.all() and (imb.ratio < 1.01).all()


def _verdict_with(con: duckdb.DuckDBPyConnection, k: pd.DataFrame) -> pd.DataFrame:
    """merge_straggler_verdict over a hand-made partition (shadowing `imbalance` in this session)."""
    _partition(con, k)
    con.execute("CREATE OR REPLACE TEMP VIEW imbalance AS SELECT * FROM merge_imbalance_of('tp')")
    sql = query_layer.query_path("merge_straggler_verdict").read_text()
    con.execute(sql.replace("CREATE OR REPLACE VIEW", "CREATE OR REPLACE TEMP VIEW"))
    return con.sql("SELECT * FROM merge_straggler_verdict").df()


def test_verdicts(ws):
    _, k, truth = timeline(ranks=8, steps=20, straggler=(3, 20))
    v = _verdict_with(ws, k)
    assert v.verdict.item() == "persistent" and v.straggler_rank.item() == 3
    assert abs(v.straggler_delay_ns.item() / truth["straggler_delay_ns"] - 1) < 0.10

    _, k, _ = timeline(ranks=8, steps=20, seed=2)
    v = _verdict_with(ws, k)
    assert v.verdict.item() == "balanced" and pd.isna(v.straggler_rank.item())

    # a different rank slows down in every step: rotating
    _, k, _ = timeline(ranks=8, steps=16, seed=3)
    comp = k.category == "compute"
    slow = comp & (k["rank"] == k.step % 8)
    k.loc[slow, "duration_ns"] = (k.loc[slow, "duration_ns"] * 1.3).astype(np.int64)
    v = _verdict_with(ws, k)
    assert v.verdict.item() == "rotating" and pd.isna(v.straggler_rank.item())


# --- real trace ------------------------------------------------------------------------------

MFU = TRACES / "nsys" / "nsys-ai" / "mfu_2gpu_before.sqlite"


@requires_shared
def test_real_sendrecv_pairs(tmp_path):
    from nsight_analyze.ingest.run import ingest

    db = tmp_path / "mfu.duckdb"
    ingest([MFU], db)
    con = _views(open_workspace(db))
    c = con.sql("SELECT * FROM collectives").df()
    # sqlite3 on the file: 33 ncclDevKernel_SendRecv kernels on each of deviceId 0 and 1 (no other
    # NCCL kernel), so 33 collectives of 2 ranks, and 66 waits (one per rank and collective)
    assert len(c) == 33 and (c.op == "SendRecv").all() and (c.ranks == 2).all()
    # the pairs are real: ends within 100 us on the shared clock (starts differ by the wait)
    assert c.end_skew_ns.max() < 100_000 and c.start_skew_ns.max() < 10_000_000
    q = con.sql("SELECT * FROM alignment_quality").df()
    assert len(q) == 1 and q.method.item() == "session-start"
    assert 0 < q.residual_p50_ns.item() <= q.residual_p95_ns.item() < 100_000
    waits = con.sql("SELECT COUNT(*), SUM(wait_ns) FROM collective_waits").fetchone()
    assert waits[0] == 66 and waits[1] > 0
    con.close()


@requires_shared
def test_ranks_command_on_real_trace(tmp_path):
    from nsight_analyze.cli import main
    from nsight_analyze.ingest.run import ingest

    db = tmp_path / "mfu.duckdb"
    ingest([MFU], db)
    _views(open_workspace(db)).close()
    result = CliRunner().invoke(main, ["ranks", "--db", str(db), "--format", "json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert [r["rank"] for r in out["ranks"]] == [0, 1]
    assert all(r["residual_p50_ns"] > 0 for r in out["ranks"])
    assert out["alignment"][0]["residual_p95_ns"] >= out["alignment"][0]["residual_p50_ns"] > 0
    assert out["unmatched_nccl_kernels"] == 0
    table = CliRunner().invoke(main, ["ranks", "--db", str(db)])
    assert table.exit_code == 0 and "residual" in table.output


# --- synthetic traces from the project's generator (ground_truth.json) -----------------------


def _synth_workspace(tmp: Path, injections: tuple[str, ...], **kw) -> tuple[duckdb.DuckDBPyConnection, dict]:
    from nsight_analyze import synth
    from nsight_analyze.ingest.run import ingest

    truth = synth.generate(tmp / "job", injections=injections, **kw)
    db = tmp / "job.duckdb"
    ingest(sorted((tmp / "job").glob("*.sqlite")), db)
    return _views(open_workspace(db)), truth


@pytest.fixture(scope="module")
def skewed_job(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("skewed")
    con, truth = _synth_workspace(
        tmp,
        ("straggler=3:+20", "clock-skew=1:+5", "clock-skew=2:-3.5", "clock-skew=3:+7.25"),
        ranks=8,
        gpus_per_node=2,
        steps=12,
        seed=4,
    )
    yield con, truth
    con.close()


def test_synth_offsets_within_20us(skewed_job):
    con, truth = skewed_job
    node_of = {r["rank"]: r["node"] for r in truth["ranks"]}
    want = np.array([truth["clock"]["offset_ns"][str(node_of[r])] for r in range(8)])
    got = con.sql("SELECT clock_offset_ns FROM ranks ORDER BY rank").fetchnumpy()["clock_offset_ns"]
    err = (got - got[0]) - (want - want[0])
    assert np.abs(err).max() < 20_000, err
    q = con.sql("SELECT * FROM alignment_quality ORDER BY host").df()
    assert len(q) == 4 and (q.method == "collectives").all() and (q.collectives_used > 0).all()
    assert (q.residual_p95_ns.notna()).all() and (q.residual_p95_ns < 20_000).all()
    # the refinement undoes each node's UTC clock error (relative to node 0)
    utc_err = truth["clock"]["utc_clock_error_ns"]
    for i, host in enumerate(q.host):
        assert abs(q.offset_ns.iloc[i] + utc_err[str(i)] - utc_err["0"]) < 20_000, host


def test_synth_collectives_match_truth(skewed_job):
    con, truth = skewed_job
    c = con.sql("SELECT * FROM collectives ORDER BY start_ns").df()
    assert len(c) == len(truth["collectives"]) and (c.ranks == 8).all()
    want_skew = np.array([t["arrival_skew_ns"] for t in truth["collectives"]])
    assert np.abs(c.start_skew_ns.to_numpy() - want_skew).max() < 20_000
    # the last rank is only defined where it beat the second-latest by more than the alignment error
    arrivals = np.sort(np.array([t["arrival_ns"] for t in truth["collectives"]]), axis=1)
    clear = (arrivals[:, -1] - arrivals[:, -2]) > 20_000
    want_last = np.array([t["last_rank"] for t in truth["collectives"]])
    assert clear.sum() >= len(c) // 2
    assert (c.last_rank.to_numpy()[clear] == want_last[clear]).all()


def test_synth_straggler_named_with_cost(skewed_job, tmp_path):
    con, truth = skewed_job
    roll = con.sql("SELECT * FROM rank_rollup ORDER BY rank").df()
    assert roll.straggler.tolist() == [r == 3 for r in range(8)]
    assert (roll.verdict == "persistent").all()
    cost = roll.loc[3, "cost_ns"]
    want = truth["straggler"]["cost_ns_total"]
    assert abs(cost / want - 1) < 0.10, (cost, want)
    waited = sum(truth["straggler"]["collective_wait_ns_by_step"].values())
    assert abs(roll.loc[3, "wait_caused_ns"] / waited - 1) < 0.10
    v = con.sql("SELECT * FROM merge_straggler_verdict").df().iloc[0]
    assert v.straggler_cost_ns == cost
    delay = sum(truth["straggler"]["step_delay_ns_by_step"].values())
    assert abs(v.straggler_delay_ns / delay - 1) < 0.10
    assert (
        roll.loc[3, "times_slowest"]
        == con.sql("SELECT COUNT(*) FROM imbalance WHERE step IS NOT NULL").fetchone()[0]
    )


def test_synth_balanced_without_injection(tmp_path):
    con, truth = _synth_workspace(tmp_path, (), ranks=8, gpus_per_node=4, steps=10, seed=2)
    v = con.sql("SELECT * FROM merge_straggler_verdict").df()
    assert v.verdict.item() == "balanced" and pd.isna(v.straggler_rank.item())
    roll = con.sql("SELECT straggler FROM rank_rollup").df()
    assert not roll.straggler.any()
    assert con.sql("SELECT DISTINCT alignment_method FROM ranks").fetchall() == [("collectives",)]
    con.close()
