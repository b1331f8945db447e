"""Communication by parallelism dimension (issue 19 points 3-4): comm_groups / comms / synth --parallel.

Expected values come from the generator's ground truth (synth/parallel.py computes them from its
own events, independently of the SQL) or, for the real traces, from the traces' own metadata
(distributedInfo.pg_config, printed in the comments) and the rules of docs/metrics.md.
"""

from __future__ import annotations

import json

import duckdb
import pytest
from click.testing import CliRunner
from conftest import TRACES, copy_workspace, requires_shared, shared_ingest

from nsight_analyze.cli import main
from nsight_analyze.comms import comms
from nsight_analyze.errors import UserError
from nsight_analyze.ingest.run import ingest
from nsight_analyze.store.workspace import open_workspace
from nsight_analyze.synth import generate
from nsight_analyze.synth.parallel import parse_parallel

PARALLEL = "tp=2,pp=2,dp=2"  # 8 ranks, 4 per node: TP and DP inside a node, PP across the two nodes


def _job(tmp_path_factory, name: str, nccl_trace: bool) -> tuple[str, dict]:
    out = tmp_path_factory.mktemp(name)
    truth = generate(out / "job", ranks=8, gpus_per_node=4, steps=2, parallel=PARALLEL, nccl_trace=nccl_trace)
    db = str(out / "ws.duckdb")
    ingest([out / "job"], db)
    return db, truth


@pytest.fixture(scope="module")
def legacy(tmp_path_factory):
    return _job(tmp_path_factory, "legacy", False)


@pytest.fixture(scope="module")
def advanced(tmp_path_factory):
    return _job(tmp_path_factory, "advanced", True)


def _groups(db: str):
    con = open_workspace(db, read_only=True)
    try:
        return con.sql("SELECT * FROM comm_groups").df(), comms(con, "dimension")
    finally:
        con.close()


@pytest.mark.parametrize("which", ["legacy", "advanced"])
def test_dimension_totals_exact_and_exposed_within_1pct(which, request):
    db, truth = request.getfixturevalue(which)
    _, data = _groups(db)
    got = {r["dimension"]: r for r in data["rows"]}
    want = truth["comms_by_dimension"]  # generator truth: {dim: {total_ns, exposed_ns}} over ranks
    assert set(got) == set(want) == {"tp", "pp", "dp"}
    for dim, w in want.items():
        assert got[dim]["total_ns"] == w["total_ns"], dim
        assert got[dim]["exposed_ns"] == pytest.approx(w["exposed_ns"], rel=0.01), dim


@pytest.mark.parametrize("which", ["legacy", "advanced"])
def test_each_communicator_gets_its_dimension_and_link(which, request):
    db, truth = request.getfixturevalue(which)
    groups, _ = _groups(db)
    # truth communicators: 4 TP pairs, 4 PP pairs, 4 DP pairs, with the ids written in the payloads
    want = {str(int(c["comm"], 16) if c["comm"].startswith("0x") else c["comm"]): c
            for c in truth["parallel"]["communicators"]}  # fmt: skip
    got = {
        str(int(k, 16) if k.startswith("0x") else k): g
        for k, g in zip(groups["group_key"], groups.to_dict("records"), strict=True)
    }
    assert set(got) == set(want)
    for key, c in want.items():
        assert got[key]["dimension"] == c["dimension"], key
        assert got[key]["link"] == c["link"], key
        assert sorted(got[key]["members"]) == sorted(c["ranks"]), key


def test_matching_keys_by_trace_form(legacy, advanced):
    """Legacy payloads match by communicator + ordinal; the advanced NCCL trace by NCCL's apiId."""
    for (db, _), want in ((legacy, "nvtx-payload"), (advanced, "nccl-api-id")):
        con = duckdb.connect(db, read_only=True)
        rows = con.sql(
            "SELECT key_source, MIN(ranks) AS lo, MAX(ranks) AS hi, BOOL_AND(complete) AS ok, COUNT(*) AS n "
            "FROM collectives WHERE op = 'AllReduce' GROUP BY key_source"
        ).fetchall()
        con.close()
        # 2 steps x (8 ranks x 16 TP all-reduces / 2 per instance + 4 DP groups x 2 buckets) = 144
        assert rows == [(want, 2, 2, True, 144)]


def _lose_first_allreduce(src: str, dst) -> tuple[int, int, int]:
    """Copy, drop rank 0's first all-reduce kernel, recompute: (lone, complete, max end skew)."""
    dst.write_bytes(open(src, "rb").read())
    con = duckdb.connect(str(dst))
    con.execute(
        "DELETE FROM kernels WHERE rank = 0 AND correlation_id = (SELECT MIN(correlation_id) FROM kernels "
        "WHERE rank = 0 AND name LIKE 'ncclDevKernel_AllReduce%')"
    )
    con.close()
    con = open_workspace(str(dst))  # recomputes: rank 0 changed
    try:
        return con.sql(
            "SELECT COUNT(*) FILTER (WHERE ranks = 1), COUNT(*) FILTER (WHERE complete), MAX(end_skew_ns) "
            "FROM collectives WHERE op = 'AllReduce'"
        ).fetchone()
    finally:
        con.close()


@pytest.mark.slow
def test_api_id_keeps_matching_when_a_kernel_is_missing(tmp_path, advanced, legacy):
    """A kernel lost on one rank leaves one lone partner; with apiId every other pair is still right,
    while ordinals (legacy payload) pair the later kernels with the wrong partners."""
    lone, complete, skew = _lose_first_allreduce(advanced[0], tmp_path / "a.duckdb")
    assert lone == 1  # rank 1's half of the lost instance
    assert complete == 143  # every other instance of test_matching_keys_by_trace_form's 144
    # the generator ends a collective's kernels together, each + integers(0, 1500) ns of jitter,
    # and all all-reduce groups lie inside one node (one clock)
    assert skew < 1_500
    _, _, skew = _lose_first_allreduce(legacy[0], tmp_path / "l.duckdb")
    assert skew > 100_000  # shifted pairs: ends of different layers' all-reduces (>= one GEMM apart)


def test_cli_json_and_by_options(legacy):
    db, _ = legacy
    runner = CliRunner()
    res = runner.invoke(main, ["comms", "--db", db, "--format", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    for row in doc["rows"]:
        assert row["dimension"] in {"dp", "fsdp", "tp", "pp", "ep", "unknown"}
        assert {"total_ns", "exposed_ns", "bytes", "busbw_gbps", "link"} <= set(row)
    # H100 SXM: 900 GB/s NVLink bidirectional (data/gpus.csv) -> 450 GB/s per direction
    assert doc["nvlink_peak_gbps"] == 450.0
    pp = next(r for r in doc["rows"] if r["dimension"] == "pp")
    assert pp["link"] == "network" and pp["link_peak_gbps"] is None  # never guessed
    assert {a["dimension"] for a in doc["advice"]} == {"tp", "pp", "dp"}
    res = runner.invoke(main, ["comms", "--db", db, "--by", "collective"])
    assert res.exit_code == 0 and "SendRecv" in res.output
    res = runner.invoke(main, ["comms", "--db", db, "--by", "communicator"])
    assert res.exit_code == 0 and "consecutive ranks inside one host" in res.output
    assert runner.invoke(main, ["comms", "--db", db, "--by", "nonsense"]).exit_code == 2


def test_bad_parallel_specs(tmp_path):
    with pytest.raises(UserError):
        parse_parallel("tp=2,xx=3")
    with pytest.raises(UserError, match="makes 8 ranks"):
        generate(tmp_path / "a", ranks=4, parallel="tp=2,pp=2,dp=2")
    with pytest.raises(UserError, match="fit in a node"):
        generate(tmp_path / "b", ranks=8, gpus_per_node=2, parallel="tp=4,pp=1,dp=2")
    with pytest.raises(UserError, match="needs --parallel"):
        generate(tmp_path / "c", ranks=2, nccl_trace=True)


KINETO = TRACES / "kineto"


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    out = {}
    for name, rel in (
        ("nccl", "hta/nccl_parser_config"),
        ("b200", "tracelens/b200"),
        ("filter", "hta/trace_filter"),
        ("queue", "hta/negative_queue_length_values_check"),
    ):
        out[name] = str(
            copy_workspace(shared_ingest([KINETO / rel])[1], tmp_path_factory.mktemp(name) / "ws.duckdb")
        )
    return out


def _real(db: str):
    con = open_workspace(db, read_only=True)
    try:
        pgs = con.sql("SELECT pg_name, pg_size, pg_ranks FROM kineto_process_groups ORDER BY rank").fetchall()
        groups = con.sql("SELECT group_key, identity, dimension, basis, size FROM comm_groups").fetchall()
        data = comms(con, "communicator")
    finally:
        con.close()
    return pgs, groups, data


@requires_shared
@pytest.mark.slow
def test_real_process_groups_from_pg_config(real):
    # nccl_data.json.gz distributedInfo.pg_config: [{pg_name '0', default_pg, pg_size 2, ranks [0, 1]}]
    pgs, groups, _ = _real(real["nccl"])
    assert pgs == [("0", 2, [0, 1])]
    # its AllReduce and Broadcast kernels run on pg '0' (record_param_comms), the 2-rank world: dp
    assert groups == [("pg:0", "kineto-pg", "dp", "gradient reduction across 2 ranks", 2)]
    # eager_trace.json.gz: 15 pg_config entries; its one AllGather runs on pg '3' (8 ranks)
    pgs, groups, data = _real(real["b200"])
    assert len(pgs) == 15 and ("3", 8, list(range(8))) in pgs
    assert [(g[0], g[1], g[2], g[4]) for g in groups] == [("pg:3", "kineto-pg", "unknown", 8)]
    assert any("all-gather" in n for n in data["notes"])  # says why it cannot be known


@requires_shared
@pytest.mark.slow
def test_real_dlrm_sets_say_the_dimension_is_unknown(real):
    # trace_filter: ranks 0 and 1 of 128; negative_queue: rank 0 of 16; SendRecv kernels, no payload,
    # no process-group metadata: no communicator identity
    for name in ("filter", "queue"):
        pgs, groups, data = _real(real[name])
        assert pgs == []
        assert groups and {g[2] for g in groups} == {"unknown"}
        assert all(g[1] == "none" and "no communicator identity" in g[3] for g in groups)
        assert len(data["notes"]) == len(groups)


def test_other_dimensions_by_their_collectives(tmp_path, legacy):
    """docs/metrics.md rules: all-gather + reduce-scatter on one group -> fsdp; all-to-all -> ep."""
    db, truth = legacy
    copy = tmp_path / "ws.duckdb"
    copy.write_bytes(open(db, "rb").read())
    con = duckdb.connect(str(copy))
    # the DP buckets (NCCL stream 20): alternately all-gather and reduce-scatter on every rank
    con.execute(
        """
        UPDATE kernels SET name = CASE WHEN k.i % 2 = 0 THEN 'ncclDevKernel_AllGather_RING_LL(x)'
                                       ELSE 'ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(x)' END
        FROM (SELECT rank, correlation_id, row_number() OVER (PARTITION BY rank ORDER BY start_ns) AS i
              FROM kernels WHERE stream_id = 20) AS k
        WHERE kernels.rank = k.rank AND kernels.correlation_id = k.correlation_id
        """
    )
    # the TP all-reduces (compute stream 7) become all-to-alls
    con.execute(
        "UPDATE kernels SET name = 'ncclDevKernel_AllToAll(x)' "
        "WHERE stream_id = 7 AND name LIKE 'ncclDevKernel_AllReduce%'"
    )
    con.execute("UPDATE files SET sha256 = 'edited-' || sha256")  # same row counts: mark the ranks changed
    con.close()
    con = open_workspace(str(copy))
    try:
        got = dict(con.sql("SELECT dimension, COUNT(*) FROM comm_groups GROUP BY ALL").fetchall())
    finally:
        con.close()
    # 4 DP, 4 TP and 4 PP communicators in the truth (tp=2, pp=2, dp=2)
    assert {c["dimension"] for c in truth["parallel"]["communicators"]} == {"dp", "tp", "pp"}
    assert got == {"fsdp": 4, "ep": 4, "pp": 4}


def test_plain_data_parallel_job_without_payload_is_dp_over_the_whole_job(tmp_path):
    """The default synthetic job has no NCCL payload; every all-reduce spans all ranks of the job."""
    truth = generate(tmp_path / "job", ranks=4, gpus_per_node=2, steps=2)
    db = str(tmp_path / "ws.duckdb")
    ingest([tmp_path / "job"], db)
    con = open_workspace(db, read_only=True)
    try:
        groups = con.sql("SELECT identity, dimension, link FROM comm_groups").fetchall()
        data = comms(con)
    finally:
        con.close()
    assert groups == [("whole-job", "dp", "network")]  # 2 nodes of 2 GPUs
    whole = [r for r in truth["partition"] if r["step"] is None]  # truth: whole-capture rows per rank
    row = data["rows"][0]
    # the all-reduces run one after another on one stream, so their union is their sum
    assert row["total_ns"] == sum(r["comms_total_ns"] for r in whole)
    assert row["exposed_ns"] == pytest.approx(sum(r["comms_exposed_ns"] for r in whole), rel=0.01)


@requires_shared
@pytest.mark.slow
@pytest.mark.parametrize("fast", [True, False])
def test_pg_config_rows_on_both_kineto_paths(fast, tmp_path, monkeypatch):
    """The DuckDB fast path and the ijson fallback both store pg_config; values as in the file:
    distributedInfo = {rank 0, world_size 2, pg_config [{pg_name '0', pg_desc 'default_pg',
    backend_config 'cuda:nccl', pg_size 2, ranks [0, 1]}], nccl_version '2.17.1'}."""
    from nsight_analyze.sources import kineto

    monkeypatch.setattr(kineto, "FAST_PATH", fast)
    db = tmp_path / "ws.duckdb"
    ingest([KINETO / "hta/nccl_parser_config"], db)
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute("SELECT * FROM kineto_process_groups").fetchall()
    finally:
        con.close()
    assert rows == [(0, "0", "default_pg", "cuda:nccl", 2, [0, 1], "2.17.1")]


# ------------------------------------------------------------------------------------------------
# diagnose and the report (issue 19: communication by dimension in `diagnose` and the report)


def _diagnosed(db: str):
    from nsight_analyze.diagnose import diagnose

    con = open_workspace(db, read_only=True)
    try:
        gain = con.sql(
            "SELECT gain_ns FROM whatif WHERE scenario = 'comms-hidden' AND step IS NULL"
        ).fetchone()[0]
        return diagnose(con), gain
    finally:
        con.close()


def test_diagnose_breaks_exposed_comm_down_by_dimension(legacy):
    """exposed-comm gets one child per dimension whose overlap-recoverable part reaches
    dimension_comm_min_pct, with that dimension's evidence and fixes, never more than the parent."""
    db, truth = legacy
    findings, gain = _diagnosed(db)
    assert findings.job["rule_errors"] == []
    by_id = {f.id: f for f in findings}
    parent = by_id["exposed-comm"]
    kids = {f.metrics["dimension"]: f for f in findings if f.metrics.get("parent") == "exposed-comm"}
    want = truth["comms_by_dimension"]  # generator truth, summed over ranks
    # truth: TP all-reduces and PP send/recv are fully exposed (exposed == total), DP's exposure is
    # the step's last gradient reduction, which overlap cannot hide (excluded like exposed-comm does)
    assert (
        want["tp"]["exposed_ns"] == want["tp"]["total_ns"]
        and want["pp"]["exposed_ns"] == want["pp"]["total_ns"]
    )
    assert set(kids) == {"tp", "pp"}
    step_ns = findings.job["mean_step_ns"]
    n = len(truth["kernels_per_step"]) * 8  # steps x ranks of the fixture
    for dim, f in kids.items():
        assert f.id == f"exposed-comm-{dim}"
        assert f.metrics["total_ns"] == want[dim]["total_ns"], dim  # exact, as comms
        assert f.metrics["exposed_ns"] == pytest.approx(want[dim]["exposed_ns"], rel=0.01), dim
        # recoverable <= the truth's mean exposed per rank and step, <= the parent, <= what-if
        assert 0 < f.recoverable_ns_per_step <= want[dim]["exposed_ns"] / n
        assert f.recoverable_ns_per_step <= parent.recoverable_ns_per_step
        assert f.recoverable_ns_per_step <= gain
        assert f.metrics["recoverable_source"] in ("exposed", "whatif comms-hidden")
        assert 100.0 * f.recoverable_ns_per_step / step_ns >= findings.thresholds["dimension_comm_min_pct"]
        assert f.fixes and all(x.trade_off for x in f.fixes)
        assert {e.name for e in f.evidence} == {
            f"{dim} communicators",
            f"{dim} exposed communication per step",
        }
    # the parts never exceed the whole (per step, min over ranks of a part <= min of the sum): the
    # children's own measures add up to at most the parent's own measure (before the what-if bound)
    own = parent.metrics.get("recoverable_ns_per_step_rule", parent.recoverable_ns_per_step)
    assert sum(f.metrics["dimension_recoverable_ns_per_step"] for f in kids.values()) <= own + 8
    assert any("inside one node" in x.action for x in kids["tp"].fixes)
    assert any("micro-batches" in x.action for x in kids["pp"].fixes)
    assert kids["pp"].metrics["link"] == "network" and kids["pp"].metrics["link_peak_gbps"] is None
    assert kids["tp"].metrics["link"] == "nvlink" and kids["tp"].metrics["link_peak_gbps"] == 450.0  # H100
    # the parent carries the breakdown: totals per dimension equal the truth's
    ev = next(e for e in parent.evidence if e.name == "per parallelism dimension")
    assert {r["dimension"]: r["total_ns"] for r in ev.rows} == {d: w["total_ns"] for d, w in want.items()}


def test_report_section_communication_by_dimension(legacy, tmp_path):
    """The report's section shows comms' per-dimension rows (exact totals of the truth) and the
    advice of every exposed dimension."""
    import re

    from nsight_analyze.api.outputs import render_report

    db, truth = legacy
    con = open_workspace(db, read_only=True)
    try:
        html = render_report(con)
    finally:
        con.close()
    part = html[html.index('data-section="comms-dimension"') :]
    part = part[: part.index("</section>")]
    table = part[part.index('id="comms-dimension-table"') :]
    table = table[: table.index("</table>")]
    dims = re.findall(r'data-key="dimension" data-value="(\w+)"', table)
    totals = [int(v) for v in re.findall(r'data-key="total_ns" data-value="(\d+)"', table)]
    assert dict(zip(dims, totals, strict=True)) == {
        d: w["total_ns"] for d, w in truth["comms_by_dimension"].items()
    }
    assert {m for m in re.findall(r'data-dimension="(\w+)"', part)} == {"tp", "pp", "dp"}
    assert "exposed-comm-tp" in part and "exposed-comm-pp" in part


def test_exposed_time_equals_the_overlap_with_exposed_segments(sample_workspace):
    """diag_comm_exposure's exposed_ns and exposed_wait_ns (the rank's exposed time at two points
    by ASOF joins into prefix sums; the start and end points computed rank by rank in
    _diag_comm_ops, the wait's in the job step) against the oracle: the plain overlap of each
    operation's [start, end) and [start, start + wait) with every exposed segment of its rank (the
    segments are disjoint). The sample has waits, exposed operations, and waits only partly
    exposed, so each term is exercised."""
    overlap = (
        "(SELECT coalesce(sum(greatest(0, least({t}, s.end_ns) - greatest(e.start_ns, s.start_ns))), 0) "
        "FROM _tp_comm_exposed_segments s WHERE s.rank = e.rank)"
    )
    con = duckdb.connect(str(sample_workspace), read_only=True)
    rows = con.execute(
        f"""SELECT e.wait_ns, e.exposed_ns, e.exposed_wait_ns,
                   {overlap.format(t="e.end_ns")}, {overlap.format(t="e.start_ns + e.wait_ns")}
            FROM diag_comm_exposure e"""
    ).fetchall()
    con.close()
    assert sum(r[0] > 0 for r in rows) and sum(0 < r[2] < r[1] for r in rows)
    assert [r[1:3] for r in rows] == [r[3:5] for r in rows]
