"""`nsight-analyze whatif` and the generator's new causes (issue 19): shape, replay, truth, bad input.

Expected values come from the generator's ground_truth.json (the job re-simulated without the
cause, same random draws; its partition and kernel counts) or from the hand computations stated
at each assertion. One small job (4 ranks, 2 nodes, 4 steps) is generated and ingested per module.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner
from conftest import TRACES, requires_shared

from nsight_analyze.cli import main
from nsight_analyze.store.duck import sql_rows
from nsight_analyze.whatif import SCENARIOS

SHAPE = dict(ranks=4, gpus_per_node=2, steps=4, kernels_per_step=40, seed=5)
DOCS = Path(__file__).resolve().parents[1] / "docs" / "whatif.md"


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """Input stalls of 3 ms every 2nd step on every rank, and rank 1's GPU 25 % slower."""
    from nsight_analyze.ingest.run import ingest
    from nsight_analyze.synth import generate

    tmp = tmp_path_factory.mktemp("whatif")
    truth = generate(tmp / "job", injections=("input-stall=2:3", "slow-gpu=1:+25"), vacuum=False, **SHAPE)
    db = tmp / "job.duckdb"
    ingest(sorted((tmp / "job").glob("*.sqlite")), db)
    doc = json.loads(_cli("whatif", "--db", str(db), "--format", "json"))
    return db, truth, doc


def _cli(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout  # progress notes go to stderr


def test_json_shape(job):
    _, truth, doc = job
    rows = doc["scenarios"]
    steps = sorted({int(s) for s in truth["kernels_per_step"]})  # the generator's steps
    assert [(r["scenario"], r["step"]) for r in rows] == [
        (s, step) for s in SCENARIOS for step in [*steps, None]
    ]
    for r in rows:
        assert set(r) == {
            "scenario",
            "step",
            "actual_step_time_ns",
            "step_time_ns",
            "gain_ns",
            "replayed_actual_ns",
            "fixed_ranks",
        }
        assert r["gain_ns"] == r["replayed_actual_ns"] - r["step_time_ns"]  # its definition
        text = DOCS.read_text()
        assert all(f"`{k}`" in text for k in r)  # every key documented
        assert f"`{r['scenario']}`" in text


def test_replay_reproduces_the_measured_steps(job):
    """With nothing removed the replay equals the measured step time (the model holds exactly on
    the synthetic job: within 0.1 %), and the measured time is the truth's longest window."""
    _, truth, doc = job
    want = {w["step"]: w["step_time_ns"] for w in truth["whatif_actual"]}
    for r in doc["scenarios"]:
        assert abs(r["replayed_actual_ns"] / r["actual_step_time_ns"] - 1) < 0.001, r
        assert abs(r["actual_step_time_ns"] / want[r["step"]] - 1) < 0.001, r


def test_no_input_stalls_and_slow_rank_match_resimulation(job):
    """Every scenario has a re-simulated truth here (generator `whatif`): within 2 %."""
    _, truth, doc = job
    got = {(r["scenario"], r["step"]): r["step_time_ns"] for r in doc["scenarios"]}
    scen = {w["scenario"] for w in truth["whatif"]}
    assert scen == set(SCENARIOS)
    for w in truth["whatif"]:
        assert abs(got[(w["scenario"], w["step"])] / w["step_time_ns"] - 1) < 0.02, w


def test_input_stall_steps_gain_the_stall(job):
    """Hand computation: the 3 ms stall hits steps 2 and 4 (every 2nd step); removing input stalls
    gains those steps at least 3 ms (plus the data loader's usual wait) and steps 1, 3 under 1 ms."""
    _, _, doc = job
    gain = {r["step"]: r["gain_ns"] for r in doc["scenarios"] if r["scenario"] == "no-input-stalls"}
    assert gain[2] >= 3_000_000 and gain[4] >= 3_000_000
    assert gain[1] < 1_000_000 and gain[3] < 1_000_000


def test_comms_hidden_bounded_by_busy_time(job):
    """Hiding communication cannot make a step shorter than the busiest rank's non-communication
    GPU time (compute + memory + other of time_partition), nor longer than measured."""
    db, _, doc = job
    con = duckdb.connect(str(db), read_only=True)
    busy = dict(
        con.execute(
            "SELECT step, max(compute_ns + memory_ns + other_ns) FROM time_partition "
            "WHERE step IS NOT NULL GROUP BY step"
        ).fetchall()
    )
    con.close()
    rows = [r for r in doc["scenarios"] if r["scenario"] == "comms-hidden" and r["step"] is not None]
    assert rows
    for r in rows:
        assert busy[r["step"]] <= r["step_time_ns"] <= r["actual_step_time_ns"], r


def test_table_and_markdown(job):
    db, _, _ = job
    out = _cli("whatif", "--db", str(db))
    assert "What fixing each cause would buy" in out
    for s in SCENARIOS:
        assert s in out
    assert "(rank 1)" in out  # slow-gpu=1: the rank replaced by the median
    md = _cli("whatif", "--db", str(db), "--format", "markdown", "--steps")
    assert md.count("| slowest-rank-at-median") == SHAPE["steps"] + 1
    csv = _cli("whatif", "--db", str(db), "--format", "csv").splitlines()
    assert csv[0].startswith("scenario,step,actual_step_time_ns,step_time_ns,gain_ns")
    assert csv[1].startswith("slowest-rank-at-median,1,") and csv[1].endswith(",1")  # fixed rank 1


def test_missing_workspace_is_one_line(tmp_path):
    result = CliRunner().invoke(main, ["whatif", "--db", str(tmp_path / "none.duckdb")])
    assert result.exit_code == 2
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "spec, message",
    [
        ("slow-gpu=x", "use slow-gpu=RANK:+PCT"),
        ("uneven-work=9:+20", "uneven-work rank 9 does not exist"),
        ("slow-host=1", "use slow-host=RANK:+PCT"),
        ("slow-link=3:+50", "slow-link node 3 does not exist"),
    ],
)
def test_bad_injection_is_one_line(tmp_path, spec, message):
    result = CliRunner().invoke(
        main, ["synth", str(tmp_path / "out"), "--ranks", "4", "--gpus-per-node", "2", "--inject", spec]
    )
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_generator_causes_shape_the_trace(tmp_path):
    """The generator's own truth: uneven-work adds round(30 % of 47) = 14 kernels per step to rank 2
    (layers_for: 40 kernels per step -> 1 layer -> 27 + 20 = 47); slow-gpu keeps rank 1's counts and
    lengthens its non-NCCL kernels by 25 % (noise is ±1.5 % per kernel); slow-host makes rank 3's
    host-bound idle 20 % of the step's GPU time (rank 0's busy time); slow-link makes node 1's ranks
    end transfers later."""
    from nsight_analyze.synth import generate

    truth = generate(
        tmp_path / "g",
        injections=("uneven-work=2:+30", "slow-gpu=1:+25", "slow-host=3:+20", "slow-link=1:+100"),
        vacuum=False,
        **SHAPE,
    )
    ranks = {r["rank"]: r for r in truth["ranks"]}
    steps = SHAPE["steps"]
    assert ranks[2]["expected_kernel_count"] - ranks[0]["expected_kernel_count"] == 14 * steps
    assert ranks[1]["expected_kernel_count"] == ranks[0]["expected_kernel_count"]
    gemm = [n for n in ranks[0]["kernels_by_name"] if "xmma_gemm" in n]
    assert gemm
    for n in gemm:
        a, b = ranks[0]["kernels_by_name"][n], ranks[1]["kernels_by_name"][n]
        assert a["count"] == b["count"]
        assert abs(b["total_ns"] / a["total_ns"] - 1.25) < 0.03
    part = {(r["rank"], r["step"]): r for r in truth["partition"] if r["step"] is not None}
    for step in range(1, steps + 1):
        r0 = part[(0, step)]
        busy = r0["compute_ns"] + r0["memory_ns"] + r0["other_ns"]  # ~ the step's base GPU time
        assert abs(part[(3, step)]["host_bound_ns"] / (0.2 * busy) - 1) < 0.1
        assert part[(0, step)]["host_bound_ns"] < 0.01 * part[(0, step)]["window_ns"]
    for c in truth["collectives"]:  # node 1 = ranks 2, 3
        assert min(c["end_ns"][2:]) > max(c["end_ns"][:2])
    assert {(a["rank"], a["cause"]) for a in truth["attribution"]} == {
        (2, "more-work"),
        (1, "slow-gpu"),
        (3, "slow-host"),
        (2, "slow-link"),
        (3, "slow-link"),
    }


def test_synth_help_lists_the_causes():
    out = _cli("synth", "--help")
    for key in ("slow-gpu=RANK:+PCT", "uneven-work=RANK:+PCT", "slow-host=RANK:+PCT", "slow-link=NODE:+PCT"):
        assert key.replace("-", "") in out.replace("-", "").replace("\n", "").replace(" ", "")


def test_report_section(job, tmp_path):
    """The report's "What fixing each cause would buy" shows the whatif JSON's whole-job gains
    (data-value holds the exact number) and the blamed rank (slow-gpu=1)."""
    import re

    db, _, doc = job
    out = tmp_path / "r.html"
    _cli("report", "--db", str(db), "-o", str(out))
    html = out.read_text()
    part = html[html.index('data-section="whatif"') :]
    part = part[: part.index("</section>")]
    gains = [int(v) for v in re.findall(r'data-key="gain_ns" data-value="(-?\d+)"', part)]
    want = sorted(r["gain_ns"] for r in doc["scenarios"] if r["step"] is None)
    assert sorted(gains) == want
    assert 'data-key="cause" data-value="slow-gpu"' in part


@requires_shared
def test_real_trace_with_periodic_steps(tmp_path):
    """pipit's CloverLeaf (one A100 rank, no step markers; its 10 timesteps detected from the
    kernels that run once per step, tests/test_step_detection.py): the replay with nothing removed
    reproduces every measured step exactly (hand check of the model on a real trace), no scenario
    makes a step longer, and nobody is blamed (one rank has no median to exceed)."""
    from nsight_analyze.ingest.run import ingest

    db = tmp_path / "real.duckdb"
    ingest([TRACES / "nsys" / "pipit" / "perlmutter-cloverleaf-cuda.sqlite"], db)
    doc = json.loads(_cli("whatif", "--db", str(db), "--format", "json"))
    rows = doc["scenarios"]
    assert {r["scenario"] for r in rows} == set(SCENARIOS) and len(rows) > len(SCENARIOS)
    for r in rows:
        assert r["replayed_actual_ns"] == r["actual_step_time_ns"], r
        assert r["gain_ns"] >= 0, r
    ranks = json.loads(_cli("ranks", "--db", str(db), "--format", "json"))
    assert [r["cause"] for r in ranks["attribution"]] == [None]


@requires_shared
def test_real_two_rank_trace_without_steps_is_unknown(tmp_path):
    """nsys-ai mfu_2gpu_before: a 300 ms window with no step markers, whose regular kernels are one
    FSDP block, not a step (test_step_detection.py): no replay, and the reason says why."""
    from nsight_analyze.ingest.run import ingest

    db = tmp_path / "real.duckdb"
    ingest([TRACES / "nsys" / "nsys-ai" / "mfu_2gpu_before.sqlite"], db)
    doc = json.loads(_cli("whatif", "--db", str(db), "--format", "json"))
    assert doc["scenarios"] == [] and doc["reason"].startswith("no step windows")


def test_event_budget_limits_the_replayed_steps(job, tmp_path):
    """settings.whatif_max_events = 3: step 1 has 2 all-reduces + its end = 3 events (generator: one
    layer -> 2 gradient buckets), so only step 1 starts within the budget (hand count)."""
    import shutil

    db, truth, _ = job
    assert sum(1 for c in truth["collectives"] if c["step"] == 1) == 2
    copy = tmp_path / "copy.duckdb"
    shutil.copy(db, copy)
    con = duckdb.connect(str(copy))
    con.execute("INSERT OR REPLACE INTO settings VALUES ('whatif_max_events', '3', 'test')")
    con.close()
    doc = json.loads(_cli("whatif", "--db", str(copy), "--format", "json"))
    assert sorted({r["step"] for r in doc["scenarios"]}, key=lambda s: (s is None, s)) == [1, None]


def test_python_api_matches_cli(job):
    import nsight_analyze as na

    db, _, doc = job
    assert na.open(db).whatif() == doc


@pytest.mark.parametrize("inject", ["launch-bound=2-3", "sync-stall"])
def test_launch_and_sync_scenarios_match_resimulation(tmp_path, inject):
    """no-launch-gaps (the job simulated again with kernel launches that cost the host nothing) and
    no-sync-stalls (synchronising calls return when the GPU drains) against the replay: within 2 %
    per step; the launch-bound steps gain most of their launch/host-bound idle (generator partition)."""
    from nsight_analyze.ingest.run import ingest
    from nsight_analyze.synth import generate

    truth = generate(tmp_path / "job", injections=(inject,), vacuum=False, **SHAPE)
    db = tmp_path / "job.duckdb"
    ingest(sorted((tmp_path / "job").glob("*.sqlite")), db)
    doc = json.loads(_cli("whatif", "--db", str(db), "--format", "json"))
    got = {(r["scenario"], r["step"]): r for r in doc["scenarios"]}
    want = [w for w in truth["whatif"] if w["scenario"] in ("no-launch-gaps", "no-sync-stalls")]
    assert {w["scenario"] for w in want} == {"no-launch-gaps", "no-sync-stalls"}
    for w in want:
        assert abs(got[(w["scenario"], w["step"])]["step_time_ns"] / w["step_time_ns"] - 1) < 0.02, w
    if inject.startswith("launch-bound"):
        idle = {}  # per step, the worst rank's launch-gap + host-bound idle (generator partition)
        for p in truth["partition"]:
            if p["step"] is not None:
                idle[p["step"]] = max(idle.get(p["step"], 0), p["launch_gap_ns"] + p["host_bound_ns"])
        for step in (2, 3):
            assert got[("no-launch-gaps", step)]["gain_ns"] >= 0.9 * idle[step], step


def test_empty_whatif_says_why(job, tmp_path):
    """No replayed step (settings.whatif_max_events = 0): the JSON carries the reason, the table says
    unknown, and diagnose keeps the rules' own bounds while slow-rank's gain is unknown (null), not 0."""
    import shutil

    from nsight_analyze.diagnose import diagnose
    from nsight_analyze.store.workspace import open_workspace

    db, _, _ = job
    copy = tmp_path / "copy.duckdb"
    shutil.copy(db, copy)
    con = duckdb.connect(str(copy))
    con.execute("INSERT OR REPLACE INTO settings VALUES ('whatif_max_events', '0', 'test')")
    con.close()
    doc = json.loads(_cli("whatif", "--db", str(copy), "--format", "json"))
    assert doc["scenarios"] == [] and "whatif_max_events = 0" in doc["reason"]
    assert "unknown" in _cli("whatif", "--db", str(copy))
    con = open_workspace(copy, read_only=True)
    try:
        findings = diagnose(con)
    finally:
        con.close()
    slow = next(f for f in findings if f.id == "slow-rank-slow-gpu")  # the injected slow-gpu=1
    assert slow.recoverable_ns_per_step is None and "unknown" in slow.summary
    stall = next(f for f in findings if f.id == "input-stall")  # the injected input-stall=2:3
    assert stall.metrics["whatif_gain_ns"] is None and "unknown" in stall.recoverable_method
    assert stall.recoverable_ns_per_step == stall.metrics["recoverable_ns_per_step_rule"] > 0


def _coll_ready_rows(ops: list[tuple], nccl: list[tuple]) -> duckdb.DuckDBPyConnection:
    """A connection with rank_coll_ready over hand-made rows: ops (rank, correlation_id,
    start_ns, end_ns, category) and NCCL kernels (rank, correlation_id, start_ns, end_ns)."""
    from nsight_analyze.store import query_layer

    con = duckdb.connect()
    con.execute(
        "CREATE TABLE gpu_ops "
        "(rank INTEGER, correlation_id BIGINT, start_ns BIGINT, end_ns BIGINT, category VARCHAR)"
    )
    con.execute(
        "CREATE TABLE nccl_kernels (rank INTEGER, correlation_id BIGINT, start_ns BIGINT, end_ns BIGINT)"
    )
    if ops:
        con.execute(f"INSERT INTO gpu_ops VALUES {sql_rows(ops)}")
    if nccl:
        con.execute(f"INSERT INTO nccl_kernels VALUES {sql_rows(nccl)}")
    con.execute(
        next(q for q in query_layer.layer() if q.name == "rank_coll_ready").create("view", temporary=True)
    )
    return con


def _coll_ready(ops: list[tuple], nccl: list[tuple]) -> list[tuple]:
    """rank_coll_ready over hand-made rows: ops (correlation_id, start_ns, end_ns, category) and
    NCCL kernels (correlation_id, start_ns, end_ns), all on rank 0."""
    con = _coll_ready_rows([(0, *o) for o in ops], [(0, *n) for n in nccl])
    return con.execute(
        "SELECT correlation_id, ready_ns, resume_ns, waits FROM rank_coll_ready ORDER BY correlation_id"
    ).fetchall()


def test_collective_ready_equals_its_definition_on_random_rows():
    """rank_coll_ready against its definition written as plain correlated subqueries (the oracle:
    ready = max end of non-comms work launched before, resume = first non-comms start at or
    after the end, waits as documented), on random rows full of ties (times and ids drawn from
    small ranges), NULL ids and ends, comms operations and three ranks."""
    import random

    rng = random.Random(7)

    def maybe(v):
        return None if rng.random() < 0.05 else v

    for _ in range(40):
        ops, nccl = [], []
        for _ in range(rng.randint(0, 60)):
            s = rng.randint(0, 40) * 1000
            cat = rng.choice(["compute", "memory", "comms", None])
            ops.append(
                (rng.randint(0, 2), maybe(rng.randint(0, 30)), s, maybe(s + rng.randint(0, 8) * 1000), cat)
            )
        for _ in range(rng.randint(0, 12)):
            s = rng.randint(0, 40) * 1000
            nccl.append(
                (rng.randint(0, 2), maybe(rng.randint(0, 30)), s, maybe(s + rng.randint(0, 6) * 1000))
            )
        con = _coll_ready_rows(ops, nccl)
        work = "FROM gpu_ops o WHERE o.rank = n.rank AND o.category IS DISTINCT FROM 'comms'"
        oracle = con.execute(
            f"""SELECT rank, correlation_id, start_ns, end_ns, ready, resume,
                       coalesce(resume - end_ns <= 5000 AND coalesce(run_end, 0) <= end_ns, false)
                FROM (SELECT n.*,
                             CASE WHEN n.correlation_id IS NOT NULL THEN (SELECT max(o.end_ns) {work}
                                 AND o.correlation_id < n.correlation_id) END AS ready,
                             (SELECT min(o.start_ns) {work} AND o.start_ns >= n.end_ns) AS resume,
                             (SELECT max(o.end_ns) {work} AND o.start_ns < n.end_ns) AS run_end
                      FROM nccl_kernels n)
                ORDER BY ALL"""
        ).fetchall()
        assert con.execute("SELECT * FROM rank_coll_ready ORDER BY ALL").fetchall() == oracle


def test_collective_ready_counts_every_operation_starting_at_the_same_time():
    # By hand (docs/whatif.md, rank_coll_ready's definition): A [100, 200) and B [100, 500) start
    # together; the all-reduce (id 3) runs [300, 400), C starts 2 ns after it ends. B still runs
    # at 400, so the rank's work did not wait for the collective (waits false), whichever of A and
    # B an order of equal starts puts first; ready = max end of ids < 3 = 500; resume = 402.
    for a, b in [((1, 100, 200), (2, 100, 500)), ((2, 100, 500), (1, 100, 200))]:
        ops = [(*a, "compute"), (*b, "compute"), (4, 402, 450, "compute"), (5, 300, 400, "comms")]
        assert _coll_ready(ops, [(3, 300, 400)]) == [(3, 500, 402, False)]
    # without B: nothing runs at 400 and C starts within 5 us of the end: the work waited
    assert _coll_ready([(1, 100, 200, "compute"), (4, 402, 450, "compute")], [(3, 300, 400)]) == [
        (3, 200, 402, True)
    ]
    # an NCCL kernel without a correlation id: when it was ready is not known
    assert _coll_ready([(1, 100, 200, "compute")], [(None, 300, 400)]) == [(None, None, None, False)]


def test_replay_positions_equal_their_definition_on_random_rows():
    """_whatif_step_ends and _whatif_dep_ord (the rank-local half of the replay's queued-collective
    rule, docs/whatif.md) against their definitions written as correlated subqueries over gpu_ops
    (the oracle), on random kernels and copies full of ties: disjoint step windows with gaps between
    them, operations outside every window, comms operations, NULL ends, NCCL starts before any work
    of their step. Why: the job step read every GPU operation of the job for this (12.8M rows at 64
    ranks x 200k kernels); it now reads these per-rank results, and the what-if tests above pass
    even when the position is off by one."""
    import random

    from nsight_analyze.store import query_layer
    from nsight_analyze.store.schema import SCHEMA_FILE

    rng = random.Random(11)
    names = (
        "nccl_ce_copies",
        "gpu_ops",
        "_kernel_names",
        "_interval_buckets",
        "_bucket_of",
        "is_graph_launch",
        "_graph_launched",
        "_kernel_windows",
        "_whatif_step_ops",
        "_whatif_step_ends",
        "_whatif_dep_ord",
    )
    queries = {q.name: q for q in query_layer.layer()}
    for _ in range(40):
        con = duckdb.connect()
        con.execute(SCHEMA_FILE.read_text())
        con.execute("CREATE TEMP TABLE steps (rank INTEGER, step BIGINT, start_ns BIGINT, end_ns BIGINT)")
        con.execute("CREATE TEMP TABLE merge_nccl_kernels (rank INTEGER, start_ns BIGINT)")
        kernels, copies, windows, nccl = [], [], [], []
        for rank in range(3):
            cuts = sorted(rng.sample(range(0, 60), 6))
            windows += [(rank, n, cuts[2 * n] * 1000, cuts[2 * n + 1] * 1000) for n in range(3)]
            windows.append((rank, None, 0, 60_000))  # the whole-capture row: never a step
            for _ in range(rng.randint(0, 40)):
                s = rng.randint(0, 60) * 1000
                end = None if rng.random() < 0.05 else s + rng.randint(0, 5) * 1000
                if rng.random() < 0.8:
                    kernels.append(
                        (rank, s, end, f"k{rng.randint(0, 3)}", rng.choice(["compute", "comms", None]))
                    )
                else:
                    copies.append((rank, s, end, rng.choice(["HtoD", "PtoP", None])))
            nccl += [(rank, rng.randint(0, 60) * 1000) for _ in range(rng.randint(0, 10))]
        for table, rows in (
            ("kernels (rank, start_ns, end_ns, name, category)", kernels),
            ("memops (rank, start_ns, end_ns, kind)", copies),
            ("steps", windows),
            ("merge_nccl_kernels", nccl),
        ):
            if rows:
                con.execute(f"INSERT INTO {table} VALUES {sql_rows(rows)}")
        for name in names:
            con.execute(queries[name].create("view", temporary=True))
        work = (
            "FROM gpu_ops o WHERE o.rank = w.rank AND o.category IS DISTINCT FROM 'comms' "
            "AND o.start_ns >= w.start_ns AND o.start_ns < w.end_ns"
        )
        ends_oracle = con.execute(
            f"""SELECT w.rank, w.step, (SELECT list(o.end_ns ORDER BY o.start_ns DESC, o.end_ns DESC) {work})
                FROM steps w WHERE w.step IS NOT NULL AND EXISTS (SELECT 1 {work}) ORDER BY ALL"""
        ).fetchall()
        assert con.execute("SELECT * FROM _whatif_step_ends ORDER BY ALL").fetchall() == ends_oracle
        # the position's operation ends last at or before the start (ties in end: any of them)
        dep_oracle = con.execute(
            f"""SELECT DISTINCT k.rank, k.start_ns, w.step,
                       (SELECT max(o.end_ns) {work} AND o.end_ns <= k.start_ns)
                FROM merge_nccl_kernels k JOIN steps w ON w.rank = k.rank AND w.step IS NOT NULL
                     AND k.start_ns >= w.start_ns AND k.start_ns < w.end_ns
                ORDER BY ALL"""
        ).fetchall()
        got = con.execute(
            """SELECT d.rank, d.start_ns, d.step, e.ends[d.rev_ord]
               FROM _whatif_dep_ord d LEFT JOIN _whatif_step_ends e USING (rank, step) ORDER BY ALL"""
        ).fetchall()
        assert got == dep_oracle
