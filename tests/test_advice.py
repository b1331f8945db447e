"""diagnose advice fits what it is about (issue 16, item 7 "Advice that does not fit").

* fixes follow the kernel family: an NCCL kernel gets overlap / bucketing / NCCL settings, never
  GEMM tile tuning or FlashAttention; memory-bound time never gets activation checkpointing (it
  saves memory and adds recomputation, so it cannot speed up memory-bound kernels);
* launch-bound vs host-bound is decided from the idle time the partition attributes to each cause
  (time_partition.launch_gap_ns / host_bound_ns, itemised in the `gaps` view), not from
  operations x median launch call (which gave 233 % on nsys-ai/mock.sqlite);
* shares are bounded (0-100 %) and a finding with recoverable time names at least one affected
  step, or says why the count is unknown.

Expected values are computed here with SQL straight from time_partition and gaps, independently of
the diag_* views the rules read.
"""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest
from conftest import TRACES, requires_shared

from nsight_analyze.diagnose import THRESHOLDS, diagnose, findings_json
from nsight_analyze.rules import advice

MOCK = TRACES / "nsys" / "nsys-ai" / "mock.sqlite"
NCCL_HEAVY = TRACES / "kineto" / "hta" / "trace_filter"  # an NCCL SendRecv kernel takes ~62 % of kernel time

GEMM_WORDS = re.compile(r"tile|FlashAttention|cuBLAS|GEMM|matmul|tensor core|SDPA|autotune", re.I)
COMMS_WORDS = re.compile(r"overlap|bucket|NCCL|topolog|all-reduce|send/recv", re.I)
CHECKPOINT = re.compile(r"checkpointing|activation checkpoint|gradient checkpoint|recomput", re.I)


def _open(paths: list[Path], db: Path):
    from nsight_analyze.ingest.run import ingest
    from nsight_analyze.store.workspace import open_workspace

    ingest(paths, db)
    return open_workspace(db, read_only=True)


@pytest.fixture(scope="module")
def diagnosed(tmp_path_factory, synth_job):
    """name -> (findings, workspace path); each trace ingested and diagnosed once per module (the
    synthetic job is test_diagnose's launch-bound case, generated once per test run)."""
    cache: dict[str, tuple] = {}

    def get(name: str, thresholds: dict | None = None):
        key = (name, tuple(sorted((thresholds or {}).items())))
        if key not in cache:
            out = tmp_path_factory.mktemp(name.replace("-", "_"))
            db = out / "ws.duckdb"
            if (name, ()) in cache:
                db = cache[(name, ())][1]
            elif name == "synthetic-launch-bound":
                db = synth_job(["launch-bound=3-5"], ranks=4, gpus_per_node=2, steps=8, seed=1).db
            else:
                path = {"mock": MOCK, "nccl-heavy": NCCL_HEAVY}[name]
                if not path.exists():
                    pytest.skip(f"{path} is absent")
                _open([path], db).close()
            from nsight_analyze.store.workspace import open_workspace

            con = open_workspace(db, read_only=True)
            try:
                cache[key] = (diagnose(con, thresholds), db)
            finally:
                con.close()
        return cache[key]

    return get


def _sql(db: Path, sql: str):
    from nsight_analyze.store.workspace import open_workspace

    con = open_workspace(db, read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _fix_text(f) -> str:
    return " ".join(f"{x.action} {x.trade_off}" for x in f.fixes)


# ------------------------------------------------------------------------------------------------
# Fixes by kernel family (no workspace needed)


def test_comms_family_never_gets_gemm_advice():
    for sub in (None, "allreduce", "sendrecv", "p2p", "alltoall", "allgather"):
        fam = advice.family("comms", sub)
        assert fam == "comms"
        nccl = advice.kernel_fixes(fam, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL")
        for fixes in (nccl, advice.comms_fixes(sub)):
            assert fixes and all(x.trade_off for x in fixes)
            text = " ".join(x.action for x in fixes)
            assert not GEMM_WORDS.search(text), text
            assert COMMS_WORDS.search(text), text


@pytest.mark.parametrize(
    "category, sub, must, must_not",
    [
        ("compute", "gemm", r"tile|precision|bf16|TF32", r"FlashAttention|NCCL|bucket"),
        ("compute", "attention", r"scaled_dot_product_attention|FlashAttention", r"NCCL|bucket|tile"),
        ("compute", "conv", r"cudnn|channels_last", r"NCCL|FlashAttention"),
        ("memory", "elementwise", r"torch\.compile|Fuse", r"tile|FlashAttention|NCCL"),
        ("memory", "norm", r"LayerNorm|RMSNorm|normalisation", r"tile|FlashAttention|NCCL"),
        ("memory", "optimizer", r"fused=True|foreach", r"tile|FlashAttention|NCCL"),
        ("memory", "copy", r"contiguous|copies", r"tile|FlashAttention|NCCL"),
    ],
)
def test_kernel_family_fixes_fit(category, sub, must, must_not):
    fixes = advice.kernel_fixes(advice.family(category, sub), f"some_{sub}_kernel")
    assert fixes and all(x.trade_off for x in fixes)
    text = " ".join(x.action for x in fixes)
    assert re.search(must, text, re.I), text
    assert not re.search(must_not, text, re.I), text
    assert not CHECKPOINT.search(text)


def test_precision_advice_follows_the_kernel_name():
    assert advice.precision_of("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x256x8_ffma") == "fp32"
    assert advice.precision_of("flash_fwd_kernel<cutlass::bfloat16_t>") == "low"
    assert advice.precision_of("ampere_tf32_s1688gemm_64x64") == "tf32"
    low = " ".join(x.action for x in advice.kernel_fixes("gemm", "gemm_bf16_kernel"))
    assert "FP8" in low and "TF32" not in low  # already 16-bit: the next step is FP8, not bf16
    fp32 = " ".join(x.action for x in advice.kernel_fixes("gemm", "sgemm_f32_ffma"))
    assert "bf16" in fp32


def test_memory_fixes_never_suggest_activation_checkpointing():
    fams = ["elementwise", "norm", "optimizer", "embedding", "copy", "transfer"]
    for n in range(len(fams) + 1):
        for short in (False, True):
            fixes = advice.memory_fixes(fams[:n], short)
            assert fixes and all(x.trade_off for x in fixes)
            assert not any(CHECKPOINT.search(x.action) for x in fixes)
    # transfers alone: keep data on the GPU / pinned async copies, not kernel fusion
    only = " ".join(x.action for x in advice.memory_fixes(["transfer"], short=True))
    assert "pinned" in only and "Fuse" not in only and "torch.compile" not in only


# ------------------------------------------------------------------------------------------------
# Real traces


@requires_shared
def test_nccl_dominant_kernel_gets_comms_fixes(diagnosed):
    findings, db = diagnosed("nccl-heavy")
    assert findings.job["rule_errors"] == []
    # the kernel that dominates, by SQL on kernel_summary: an NCCL (comms) kernel
    name, category, pct = _sql(
        db,
        """SELECT name, mode(category), 100.0 * sum(total_ns) / (SELECT sum(total_ns) FROM kernel_summary)
           FROM kernel_summary GROUP BY name ORDER BY sum(total_ns) DESC LIMIT 1""",
    )[0]
    assert category == "comms" and "nccl" in name.lower()
    f = next((x for x in findings if x.id == "dominant-kernel"), None)
    if pct < THRESHOLDS["dominant_kernel_pct"].default:
        assert f is None
        return
    assert f is not None, [x.id for x in findings]
    assert f.metrics["name"] == name and f.metrics["family"] == "comms"
    text = _fix_text(f)
    assert not GEMM_WORDS.search(" ".join(x.action for x in f.fixes)), text
    assert COMMS_WORDS.search(text), text
    assert all(x.trade_off for x in f.fixes)


@requires_shared
@pytest.mark.parametrize("trace", ["mock", "nccl-heavy"])
def test_memory_bound_fixes_fit(diagnosed, trace):
    findings, db = diagnosed(trace)
    f = next((x for x in findings if x.id == "memory-bound"), None)
    # both traces hold memory-category kernels enough for the finding: its absence is a failure
    assert f is not None, f"no memory-bound finding on {trace}"
    assert not any(CHECKPOINT.search(x.action) for x in f.fixes), _fix_text(f)
    # the first fix is for the family with the most memory-category time (computed here by SQL)
    shares = f.metrics["memory_time_by_family_pct"]
    assert shares and abs(sum(shares.values()) - 100.0) < 0.1
    top = max(shares, key=shares.get)
    first = f.fixes[0].action
    expected = {
        "elementwise": r"Fuse",
        "embedding": r"embedding",
        "transfer": r"GPU|pinned",
        "copy": r"copies",
        "norm": r"normalisation",
        "optimizer": r"optimizer",
    }[top]
    assert re.search(expected, first, re.I), (top, first)
    kernel_ns = _sql(db, "SELECT coalesce(sum(end_ns - start_ns), 0) FROM kernels WHERE category = 'memory'")
    memop_ns = _sql(db, "SELECT coalesce(sum(end_ns - start_ns), 0) FROM memops WHERE kind <> 'PtoP'")
    total = kernel_ns[0][0] + memop_ns[0][0]
    transfer = _sql(
        db, "SELECT coalesce(sum(end_ns - start_ns), 0) FROM memops WHERE kind IN ('HtoD', 'DtoH')"
    )
    assert shares.get("transfer", 0.0) == pytest.approx(100.0 * transfer[0][0] / total, abs=0.01)


def _windows_sql() -> str:
    # diag_windows' rule, restated: step rows when any rank has steps, else the whole-capture rows
    return """SELECT * FROM time_partition WHERE CASE WHEN EXISTS (SELECT 1 FROM time_partition
              WHERE step IS NOT NULL) THEN step IS NOT NULL ELSE step IS NULL END"""


def _attributed_split(db: Path) -> tuple[int, int]:
    """Per step, the worst rank's (by launch_gap + host_bound, lowest rank on ties) launch gaps and
    host-bound idle, summed over steps: from time_partition, cross-checked against the gaps view."""
    worst = f"""WITH w AS ({_windows_sql()}),
                r AS (SELECT rank, step, launch_gap_ns, host_bound_ns,
                             row_number() OVER (PARTITION BY step
                                 ORDER BY launch_gap_ns + host_bound_ns DESC, rank) AS i FROM w)
                SELECT rank, step, launch_gap_ns, host_bound_ns FROM r WHERE i = 1"""
    tp = _sql(db, f"SELECT sum(launch_gap_ns), sum(host_bound_ns) FROM ({worst})")[0]
    gp = _sql(
        db,
        f"""SELECT coalesce(sum(g.duration_ns) FILTER (WHERE g.cause = 'launch_gap'), 0),
                   coalesce(sum(g.duration_ns) FILTER (WHERE g.cause = 'host_bound'), 0)
            FROM ({worst}) x JOIN gaps g ON g.rank = x.rank AND g.step IS NOT DISTINCT FROM x.step""",
    )[0]
    assert (int(tp[0]), int(tp[1])) == (int(gp[0]), int(gp[1])), "time_partition and gaps disagree"
    return int(tp[0]), int(tp[1])


@requires_shared
@pytest.mark.parametrize(
    "trace, verdict",
    [("mock", "launch-bound"), ("nccl-heavy", "host-bound"), ("synthetic-launch-bound", "launch-bound")],
)
def test_launch_vs_host_follows_attributed_gap_time(diagnosed, trace, verdict):
    findings, db = diagnosed(trace)
    lg, hb = _attributed_split(db)
    share = 100.0 * lg / (lg + hb)
    expected = "launch-bound" if share >= THRESHOLDS["launch_explained_min_pct"].default else "host-bound"
    assert expected == verdict, (trace, share)  # the trace still shows what it was chosen for
    f = next(x for x in findings if x.id in ("launch-bound", "host-bound"))
    assert f.id == expected
    assert f.metrics["launch_gap_ns_total"] == lg and f.metrics["host_bound_ns_total"] == hb
    assert 0.0 <= f.metrics["launch_explained_pct"] <= 100.0
    assert f.metrics["launch_explained_pct"] == pytest.approx(share, abs=0.05)
    # the two parts are the rule's own recoverable time (worst rank per step, summed, / steps); the
    # finding reports at most the what-if replay's gain for removing launch gaps (rules/_whatif.py;
    # the whatif table, checked against re-simulated truth in test_whatif.py)
    n_steps = findings.job["steps"]
    own = (lg + hb) / n_steps
    assert f.metrics["recoverable_ns_per_step_rule"] == pytest.approx(own, abs=1)
    con = duckdb.connect(str(db), read_only=True)
    gain = con.execute(
        "SELECT max(gain_ns) FROM whatif WHERE scenario = 'no-launch-gaps' AND step IS NULL"
    ).fetchone()[0]
    con.close()
    assert f.recoverable_ns_per_step == pytest.approx(own if gain is None else min(own, gain), abs=1)
    # moving the threshold across the share flips the verdict: the decision is the attributed split
    flipped, _ = diagnosed(trace, {"launch_explained_min_pct": 0.0 if expected == "host-bound" else 100.0})
    other = next(x for x in flipped if x.id in ("launch-bound", "host-bound"))
    assert other.id != expected or share in (0.0, 100.0)


@requires_shared
def test_mock_shares_bounded_and_steps_consistent(diagnosed):
    """mock.sqlite has no steps: the capture is the one window; every finding with recoverable time
    counts it (affected_steps 1, with the reason the steps list is empty), no share exceeds 100 %."""
    findings, _ = diagnosed("mock")
    assert findings.job["has_steps"] is False and findings.job["rule_errors"] == []
    lb = next(f for f in findings if f.id in ("launch-bound", "host-bound"))
    assert 0.0 <= lb.metrics["launch_explained_pct"] <= 100.0  # a share of the gap time
    _check_consistent(findings)


@requires_shared
@pytest.mark.parametrize("trace", ["nccl-heavy", "synthetic-launch-bound"])
def test_steps_consistent_with_recoverable_time(diagnosed, trace):
    findings, _ = diagnosed(trace)
    assert findings.job["has_steps"] is True
    _check_consistent(findings)


def _check_consistent(findings):
    doc = findings_json(findings)
    for f in doc["findings"]:
        rec = f["recoverable_ns_per_step"]
        if f["recoverable_pct"] is not None:
            assert 0.0 <= f["recoverable_pct"] <= 100.0, (f["id"], f["recoverable_pct"])
        for k, v in f["metrics"].items():
            if k.endswith("_pct") and isinstance(v, (int, float)):
                assert 0.0 <= v <= 100.0, (f["id"], k, v)
        for s in f["signals"]:
            if s["unit"].startswith("%") and isinstance(s["value"], (int, float)):
                assert 0.0 <= s["value"] <= 100.0, (f["id"], s["name"], s["value"])
        if rec:
            m = f["metrics"]
            assert "affected_steps" in m, f["id"]
            n = m["affected_steps"]
            assert (n is not None and n >= 1) or m.get("affected_steps_note"), (f["id"], m)
            if doc["job"]["has_steps"]:
                assert n is None or n == len(f["steps"]), (f["id"], n, f["steps"])
            else:
                assert n == 1 and f["steps"] == [] and m["affected_steps_note"], (f["id"], m)
        for k in ("affected_steps", "launch_bound_steps", "stalled_steps"):
            if rec and k in f["metrics"]:
                assert f["metrics"][k] != 0, (f["id"], k)


@requires_shared
@pytest.mark.parametrize("trace", ["mock", "nccl-heavy", "synthetic-launch-bound"])
def test_new_evidence_sql_reruns(diagnosed, trace):
    """The evidence added for the split / families re-runs as shown on a fresh read-only connection."""
    from conftest import frame_rows

    from nsight_analyze.store.workspace import open_workspace

    findings, db = diagnosed(trace)
    con = open_workspace(db, read_only=True)
    try:
        for f in findings:
            for ev in f.evidence:
                df = con.execute(ev.sql).df()
                assert len(df) == ev.total_rows, (f.id, ev.name)
                assert frame_rows(df, len(ev.rows)) == ev.rows, (f.id, ev.name)
    finally:
        con.close()
