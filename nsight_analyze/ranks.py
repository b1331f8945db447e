"""Rank merger: clock alignment across hosts from matched NCCL collectives.

Why this exists: nsys does not synchronise clocks across hosts. Each file is first
placed by its session start (one UTC reading per report, NTP/PTP quality: often off by
milliseconds). Matched collectives finish within microseconds on every participant, so
the median mismatch of their end times per host is a far better estimate of each host's
clock error. Ranks of one host share one clock, so there is one refinement per host.

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


def _coarse_alignment(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Place every rank by its session start relative to the earliest one (UTC shift)."""
    con.execute(
        """
        UPDATE ranks SET
            clock_offset_ns = COALESCE(
                session_start_utc_ns - (SELECT MIN(session_start_utc_ns) FROM ranks), 0),
            alignment_method = CASE WHEN session_start_utc_ns IS NULL THEN 'none' ELSE 'session-start' END
        """
    )
    missing = [r[0] for r in con.execute(
        "SELECT rank FROM ranks WHERE session_start_utc_ns IS NULL ORDER BY rank").fetchall()]
    if missing and len(missing) < con.execute("SELECT COUNT(*) FROM ranks").fetchone()[0]:
        return [
            f"ranks {_fmt_ranks(missing)} have no session start time: their clocks are placed at the "
            "earliest session start until collectives refine them"
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
        SELECT op, comm, seq, host, MEDIAN(aligned_end_ns)::DOUBLE AS e
        FROM merge_coll_members
        WHERE n_hosts >= 2
        GROUP BY op, comm, seq, host;
        CREATE OR REPLACE TEMP TABLE merge_tmp_series AS
        WITH inst AS (SELECT op, comm, seq, MEDIAN(e) AS m FROM merge_tmp_per_host GROUP BY ALL),
        dev AS (
            SELECT p.op, p.comm, p.host, p.e - i.m AS d
            FROM merge_tmp_per_host AS p JOIN inst AS i USING (op, comm, seq)
        ),
        iqr AS (
            SELECT op, comm, host, QUANTILE_CONT(d, 0.75) - QUANTILE_CONT(d, 0.25) AS iqr
            FROM dev GROUP BY ALL
        )
        SELECT op, comm, MAX(iqr) AS spread_ns, MAX(iqr) <= {MAX_SERIES_SPREAD_NS} AS steady
        FROM iqr GROUP BY ALL;
        CREATE OR REPLACE TEMP TABLE merge_tmp_host_ends AS
        SELECT DENSE_RANK() OVER (ORDER BY p.op, p.comm, p.seq) AS inst, p.host, p.e
        FROM merge_tmp_per_host AS p
        JOIN merge_tmp_series AS s ON s.op = p.op AND s.comm = p.comm AND s.steady;
        """
    )
    unsteady = con.execute(
        "SELECT op, comm, spread_ns FROM merge_tmp_series WHERE NOT steady ORDER BY op, comm"
    ).fetchall()
    if not unsteady:
        return []
    names = ", ".join(f"{op}/{comm} (end spread {spread / 1e3:,.0f} us)" for op, comm, spread in unsteady[:4])
    return [
        f"clock alignment: ignored collective series whose ends do not agree across hosts: {names}; "
        "they probably mix different communicators (no NCCL NVTX payload to tell them apart)"
    ]


def _solve(con: duckdb.DuckDBPyConnection) -> None:
    """Per-host corrections c_h making each host's end agree with the per-instance median.

    Fixed point of c_h <- c_h + median_i(median_h'(e_ih' + c_h') - (e_ih + c_h)): a robust
    (median) consensus that tolerates outlier instances and collectives that span only
    some hosts (tensor/pipeline groups), unlike a single mean-skew pass.
    """
    con.execute(
        "CREATE OR REPLACE TEMP TABLE merge_tmp_corr AS "
        "SELECT DISTINCT host, 0.0::DOUBLE AS c FROM merge_tmp_host_ends"
    )
    for _ in range(MAX_ITERATIONS):
        con.execute(
            """
            CREATE OR REPLACE TEMP TABLE merge_tmp_next AS
            WITH x AS (
                SELECT e.inst, e.host, e.e + c.c AS x, c.c
                FROM merge_tmp_host_ends AS e JOIN merge_tmp_corr AS c USING (host)
            ),
            m AS (SELECT inst, MEDIAN(x) AS m FROM x GROUP BY inst)
            SELECT host, ANY_VALUE(c) + MEDIAN(m - x) AS c, ABS(MEDIAN(m - x)) AS delta
            FROM x JOIN m USING (inst)
            GROUP BY host
            """
        )
        delta = con.execute("SELECT MAX(delta) FROM merge_tmp_next").fetchone()[0]
        con.execute("CREATE OR REPLACE TEMP TABLE merge_tmp_corr AS SELECT host, c FROM merge_tmp_next")
        if delta is None or delta < CONVERGED_NS:
            break


def _mismatch_p50(con: duckdb.DuckDBPyConnection, corrected: bool) -> float | None:
    """Median |host end - instance median| with or without the corrections."""
    c = "COALESCE(c.c, 0)" if corrected else "0"
    return con.execute(
        f"""
        WITH x AS (
            SELECT e.inst, e.e + {c} AS x
            FROM merge_tmp_host_ends AS e LEFT JOIN merge_tmp_corr AS c USING (host)
        ), m AS (SELECT inst, MEDIAN(x) AS m FROM x GROUP BY inst)
        SELECT MEDIAN(ABS(x - m)) FROM x JOIN m USING (inst)
        """
    ).fetchone()[0]


def align_clocks(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Set ranks.clock_offset_ns/alignment_method: session start, then per-host collective refinement.

    Returns human-readable warnings (nothing could refine a host, suspicious results). Runs inside
    the analysis' job step (analysis.job_step), which provides the merger's views.
    Idempotent: the coarse offsets are recomputed from session starts every time. A failure
    of the refinement never fails the ingest: the session-start alignment stays, with a warning.
    """
    if con.execute("SELECT COUNT(*) FROM ranks").fetchone()[0] == 0:
        return []
    warnings = _coarse_alignment(con)
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
        for table in ("merge_tmp_per_host", "merge_tmp_series", "merge_tmp_host_ends", "merge_tmp_corr",
                      "merge_tmp_next"):
            try:
                con.execute(f"DROP TABLE IF EXISTS {table}")
            except duckdb.Error:
                pass


def _refine(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Per-host refinement from matched collectives; returns warnings."""
    warnings: list[str] = []
    hosts = [r[0] for r in con.execute(f"SELECT DISTINCT {_HOST_SQL} FROM ranks ORDER BY 1").fetchall()]
    if len(hosts) < 2:
        return warnings  # one clock: nothing to refine, the session timeline is exact

    warnings += _host_ends(con)
    _solve(con)
    before = _mismatch_p50(con, corrected=False)
    after = _mismatch_p50(con, corrected=True)
    refined = [r[0] for r in con.execute("SELECT host FROM merge_tmp_corr ORDER BY host").fetchall()]
    if not refined:
        nccl = con.execute("SELECT COUNT(*) FROM merge_nccl_kernels").fetchone()[0]
        why = "no NCCL kernels" if nccl == 0 else "no NCCL collective matched across hosts"
        warnings.append(
            f"clock alignment: {why}; kept the session-start (UTC) alignment of {len(hosts)} hosts, "
            "whose error is the hosts' NTP/PTP quality (often milliseconds)"
        )
        return warnings
    if before is not None and after is not None and after > WORSE_FACTOR * before + WORSE_SLACK_NS:
        warnings.append(
            f"clock alignment: collective refinement made end times agree less (median mismatch "
            f"{after:,.0f} ns vs {before:,.0f} ns); kept the session-start alignment"
        )
        return warnings

    # Gauge: the host of the lowest rank keeps its session-start placement.
    ref_host = con.execute(
        f"""
        SELECT {_HOST_SQL} FROM ranks WHERE {_HOST_SQL} IN (SELECT host FROM merge_tmp_corr)
        ORDER BY rank LIMIT 1
        """
    ).fetchone()[0]
    con.execute(
        f"""
        UPDATE ranks SET
            clock_offset_ns = ranks.clock_offset_ns + k.corr,
            alignment_method = 'collectives'
        FROM (
            SELECT host, CAST(ROUND(c - (SELECT c FROM merge_tmp_corr WHERE host = ?)) AS BIGINT) AS corr
            FROM merge_tmp_corr
        ) AS k
        WHERE {_HOST_SQL} = k.host
        """,
        [ref_host],
    )
    unrefined = sorted(set(hosts) - set(refined))
    if unrefined:
        warnings.append(
            f"clock alignment: hosts {', '.join(unrefined[:8])} share no matched collective with the others; "
            "kept their session-start (UTC) alignment"
        )
    big = con.execute(
        f"""
        SELECT host, c FROM merge_tmp_corr
        WHERE ABS(c - (SELECT c FROM merge_tmp_corr WHERE host = ?)) > {SUSPICIOUS_CORRECTION_NS}
        """,
        [ref_host],
    ).fetchall()
    if big:
        warnings.append(
            f"clock alignment: host {big[0][0]} was moved by more than "
            f"{SUSPICIOUS_CORRECTION_NS / 1e9:.0f} s from its UTC placement; check that the captures "
            "cover the same collectives (a capture that starts mid-run shifts the sequence numbers)"
        )
    return warnings
