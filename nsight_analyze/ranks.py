"""Rank merger: job identity, then clock alignment across hosts from matched NCCL collectives.

Why this exists: a workspace may hold unrelated captures, and nsys does not synchronise
clocks across hosts. First each rank gets its job (queries/job/merge_jobs.sql: capture starts far
apart, different world sizes, a rank number named twice); nothing below crosses a job. Each
file is then placed by its session start relative to its job's earliest (one UTC reading per
report, NTP/PTP quality: often off by milliseconds). Matched collectives finish within
microseconds on every participant, so the median mismatch of their end times per host is a
far better estimate of each host's clock error. Ranks of one host share one clock, so there
is one refinement per host and job. Only complete instances (every participant present) are used.

All heavy work is SQL (views `merge_*` in queries/); Python only iterates the robust
solver a handful of times over a small per-(instance, host) table.
"""

from __future__ import annotations

import duckdb

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

_HOST_SQL = "COALESCE(hostname, 'file' || CAST(file_id AS VARCHAR))"


def assign_jobs(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Copy merge_jobs' job into ranks.job; returns one note when the workspace holds several
    jobs or a partial one (what `ingest` prints: how many jobs, and which ranks are missing)."""
    con.execute("UPDATE ranks SET job = j.job FROM merge_jobs AS j WHERE j.rank = ranks.rank")
    rows = con.execute(
        "SELECT job, ranks, world_size, complete, first_rank, last_rank, label FROM jobs ORDER BY job"
    ).fetchall()
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
    row = con.execute(
        "SELECT TRY_CAST(value AS DOUBLE) FROM settings WHERE key = 'job_session_gap_s'"
    ).fetchone()
    return row[0] if row and row[0] is not None else 300.0


def _coarse_alignment(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Place every rank by its session start relative to the earliest one of its job (UTC shift)."""
    con.execute(
        """
        UPDATE ranks SET
            clock_offset_ns = COALESCE(ranks.session_start_utc_ns - j.t0, 0),
            alignment_method = CASE WHEN ranks.session_start_utc_ns IS NULL THEN 'none'
                                    ELSE 'session-start' END
        FROM (SELECT COALESCE(job, 1) AS job, MIN(session_start_utc_ns) AS t0 FROM ranks GROUP BY ALL) AS j
        WHERE j.job = COALESCE(ranks.job, 1)
        """
    )
    missing = con.execute(
        """SELECT rank FROM ranks r WHERE session_start_utc_ns IS NULL AND EXISTS (
               SELECT 1 FROM ranks o WHERE COALESCE(o.job, 1) = COALESCE(r.job, 1)
               AND o.session_start_utc_ns IS NOT NULL)
           ORDER BY rank"""
    ).fetchall()
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
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE merge_tmp_per_host AS
        SELECT job, op, comm, seq, host, MEDIAN(aligned_end_ns)::DOUBLE AS e
        FROM merge_coll_members
        WHERE n_hosts >= 2 AND complete
        GROUP BY job, op, comm, seq, host;
        CREATE OR REPLACE TEMP TABLE merge_tmp_series AS
        WITH inst AS (SELECT job, op, comm, seq, MEDIAN(e) AS m FROM merge_tmp_per_host GROUP BY ALL),
        dev AS (
            SELECT p.job, p.op, p.comm, p.host, p.e - i.m AS d
            FROM merge_tmp_per_host AS p JOIN inst AS i USING (job, op, comm, seq)
        ),
        iqr AS (
            SELECT job, op, comm, host, QUANTILE_CONT(d, 0.75) - QUANTILE_CONT(d, 0.25) AS iqr
            FROM dev GROUP BY ALL
        )
        SELECT job, op, comm, MAX(iqr) AS spread_ns, MAX(iqr) <= {MAX_SERIES_SPREAD_NS} AS steady
        FROM iqr GROUP BY ALL;
        CREATE OR REPLACE TEMP TABLE merge_tmp_host_ends AS
        SELECT DENSE_RANK() OVER (ORDER BY p.job, p.op, p.comm, p.seq) AS inst, p.job, p.host, p.e
        FROM merge_tmp_per_host AS p
        JOIN merge_tmp_series AS s ON s.job = p.job AND s.op = p.op AND s.comm = p.comm AND s.steady;
        """
    )
    unsteady = con.execute(
        "SELECT op, comm, spread_ns FROM merge_tmp_series WHERE NOT steady ORDER BY job, op, comm"
    ).fetchall()
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
    con.execute(
        "CREATE OR REPLACE TEMP TABLE merge_tmp_corr AS "
        "SELECT DISTINCT job, host, 0.0::DOUBLE AS c FROM merge_tmp_host_ends"
    )
    for _ in range(MAX_ITERATIONS):
        con.execute(
            """
            CREATE OR REPLACE TEMP TABLE merge_tmp_next AS
            WITH x AS (
                SELECT e.inst, e.job, e.host, e.e + c.c AS x, c.c
                FROM merge_tmp_host_ends AS e JOIN merge_tmp_corr AS c USING (job, host)
            ),
            m AS (SELECT inst, MEDIAN(x) AS m FROM x GROUP BY inst)
            SELECT job, host, ANY_VALUE(c) + MEDIAN(m - x) AS c, ABS(MEDIAN(m - x)) AS delta
            FROM x JOIN m USING (inst)
            GROUP BY job, host
            """
        )
        delta = con.execute("SELECT MAX(delta) FROM merge_tmp_next").fetchone()[0]
        con.execute("CREATE OR REPLACE TEMP TABLE merge_tmp_corr AS SELECT job, host, c FROM merge_tmp_next")
        if delta is None or delta < CONVERGED_NS:
            break


def _mismatch_p50(con: duckdb.DuckDBPyConnection, corrected: bool) -> dict[int, float]:
    """Per job: median |host end - instance median| with or without the corrections."""
    c = "COALESCE(c.c, 0)" if corrected else "0"
    return dict(
        con.execute(
            f"""
        WITH x AS (
            SELECT e.inst, e.job, e.e + {c} AS x
            FROM merge_tmp_host_ends AS e LEFT JOIN merge_tmp_corr AS c USING (job, host)
        ), m AS (SELECT inst, MEDIAN(x) AS m FROM x GROUP BY inst)
        SELECT job, MEDIAN(ABS(x - m)) FROM x JOIN m USING (inst) GROUP BY job
        """
        ).fetchall()
    )


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
    hosts = con.execute(
        f"""SELECT job, host FROM (
                SELECT DISTINCT COALESCE(job, 1) AS job, {_HOST_SQL} AS host FROM ranks)
            QUALIFY COUNT(*) OVER (PARTITION BY job) >= 2 ORDER BY ALL"""
    ).fetchall()
    if not hosts:
        return warnings  # one clock per job: nothing to refine, the session timeline is exact
    jobs = sorted({j for j, _ in hosts})
    several = con.execute("SELECT COUNT(DISTINCT COALESCE(job, 1)) FROM ranks").fetchone()[0] > 1

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

    # Gauge: per job, the host of the lowest rank (among the refined ones) keeps its session-start placement.
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE merge_tmp_next AS
        WITH ref AS (
            SELECT COALESCE(r.job, 1) AS job, ARG_MIN({_HOST_SQL}, r.rank) AS host
            FROM ranks AS r JOIN merge_tmp_corr AS c ON c.job = COALESCE(r.job, 1) AND c.host = {_HOST_SQL}
            GROUP BY ALL
        )
        SELECT c.job, c.host, CAST(ROUND(c.c - g.c) AS BIGINT) AS corr, c.c - g.c AS delta
        FROM merge_tmp_corr AS c
        JOIN ref USING (job)
        JOIN merge_tmp_corr AS g ON g.job = ref.job AND g.host = ref.host
        """
    )
    con.execute(
        f"""
        UPDATE ranks SET
            clock_offset_ns = ranks.clock_offset_ns + k.corr,
            alignment_method = 'collectives'
        FROM merge_tmp_next AS k
        WHERE k.job = COALESCE(ranks.job, 1) AND k.host = {_HOST_SQL}
        """
    )
    kept = set(con.execute("SELECT job, host FROM merge_tmp_corr").fetchall())
    unrefined = [(j, h) for j, h in hosts if (j, h) not in kept and any(j == k for k, _ in kept)]
    if unrefined:
        names = ", ".join(label(j, h) for j, h in unrefined[:8])
        warnings.append(
            f"clock alignment: hosts {names} share no matched collective with the others; "
            "kept their session-start (UTC) alignment"
        )
    big = con.execute(
        f"SELECT job, host FROM merge_tmp_next WHERE ABS(delta) > {SUSPICIOUS_CORRECTION_NS} ORDER BY ALL"
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
    nccl, complete = con.execute(
        "SELECT COUNT(*), COUNT(*) FILTER (WHERE complete AND n_hosts >= 2) FROM merge_coll_members "
        f"WHERE job = {int(job)}"
    ).fetchone()
    partial = con.execute(f"SELECT label FROM jobs WHERE job = {int(job)} AND NOT complete").fetchone()
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
