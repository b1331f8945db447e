"""Rank merger: job identity, then clock alignment across hosts from matched NCCL collectives.

Why this exists: a workspace may hold unrelated captures, and nsys does not synchronise
clocks across hosts. First each rank gets its job (queries/job/merge_jobs.sql: capture starts far
apart, different world sizes, a rank number named twice); nothing below crosses a job. Each
file is then placed by its session start relative to its job's earliest (one UTC reading per
report, NTP/PTP quality: often off by milliseconds). Matched collectives finish within
microseconds on every participant, so the median mismatch of their end times per host is a
far better estimate of each host's clock error. Ranks of one host share one clock, so there
is one refinement per host and job. Only complete instances (every participant present) are used.

All heavy work is SQL (views `merge_*` in queries/, this module's statements in
queries/answers/ranks.sql); Python only iterates the robust solver a handful of times over a
small per-(instance, host) table.
"""

from __future__ import annotations

import duckdb

from .store.query_layer import statements

SQL = statements("answers/ranks")

# Iterations of the median solver; two hosts converge in one, many hosts in a few.
MAX_ITERATIONS = 30
# Stop when no host correction moves by more than this (ns).
CONVERGED_NS = 1.0
# A refinement larger than this (ns) is applied but flagged: the UTC clocks of a sane
# cluster agree far better, so it hints at a mismatched collective sequence.
SUSPICIOUS_CORRECTION_NS = 1_000_000_000
# The refinement is rejected (session-start kept) only when it makes the median end mismatch
# clearly worse: by this factor plus this slack (ns); ties within noise keep the refinement.
WORSE_FACTOR = 1.5
WORSE_SLACK_NS = 1_000
# A collective series (op, comm) is used for alignment only when, on every host, the
# interquartile range of its per-instance end deviation is at most this (ns): genuine
# collectives end within microseconds everywhere, so only clock error (constant) remains.
MAX_SERIES_SPREAD_NS = 100_000

_HOST_SQL = SQL["rank_host"]


def assign_jobs(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Copy merge_jobs' job into ranks.job; returns one note when the workspace holds several
    jobs or a partial one (what `ingest` prints: how many jobs, and which ranks are missing)."""
    con.execute(SQL["assign_jobs"])
    rows = con.execute(SQL["jobs"]).fetchall()
    partial = any(not row[3] for row in rows)
    if len(rows) <= 1 and not partial:
        return []
    parts = []
    for job, _n, _world, complete, first, last, label in rows[:12]:
        span = f"rank {first}" if first == last else f"ranks {first}-{last}"
        parts.append(f"job {job} ({span}): {label}" + ("" if complete else " (partial)"))
    more = f"; +{len(rows) - 12} more" if len(rows) > 12 else ""
    head = (
        f"{len(rows)} jobs found (captures more than {_gap_s(con):g} s apart, different world sizes or the "
        "same rank named twice are different jobs; ranks of different jobs are never compared)"
        if len(rows) > 1
        else "1 job found"
    )
    note = f"{head}: {'; '.join(parts)}{more}"
    if partial:
        note += (
            ". In a partial job, waits and skew are reported only for collectives whose participants are "
            "all present, and point-to-point kernels are paired only with a known peer"
        )
    return [note]


def _gap_s(con: duckdb.DuckDBPyConnection) -> float:
    row = con.execute(SQL["job_session_gap_s"]).fetchone()
    return row[0] if row and row[0] is not None else 300.0


def _coarse_alignment(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Place every rank by its session start relative to the earliest one of its job (UTC shift)."""
    con.execute(SQL["coarse_alignment"])
    missing = con.execute(SQL["ranks_without_session_start"]).fetchall()
    if missing:
        return [
            f"ranks {_fmt_ranks([r[0] for r in missing])} have no session start time: their clocks are "
            "placed at their job's earliest session start until collectives refine them"
        ]
    return []


def _fmt_ranks(ranks: list[int]) -> str:
    return ", ".join(str(r) for r in ranks[:8]) + (f" (+{len(ranks) - 8} more)" if len(ranks) > 8 else "")


def _host_ends(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Per matched instance spanning >= 2 hosts: each host's median end (coarse-aligned).

    Only (op, comm) series whose per-host end deviations are steady are used: a host's clock
    error is constant, so a genuine cross-host collective's deviation varies by microseconds,
    while instances that ordinal matching merged from different groups (e.g. one tensor-
    parallel group per node, no NVTX communicator) wander by far more. Returns warnings.
    """
    con.execute(SQL["per_host_ends"])
    con.execute(SQL.sql("series_spread", max_spread_ns=MAX_SERIES_SPREAD_NS))
    con.execute(SQL["steady_host_ends"])
    unsteady = con.execute(SQL["unsteady_series"]).fetchall()
    if not unsteady:
        return []
    names = ", ".join(f"{op}/{comm} (end spread {spread / 1e3:,.0f} us)" for op, comm, spread in unsteady[:4])
    return [
        f"clock alignment: ignored collective series whose ends do not agree across hosts: {names}; "
        "they probably mix different communicators (no NCCL NVTX payload to tell them apart)"
    ]


def _solve(con: duckdb.DuckDBPyConnection) -> None:
    """Per-(job, host) corrections c_h making each host's end agree with the per-instance median.

    Fixed point of c_h <- c_h + median_i(median_h'(e_ih' + c_h') - (e_ih + c_h)): a robust
    (median) consensus that tolerates outlier instances and collectives that span only
    some hosts (tensor/pipeline groups), unlike a single mean-skew pass. An instance belongs
    to one job, so the jobs are solved side by side, never against each other.
    """
    con.execute(SQL["zero_corrections"])
    for _ in range(MAX_ITERATIONS):
        con.execute(SQL["next_corrections"])
        delta = con.execute("SELECT MAX(delta) FROM merge_tmp_next").fetchone()[0]
        con.execute(SQL["take_corrections"])
        if delta is None or delta < CONVERGED_NS:
            break


def _mismatch_p50(con: duckdb.DuckDBPyConnection, corrected: bool) -> dict[int, float]:
    """Per job: median |host end - instance median| with or without the corrections."""
    correction = SQL["applied_correction"] if corrected else "0"
    return dict(con.execute(SQL.sql("end_mismatch_p50", correction=correction)).fetchall())


def align_clocks(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Set ranks.job (merge_jobs), then ranks.clock_offset_ns/alignment_method: session start within
    the job, then per-(job, host) collective refinement.

    Returns human-readable notes (how many jobs, a partial job) and warnings (nothing could refine a
    host, suspicious results). Runs inside
    the analysis' job step (analysis.job_step), which provides the merger's views.
    Idempotent: the coarse offsets are recomputed from session starts every time. A failure
    of the refinement never fails the ingest: the session-start alignment stays, with a warning.
    """
    if con.execute("SELECT COUNT(*) FROM ranks").fetchone()[0] == 0:
        return []
    warnings = assign_jobs(con)
    warnings += _coarse_alignment(con)
    try:
        return warnings + _refine(con)
    except duckdb.Error as exc:
        try:
            _coarse_alignment(con)  # undo a partial refinement
        except duckdb.Error:
            pass  # an aborted caller transaction: the caller rolls back anyway
        return warnings + [
            f"clock alignment: refinement from collectives failed ({str(exc).splitlines()[0]}); "
            "kept the session-start (UTC) alignment"
        ]
    finally:
        for table in (
            "merge_tmp_per_host",
            "merge_tmp_series",
            "merge_tmp_host_ends",
            "merge_tmp_corr",
            "merge_tmp_next",
        ):
            try:
                con.execute(f"DROP TABLE IF EXISTS {table}")
            except duckdb.Error:
                pass


def _refine(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Per-(job, host) refinement from matched collectives; returns warnings."""
    warnings: list[str] = []
    hosts = con.execute(SQL.sql("job_hosts", host=_HOST_SQL)).fetchall()
    if not hosts:
        return warnings  # one clock per job: nothing to refine, the session timeline is exact
    jobs = sorted({j for j, _ in hosts})
    several = con.execute(SQL["job_count"]).fetchone()[0] > 1

    def label(job: int, host: str | None = None) -> str:
        return (f"job {job} " if several else "") + (host or "")

    warnings += _host_ends(con)
    _solve(con)
    before = _mismatch_p50(con, corrected=False)
    after = _mismatch_p50(con, corrected=True)
    refined = set(con.execute("SELECT job, host FROM merge_tmp_corr").fetchall())
    for job in jobs:
        n_hosts = sum(1 for j, _ in hosts if j == job)
        if not any(j == job for j, _ in refined):
            warnings.append(_no_refinement(con, job, n_hosts, several))
            continue
        b, a = before.get(job), after.get(job)
        if b is not None and a is not None and a > WORSE_FACTOR * b + WORSE_SLACK_NS:
            warnings.append(
                f"clock alignment: {label(job)}collective refinement made end times agree less (median "
                f"mismatch {a:,.0f} ns vs {b:,.0f} ns); kept the session-start alignment"
            )
            con.execute("DELETE FROM merge_tmp_corr WHERE job = ?", [job])

    con.execute(SQL.sql("gauged_corrections", host=_HOST_SQL))
    con.execute(SQL.sql("apply_corrections", host=_HOST_SQL))
    kept = set(con.execute("SELECT job, host FROM merge_tmp_corr").fetchall())
    unrefined = [(j, h) for j, h in hosts if (j, h) not in kept and any(j == k for k, _ in kept)]
    if unrefined:
        names = ", ".join(label(j, h) for j, h in unrefined[:8])
        warnings.append(
            f"clock alignment: hosts {names} share no matched collective with the others; "
            "kept their session-start (UTC) alignment"
        )
    big = con.execute(
        SQL.sql("suspicious_corrections", max_correction_ns=SUSPICIOUS_CORRECTION_NS)
    ).fetchall()
    if big:
        warnings.append(
            f"clock alignment: host {label(*big[0])} was moved by more than "
            f"{SUSPICIOUS_CORRECTION_NS / 1e9:.0f} s from its UTC placement; check that the captures "
            "cover the same collectives (a capture that starts mid-run shifts the sequence numbers)"
        )
    return warnings


def _no_refinement(con: duckdb.DuckDBPyConnection, job: int, n_hosts: int, several: bool) -> str:
    """Why a job's hosts kept their session-start placement."""
    nccl, complete = con.execute(SQL.sql("job_collectives", job=int(job))).fetchone()
    partial = con.execute(SQL.sql("partial_job_label", job=int(job))).fetchone()
    if nccl == 0:
        why = "no NCCL kernels"
    elif partial and not complete:
        why = f"only {partial[0]} are present, so no collective has all its participants"
    else:
        why = "no NCCL collective matched across hosts"
    where = f"job {job}: " if several else ""
    return (
        f"clock alignment: {where}{why}; kept the session-start (UTC) alignment of {n_hosts} hosts, "
        "whose error is the hosts' NTP/PTP quality (often milliseconds)"
    )
