"""diagnose: parity with nsys' expert rules on the real traces, and the synthetic injections.

Two independent references:
* the CSV outputs of `nsys analyze` (Nsight Systems 2022.4) on every shared trace: every event it
  flagged must be in the evidence of the matching finding (same start and duration);
* synthetic jobs with one injected anomaly each: the injection must be the first or second
  finding, name the right ranks/steps, and its recoverable time must be within 10 % of the value
  computed from ground_truth.json (an implementation of docs/metrics.md independent of the SQL).
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import duckdb
import pytest
from conftest import TRACES, ingested, nsys_traces, oracle_dir, requires_shared, shared_ingested, synth_cases
from hypothesis import example, given, settings
from hypothesis import strategies as st

from nsight_analyze.diagnose import THRESHOLDS, diagnose, findings_json
from nsight_analyze.errors import UserError
from nsight_analyze.store import query_layer

ROOT = Path(__file__).resolve().parents[1]
TRACES_NCU = TRACES / "ncu"

# nsys rule -> (finding id, evidence name, CSV key columns, evidence key columns)
NSYS_RULES = {
    "cuda-sync-api": (
        "excessive-sync",
        "cuda-sync-api",
        ("Start (ns)", "Duration (ns)"),
        ("start_ns", "duration_ns"),
    ),
    "cuda-sync-memcpy": (
        "excessive-sync",
        "cuda-sync-memcpy",
        ("Start (ns)", "Duration (ns)"),
        ("start_ns", "duration_ns"),
    ),
    "cuda-async-memcpy": (
        "excessive-sync",
        "cuda-async-memcpy",
        ("Start (ns)", "Duration (ns)"),
        ("start_ns", "duration_ns"),
    ),
    "cuda-sync-memset": (
        "excessive-sync",
        "cuda-sync-memset",
        ("Start (ns)", "Duration (ns)"),
        ("start_ns", "duration_ns"),
    ),
    "gpu-starv": (
        "gpu-starvation",
        "gpu-starv",
        ("Start (ns)", "Duration (ns)"),
        ("start_ns", "duration_ns"),
    ),
    "gpu-low-util": (
        "gpu-low-utilisation",
        "gpu-low-util",
        ("Start (ns)", "Duration (ns)", "In-Use (%)"),
        ("start_ns", "duration_ns", "in_use_pct"),
    ),
}
NSYS_CAP = 50


def _key(values, csv_row: bool):
    out = []
    for v in values:
        out.append(round(float(v), 1) if isinstance(v, float) or (csv_row and "." in str(v)) else int(v))
    return tuple(out)


# ------------------------------------------------------------------------------------------------
# Library contract


def test_thresholds_are_documented_with_units():
    doc = (ROOT / "docs" / "diagnose.md").read_text()
    for name in THRESHOLDS:
        assert f"`{name}`" in doc, f"threshold {name} missing from docs/diagnose.md"
        units = {"pct", "us", "ms", "bytes", "rows", "chunks", "kernels", "default"}
        assert name.rsplit("_", 1)[-1] in units, name


def test_unknown_or_bad_threshold_is_a_user_error(tmp_path):
    import duckdb

    con = duckdb.connect()
    with pytest.raises(UserError, match="unknown threshold"):
        diagnose(con, {"no_such_threshold": 1})
    with pytest.raises(UserError, match="not a number"):
        diagnose(con, {"gpu_starv_gap_ms": "soon"})
    # the rules put thresholds into SQL: NaN was read as a column name (the rule failed), a
    # negative one passed, 0 chunks divided by zero; each is said before any rule runs
    for name, value, least in (
        ("copy_min_pct", "nan", "0"),
        ("copy_min_pct", "-5", "0"),
        ("gpu_starv_gap_ms", "inf", "0"),
        ("low_util_chunks", "0", "1 (a count)"),
    ):
        with pytest.raises(UserError, match=re.escape(f"must be a finite number of at least {least}")):
            diagnose(con, {name: value})
    assert diagnose(con, {"sm_count_default": 0, "low_util_chunks": 1}).thresholds["low_util_chunks"] == 1


# ------------------------------------------------------------------------------------------------
# Parity with nsys analyze (2022.4) on the shared traces


def _oracle_traces() -> list[Path]:
    return [t for t in nsys_traces() if (oracle_dir(t) / "reports.tsv").exists()]


@requires_shared
@pytest.mark.parametrize("trace", _oracle_traces(), ids=lambda p: p.stem if p else "none")
def test_nsys_analyze_parity(trace, tmp_path):
    con = shared_ingested([trace], tmp_path / "ws.duckdb")
    try:
        findings = diagnose(con)
    finally:
        con.close()
    assert findings.job["rule_errors"] == []
    by_id = {f.id: f for f in findings}
    status = {}
    for line in (oracle_dir(trace) / "reports.tsv").read_text().splitlines():
        parts = line.split("\t")
        if len(parts) >= 2 and parts[0].startswith("analyze_"):
            status[parts[0][len("analyze_") : -len(".csv")]] = parts[1]
    for rule, (fid, ev_name, csv_cols, ev_cols) in NSYS_RULES.items():
        csv_path = oracle_dir(trace) / f"analyze_{rule}.csv"
        expected = set()
        if csv_path.exists():
            with csv_path.open() as fh:
                expected = {_key([r[c] for c in csv_cols], True) for r in csv.DictReader(fh)}
        finding = by_id.get(fid)
        evidence = next((e for e in finding.evidence if e.name == ev_name), None) if finding else None
        got = {_key([r[c] for c in ev_cols], False) for r in evidence.rows} if evidence else set()
        missing = expected - got
        assert not missing, (
            f"{rule}: nsys flagged {len(missing)} events diagnose did not: {sorted(missing)[:5]}"
        )
        if status.get(rule) in ("no rows", "skipped"):
            assert not got, f"{rule}: nsys found nothing, diagnose lists {sorted(got)[:5]}"
        elif len(expected) < NSYS_CAP and evidence is not None:
            assert evidence.total_rows == len(expected) or got == expected, (
                f"{rule}: extra events {got - expected}"
            )


def _nsys_gpu_gaps(ops: list[tuple[int, int, int, int]], min_ns: int) -> list[tuple]:
    """nsys 2022.4 gpu-starv's pairing, written out (docs of _diag_gpu_gaps): per rank and device
    the operations' starts and ends sorted apart, the j-th end paired with the (j+1)-th start."""
    out = []
    for part in sorted({(r, d) for r, d, _, _ in ops}):
        starts = sorted(s for r, d, s, _ in ops if (r, d) == part and s > 0)
        ends = sorted(e for r, d, s, e in ops if (r, d) == part and s > 0)
        out += [(*part, e, s) for e, s in zip(ends, starts[1:]) if s - e > min_ns]
    return sorted(out)


_op = st.tuples(st.integers(0, 1), st.integers(0, 1), st.integers(0, 60), st.integers(0, 30)).map(
    # (rank, device, start, end): overlaps, ties, zero lengths; hypothesis lists them in no order
    lambda t: (t[0], t[1], t[2], t[2] + t[3])
)


@settings(max_examples=200, deadline=None)
@given(ops=st.lists(_op, max_size=25), min_ns=st.sampled_from([0, 3]))
@example(ops=[(0, 0, 1, 50), (0, 0, 5, 10), (0, 0, 20, 30), (0, 0, 60, 61)], min_ns=0)  # inside one
@example(ops=[(1, 0, 40, 41), (0, 0, 1, 2), (1, 0, 3, 4), (0, 0, 30, 31)], min_ns=0)  # out of order
def test_gpu_idle_gaps_pair_ends_and_starts_as_nsys_does(ops, min_ns):
    """_diag_gpu_gaps (one sort and a running max) against the two-sort pairing it replaces, on
    operations of two ranks stored out of time order (the macro's streaming pass needs its sort)."""
    con = duckdb.connect()
    con.execute("CREATE TABLE gpu_ops (rank INTEGER, device_id INTEGER, start_ns BIGINT, end_ns BIGINT)")
    if ops:
        con.executemany("INSERT INTO gpu_ops VALUES (?, ?, ?, ?)", [list(o) for o in ops])
    con.execute(query_layer.query_path("_diag_gpu_gaps").read_text())
    got = con.execute(
        f"SELECT rank, device_id, start_ns, end_ns, duration_ns FROM _diag_gpu_gaps({min_ns})"
    ).fetchall()
    assert all(d == e - s for _, _, s, e, d in got)
    assert sorted(g[:4] for g in got) == _nsys_gpu_gaps(ops, min_ns)


@requires_shared
def test_a_sync_call_that_stalled_nothing_is_not_called_a_stall(tmp_path):
    """nsys-ai's mock.sqlite: `nsys analyze` lists one cudaStreamSynchronize (the oracle's
    analyze_cuda-sync-api.csv), so the finding is kept for parity; but the time partition finds no
    GPU idle that call explains, and the finding must not claim a stall it did not measure."""
    con = shared_ingested([TRACES / "nsys/nsys-ai/mock.sqlite"], tmp_path / "ws.duckdb")
    try:
        finding = {f.id: f for f in diagnose(con)}["excessive-sync"]
    finally:
        con.close()
    assert finding.recoverable_ns_per_step == 0
    assert finding.title == "Synchronising calls that did not stall the GPU"
    assert "(cuda-sync-api: 1) left the GPU idle for no measured time" in finding.summary


@requires_shared
def test_nsight_compute_only_workspace_without_a_known_gpu_invents_no_roofline(tmp_path):
    """The CSV names no GPU and its ampere_* kernels run on every GPU since Ampere, so the ridge point
    (peak / bandwidth) is unknown: no launch is called memory-bound from a guessed roofline."""
    csv_path = TRACES_NCU / "leleucas" / "bert_torch_nsight.csv"
    if not csv_path.exists():
        pytest.skip(f"{csv_path} is absent")
    con = ingested([csv_path], tmp_path / "ws.duckdb")
    try:
        bounds = con.execute("SELECT DISTINCT bound FROM roofline").fetchall()
        findings = diagnose(con)
    finally:
        con.close()
    assert findings.job["rule_errors"] == []
    assert bounds == [(None,)]
    assert not [f for f in findings if f.id == "memory-bound" and "Nsight Compute" in f.title]


# ------------------------------------------------------------------------------------------------
# Synthetic jobs with known ground truth

SYN = dict(ranks=4, gpus_per_node=2, steps=8, seed=1)
CASES = {
    "clean": [],
    "straggler": ["straggler=3:+20"],
    "input-stall": ["input-stall=4:30"],
    "exposed-comm": ["exposed-comm"],
    "launch-bound": ["launch-bound=3-5"],
    "sync-stall": ["sync-stall"],
    "cuda-graph": ["cuda-graph"],
    "clock-skew": ["clock-skew=1:+5"],
}


@pytest.fixture
def synthetic(synth_diagnosis):
    """case -> (findings, truth, SynthJob): generated, ingested and diagnosed once per test run."""
    return synth_cases(synth_diagnosis, CASES, SYN)


def _truth_steps(truth: dict) -> dict[int, list[dict]]:
    steps: dict[int, list[dict]] = {}
    for row in truth["partition"]:
        if row["step"] is not None:
            steps.setdefault(row["step"], []).append(row)
    return steps


def _per_step_max(truth: dict, *fields: str) -> float:
    steps = _truth_steps(truth)
    return sum(max(sum(r[f] for f in fields) for r in rows) for rows in steps.values()) / len(steps)


def _truth_imbalance(truth: dict, rank: int) -> float:
    steps = _truth_steps(truth)
    total = 0.0
    for rows in steps.values():
        mine = next(r["compute_ns"] for r in rows if r["rank"] == rank)
        others = [r["compute_ns"] for r in rows if r["rank"] != rank]
        total += mine - sum(others) / len(others)
    return total / len(steps)


def _truth_exposed(truth: dict) -> float:
    """Per step, min over ranks of exposed comms - waits for the last arrival - last bucket's transfer."""
    colls: dict[int, list[dict]] = {}
    for c in truth["collectives"]:
        colls.setdefault(c["step"], []).append(c)
    steps = _truth_steps(truth)
    total = 0.0
    for step, rows in steps.items():
        cs = sorted(colls[step], key=lambda c: c["bucket"])
        last = cs[-1]
        vals = []
        for r in rows:
            k = r["rank"]
            wait = sum(c["wait_ns"][k] for c in cs)
            transfer = last["end_ns"][k] - max(last["arrival_ns"])
            vals.append(max(r["comms_exposed_ns"] - wait - transfer, 0))
        total += min(vals)
    return total / len(steps)


def _top2(findings, fid):
    ids = [f.id for f in findings]
    assert fid in ids[:2], f"{fid} not in the first two findings: {ids}"
    return next(f for f in findings if f.id == fid)


ALL_RANKS = list(range(SYN["ranks"]))
ALL_STEPS = list(range(1, SYN["steps"] + 1))


def test_clean_job_has_no_high_severity_finding(synthetic):
    findings, _, _ = synthetic("clean")
    assert findings.job["rule_errors"] == []
    high = [f.id for f in findings if f.severity == "high"]
    assert not high, f"clean synthetic job: high-severity findings {high}"


@pytest.mark.parametrize(
    "case, fid, ranks, steps, truth_fn",
    [
        ("straggler", "load-imbalance", [3], ALL_STEPS, lambda t: _truth_imbalance(t, 3)),
        ("input-stall", "input-stall", ALL_RANKS, [4, 8], lambda t: _per_step_max(t, "input_stall_ns")),
        ("exposed-comm", "exposed-comm", ALL_RANKS, ALL_STEPS, _truth_exposed),
        (
            "launch-bound",
            "launch-bound",
            ALL_RANKS,
            [3, 4, 5],
            lambda t: _per_step_max(t, "launch_gap_ns", "host_bound_ns"),
        ),
        ("sync-stall", "excessive-sync", ALL_RANKS, ALL_STEPS, lambda t: _per_step_max(t, "sync_stall_ns")),
    ],
)
def test_injection_is_found_with_recoverable_time(synthetic, case, fid, ranks, steps, truth_fn):
    findings, truth, _ = synthetic(case)
    assert findings.job["rule_errors"] == []
    f = _top2(findings, fid)
    assert f.ranks == ranks
    assert f.steps == steps
    expected = truth_fn(truth)
    assert expected > 0
    # the rule's own measure (before the what-if bound, test_recoverable_time_is_bounded_by_whatif)
    own = f.metrics.get("recoverable_ns_per_step_rule", f.recoverable_ns_per_step)
    assert own == pytest.approx(expected, rel=0.10), (own, expected)
    assert f.severity != "info"
    if fid == "excessive-sync":  # a measured stall is called one (the title of no stall: above)
        assert f.title == "Synchronisation stalls the GPU"
    assert f.evidence and all(e.sql for e in f.evidence)
    assert f.fixes and all(x.trade_off for x in f.fixes)
    assert f.signals


@pytest.mark.parametrize("case", ["straggler", "input-stall", "exposed-comm", "launch-bound", "sync-stall"])
def test_affected_steps_match_recoverable_time(synthetic, case):
    """A finding that recovers time counts the steps it lists (never 0 next to a non-zero time)."""
    findings, _, _ = synthetic(case)
    for f in findings:
        if f.recoverable_ns_per_step:
            n = f.metrics["affected_steps"]
            assert (n == len(f.steps) and n >= 1) or (n is None and f.metrics["affected_steps_note"]), (
                f.id,
                n,
                f.steps,
            )


def test_cuda_graph_coverage_is_reported(synthetic):
    findings, _, _ = synthetic("cuda-graph")
    f = _top2(findings, "cuda-graphs")
    assert f.ranks == ALL_RANKS and f.kind == "capture"
    assert f.metrics["graph_time_pct"] >= THRESHOLDS["graph_min_pct"].default
    assert f.recoverable_ns_per_step is None


def test_clock_skew_is_reported_on_the_skewed_node(synthetic):
    findings, truth, _ = synthetic("clock-skew")
    f = _top2(findings, "clock-skew")
    node1 = [r["rank"] for r in truth["ranks"] if r["node"] == 1]
    assert f.ranks == node1
    assert f.metrics["max_correction_ns"] == pytest.approx(5_000_000, rel=0.10)


def test_ranking_is_by_recoverable_time(synthetic):
    findings, _, _ = synthetic("launch-bound")
    perf = [
        f.recoverable_ns_per_step for f in findings if f.kind == "performance" and f.recoverable_ns_per_step
    ]
    assert perf == sorted(perf, reverse=True)
    assert [f.rank for f in findings] == list(range(1, len(findings) + 1))


def test_json_is_stable_and_rerunnable(synthetic, tmp_path):
    findings, _, _ = synthetic("input-stall")
    doc = findings_json(findings)
    text = json.dumps(doc, sort_keys=True)
    assert json.loads(text) == doc
    assert doc["schema"] == "nsight-analyze-diagnose/1"
    assert set(doc) == {"schema", "job", "thresholds", "counts", "findings"}
    keys = {
        "id",
        "title",
        "kind",
        "severity",
        "summary",
        "ranks",
        "steps",
        "recoverable_ns_per_step",
        "recoverable_pct",
        "recoverable_method",
        "metrics",
        "evidence",
        "signals",
        "fixes",
        "rank",
    }
    for f in doc["findings"]:
        assert set(f) == keys
        for ev in f["evidence"]:
            assert set(ev) == {"name", "description", "sql", "columns", "rows", "total_rows"}
        for s in f["signals"]:
            assert s["verdict"] in ("supports", "against", "neutral")
    assert doc["thresholds"] == {k: v.default for k, v in THRESHOLDS.items()}


@pytest.mark.parametrize("limit, kept", [(0, []), (3, [9, 8, 7]), (10, list(range(9, -1, -1))), (20, None)])
def test_evidence_keeps_the_first_rows_in_order_and_counts_all(limit, kept):
    """The evidence of a 10-row result, in its order: the first `limit` rows, and 10 rows counted
    whether the result is longer than the limit (counted again in SQL) or not."""
    import duckdb

    from nsight_analyze.rules.base import evidence_rows

    con = duckdb.connect()
    names, rows, total = evidence_rows(
        con, "SELECT range AS a, 0.5 * range AS b FROM range(10) ORDER BY a DESC", limit
    )
    assert names == ["a", "b"] and total == 10
    assert [r["a"] for r in rows] == (kept if kept is not None else list(range(9, -1, -1)))
    assert all(r["b"] == r["a"] / 2 and isinstance(r["b"], float) for r in rows)  # DECIMAL as float


def test_ranks_do_not_depend_on_the_evidence_shown(sample_workspace):
    """A finding names every rank its measure covers, not the ranks of the evidence rows kept:
    gpu-low-utilisation on the sample job has low-utilisation windows on its 4 ranks (12 rows);
    with one evidence row kept it named one rank."""
    from nsight_analyze.diagnose import diagnose
    from nsight_analyze.store.workspace import open_workspace

    con = open_workspace(sample_workspace, read_only=True)
    try:
        want = con.execute(
            "SELECT list(DISTINCT rank ORDER BY rank) FROM diag_low_util(chunks := 30)"
        ).fetchone()[0]
        shown = {f.id: f for f in diagnose(con, {"evidence_rows": 1})}
    finally:
        con.close()
    assert len(want) == 4  # the oracle: the rule's own source, every row
    low = shown["gpu-low-utilisation"]
    assert len(low.evidence[0].rows) == 1 and low.evidence[0].total_rows > 4
    assert low.ranks == want


def test_evidence_sql_reruns_against_the_views(synthetic):
    """The SQL shown with each evidence table gives the same rows on a fresh read-only connection."""
    from conftest import frame_rows

    from nsight_analyze.store.workspace import open_workspace

    findings, _, job = synthetic("input-stall")
    db = job.db
    con = open_workspace(db, read_only=True)
    try:
        for f in findings:
            for ev in f.evidence:
                df = con.execute(ev.sql).df()
                assert len(df) == ev.total_rows, (f.id, ev.name)
                assert list(df.columns) == ev.columns
                assert frame_rows(df, len(ev.rows)) == ev.rows, (f.id, ev.name)
    finally:
        con.close()


def test_cli_formats_thresholds_and_fail_on(synthetic):
    from click.testing import CliRunner

    from nsight_analyze.cli import main

    _, _, job = synthetic("input-stall")
    db = job.db
    runner = CliRunner()
    res = runner.invoke(main, ["diagnose", "--db", str(db), "--format", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["schema"] == "nsight-analyze-diagnose/1" and doc["findings"][0]["id"] == "input-stall"
    res = runner.invoke(
        main, ["diagnose", "--db", str(db), "--format", "json", "--threshold", "input_stall_min_pct=99"]
    )
    doc = json.loads(res.stdout)
    assert doc["thresholds"]["input_stall_min_pct"] == 99
    assert "input-stall" not in [f["id"] for f in doc["findings"]]
    res = runner.invoke(main, ["diagnose", "--db", str(db), "--format", "markdown"])
    assert res.exit_code == 0 and "# nsight-analyze diagnose" in res.output and "```sql" in res.output
    res = runner.invoke(main, ["diagnose", "--db", str(db)])
    assert res.exit_code == 0 and "input-stall" in res.output
    res = runner.invoke(main, ["diagnose", "--db", str(db), "--fail-on", "high"])
    assert res.exit_code == 1
    res = runner.invoke(main, ["diagnose", "--db", str(db), "--threshold", "nope=1"])
    assert res.exit_code == 2 and "unknown threshold" in res.output
    res = runner.invoke(main, ["diagnose", "--db", str(db), "--threshold", "nope"])
    assert res.exit_code == 2 and "NAME=VALUE" in res.output


def test_hfu_is_explained_by_the_partition(synthetic, monkeypatch):
    """With HFU known (here stubbed: the shared traces have no matched Nsight Compute data), the
    compute-efficiency finding sets it against the partition and claims no time of its own."""
    import nsight_analyze.mfu as mfu
    from nsight_analyze.store.workspace import open_workspace

    monkeypatch.setattr(
        mfu, "hfu_mfu_summary", lambda con, **kw: {"hfu": 0.25, "mfu": None, "coverage_pct": 90.0}
    )
    _, truth, job = synthetic("input-stall")
    db = job.db
    con = open_workspace(db, read_only=True)
    try:
        findings = diagnose(con)
    finally:
        con.close()
    f = next(x for x in findings if x.id == "compute-efficiency")
    assert f.recoverable_ns_per_step is None
    assert all(x.recoverable_ns_per_step is None for x in findings[f.rank - 1 :])
    rows = [r for r in truth["partition"] if r["step"] is not None]
    compute_share = sum(r["compute_ns"] for r in rows) / sum(r["window_ns"] for r in rows)
    assert f.metrics["hfu_while_computing"] == pytest.approx(0.25 / compute_share, rel=1e-3)
    idle = next(s for s in f.signals if s.name == "GPU idle")
    expected_idle = 100 * sum(r["idle_ns"] for r in rows) / sum(r["window_ns"] for r in rows)
    assert idle.value == pytest.approx(expected_idle, abs=0.01) and idle.verdict == "supports"


def test_communication_by_dimension_follows_exposed_comm(synthetic):
    """Clean job: no exposed-comm and no per-dimension child. Exposed-comm job (plain data parallel,
    one dimension by construction of the generator): the parent carries the breakdown (one dp row)
    and no child repeats it."""
    findings, _, _ = synthetic("clean")
    assert not [f.id for f in findings if f.id.startswith("exposed-comm")]
    findings, _, _ = synthetic("exposed-comm")
    parent = next(f for f in findings if f.id == "exposed-comm")
    assert not [f.id for f in findings if f.metrics.get("parent") == "exposed-comm"]
    ev = next(e for e in parent.evidence if e.name == "per parallelism dimension")
    assert [r["dimension"] for r in ev.rows] == ["dp"]
    # its overlap-recoverable part is the parent's (one dimension holds every NCCL kernel)
    assert ev.rows[0]["recoverable_ns_per_step"] == pytest.approx(parent.recoverable_ns_per_step, abs=1)


WHATIF_OF = {  # finding -> the what-if scenario that removes its cause (docs/diagnose.md "What-if bound")
    "input-stall": "no-input-stalls",
    "excessive-sync": "no-sync-stalls",
    "launch-bound": "no-launch-gaps",
    "exposed-comm": "comms-hidden",
    "load-imbalance": "slowest-rank-at-median",
}


@pytest.mark.parametrize(
    "case, fid",
    [
        ("straggler", "load-imbalance"),
        ("input-stall", "input-stall"),
        ("exposed-comm", "exposed-comm"),
        ("launch-bound", "launch-bound"),
        ("sync-stall", "excessive-sync"),
    ],
)
def test_recoverable_time_is_bounded_by_whatif(synthetic, case, fid):
    """Issue 19: diagnose's recoverable time uses the what-if numbers: min(the rule's measure, the
    whole-job gain_ns of the scenario removing the cause, read here from the workspace's whatif table)."""
    import duckdb

    findings, _, job = synthetic(case)
    db = job.db
    con = duckdb.connect(str(db), read_only=True)
    gains = dict(
        con.execute("SELECT scenario, max(gain_ns) FROM whatif WHERE step IS NULL GROUP BY 1").fetchall()
    )
    con.close()
    f = next(x for x in findings if x.id == fid)
    assert f.metrics["whatif_scenario"] == WHATIF_OF[fid]
    assert f.metrics["whatif_gain_ns"] == gains[WHATIF_OF[fid]]
    want = max(min(f.metrics["recoverable_ns_per_step_rule"], gains[WHATIF_OF[fid]]), 0)
    assert f.recoverable_ns_per_step == want
    assert "what-if" in f.recoverable_method
    for x in findings:  # every bounded finding, not only the injected one
        if x.metrics.get("whatif_scenario"):
            bound = min(x.metrics["recoverable_ns_per_step_rule"], gains[x.metrics["whatif_scenario"]])
            assert x.recoverable_ns_per_step == max(bound, 0), x.id
        if x.id.startswith("slow-rank-"):
            assert x.recoverable_ns_per_step == max(gains["slowest-rank-at-median"], 0)
