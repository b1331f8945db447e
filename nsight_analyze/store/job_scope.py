"""One job of a workspace at a time: what summary, diagnose, report, mfu, whatif and compare read.

Why: a folder may hold captures of unrelated jobs (queries/job/merge_jobs.sql). The job-level results
are already computed per job, but a command that sums, ranks or compares over "all ranks" (the
top kernels, the mean step, the worst rank per step, a finding's ranks, the report's timeline)
would mix them. So these commands show one job: the one `--job N` names, else the job with the
most ranks with GPU operations (then the most ranks, then the lowest number), and say so when
there are others.

How: TEMP views named like the workspace's tables show only that job's rows (tables with a
`rank` column: the job's ranks; tables with a `job` column: the job); the workspace's own views
and macros read them by plain name, so every query sees the one job. The file is unchanged.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import duckdb

from ..errors import UserError
from .duck import main_schema
from .query_layer import statements
from .schema import table_columns

SQL = statements("store/job_scope")


@dataclass(frozen=True)
class JobScope:
    """The job a connection shows, and how many the workspace holds."""

    job: int
    label: str  # '2 of 128 ranks', '8 ranks (world size unknown)' (jobs.label)
    first_rank: int
    last_rank: int
    ranks: list[int]
    n_jobs: int
    chosen: bool  # named by the caller (--job N), not the default

    def note(self, option: str = "--job N") -> str | None:
        """One line naming the job shown when the workspace holds others; None when it is the only one."""
        if self.n_jobs <= 1:
            return None
        span = (
            f"rank {self.first_rank}"
            if self.first_rank == self.last_rank
            else (f"ranks {self.first_rank}-{self.last_rank}")
        )
        why = "" if self.chosen else ", the one with the most ranks with GPU work"
        return (
            f"{self.n_jobs} jobs in this workspace; showing job {self.job} ({span}: {self.label}{why}); "
            f"{option} shows another (`nsight-analyze info` lists them)"
        )

    def as_dict(self) -> dict:
        """JSON form: the job shown, its ranks, and the number of jobs in the workspace."""
        return {**asdict(self), "note": self.note()}


def choose(con: duckdb.DuckDBPyConnection, job: int | None = None) -> JobScope | None:
    """The job to show: `job`, else the one with the most ranks with GPU operations (then the most
    ranks, then the lowest number). None when the workspace has no
    `jobs` table (not analysed) or no job. A `job` the workspace lacks is one clear line."""
    main = main_schema(con)
    try:  # ranks with GPU operations first (a CPU-only capture is not the job a user means)
        busy = SQL.sql("busy_ranks_of_job", main=main)
        con.execute(f"SELECT count(*) FROM {main}.tp_capture").fetchone()
    except duckdb.CatalogException:
        busy = "0"
    try:
        rows = con.execute(SQL.sql("jobs_in_order", main=main, busy=busy)).fetchall()
    except duckdb.CatalogException:
        rows = []
    if not rows:
        if job is not None and job != 1:
            raise UserError(f"--job {job}: this workspace holds no job {job} (it is not analysed yet)")
        return None
    by_id = {int(r[0]): r for r in rows}
    if job is not None and job not in by_id:
        held = "job " if len(by_id) == 1 else "jobs "
        raise UserError(f"--job {job}: this workspace holds {held}{', '.join(map(str, sorted(by_id)))}")
    row = by_id[job] if job is not None else rows[0]
    return JobScope(
        int(row[0]),
        str(row[1]),
        int(row[2]),
        int(row[3]),
        [int(r) for r in row[5] or []],
        len(rows),
        job is not None,
    )


def scope(con: duckdb.DuckDBPyConnection, job: int | None = None) -> JobScope | None:
    """Make the connection show one job (see the module docstring); returns it (None: no jobs).

    A single-job workspace is left as it is (nothing to hide)."""
    chosen = choose(con, job)
    if chosen is None or chosen.n_jobs <= 1:
        return chosen
    main = main_schema(con)
    # results computed for this session (a file that cannot be written) are TEMP tables, some
    # with no stored table of the name (not computed in the file yet: analysis.refresh)
    session = dict(con.execute(SQL["session_table_columns"]).fetchall())
    temp = set(session)
    ranks = ", ".join(str(r) for r in chosen.ranks) or "NULL"
    for table, names in sorted({**table_columns(con), **session}.items()):
        if "rank" not in names and "job" not in names:
            continue
        source = f'{main}."{table}"'
        if table in temp:  # results computed for this session (read-only file): scope those
            con.execute(SQL.sql("unscope_session_table", table=table))
            source = f'temp.main."_unscoped_{table}"'
        if "rank" in names:
            con.execute(SQL.sql("ranks_view", table=table, source=source, ranks=ranks))
        else:
            con.execute(SQL.sql("job_view", table=table, source=source, job=chosen.job))
    return chosen
