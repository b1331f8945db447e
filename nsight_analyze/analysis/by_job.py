"""The job-level step of new runs alone: when the ranks an ingest adds form new jobs by themselves.

Why: one more run ingested into a workspace of 100 recomputed every job-level result of all 101
jobs (issue 55: adding one run recomputes only that run's results). The job-level queries work
per job (ranks of different jobs are never matched, aligned or compared: merge_jobs), so the
new jobs' rows computed from their ranks alone are those the job step of every job gives them,
and the other jobs' rows stay as stored, when:

- the only change since the last analysis is new ranks: no rank changed or removed, no file
  without ranks added or changed (the job stamp of the ranks held is the stored one);
- merge_jobs and jobs over every rank give the ranks held the jobs stored now (the same
  numbers; jobs' rows of them unchanged) and the new ranks jobs of their own (numbered after the
  others then). A held rank's time group or part (merge_jobs) may change (a run captured before
  the others, rule 2): nothing but jobs reads them, so merge_jobs is replaced whole.

Two things are numbered over the whole workspace and handled here: the job numbers (merge_jobs and
jobs are computed over every rank, then shown to the step filtered to the new ranks and jobs) and
the collectives' ids (coll_id, ordered by job: the new jobs' ids follow the ids held, so they are
shifted by the number of collectives held). Results with neither a rank nor a job column (cross-job:
kernel_duration_totals) are computed whole, over every rank, first. In refresh's swap (one
transaction) the new jobs' rows replace theirs in each stored job result (none: they are new), and
the whole ones replace theirs. In any other case the job step of every job runs, and refresh's
line says why. tests/test_add_run.py checks every stored result against an ingest of all runs at
once; a job query that reads across jobs breaks it there.
"""

from __future__ import annotations

import duckdb

from ..ranks import assign_jobs
from ..store import query_layer, schema
from ..store.query_layer import statements
from .plan import STATE_TABLE, NewJobs, Plan, _meta, job_stamp, stored_closure
from .steps import STAGED, Made, drop_made, job_step, rank_list

SQL = statements("analysis/by_job")
NUMBERED = ("merge_jobs", "jobs")  # numbered over every rank: computed whole, shown filtered
EVERY = "_by_job_all_"  # prefix of the TEMP tables of those over every rank


def scope(con: duckdb.DuckDBPyConnection, main: str, p: Plan) -> bool:
    """Whether `p`'s stale ranks are new ranks forming jobs of their own, so that `step` computes
    the job step of those jobs alone; `p.new_jobs` says which, or why not (None: no rank added,
    or some changed).
    Expects every rank's results (the stale ranks' in the staged tables) and a copy of `ranks`
    shown under their names, as `job_step` does."""
    p.new_jobs = None
    if p.kept and p.ranks:
        try:
            p.new_jobs = _scope(con, main, p)
        finally:
            if not isinstance(p.new_jobs, NewJobs):
                drop_made(
                    con, [*((f"{EVERY}{n}", "TABLE") for n in NUMBERED), *((n, "VIEW") for n in NUMBERED)]
                )
    return isinstance(p.new_jobs, NewJobs)


def line(p: Plan) -> str | None:
    """What refresh says of the job step after it ran (None: nothing was added)."""
    if isinstance(p.new_jobs, NewJobs):
        return p.new_jobs.line()
    return (
        f"analysis: the job-level results of every job computed again ({p.new_jobs})" if p.new_jobs else None
    )


def replaced(p: Plan) -> dict[str, str]:
    """{job result: the SQL condition on its rows the staged rows replace} (the new jobs' rows);
    the other job results are replaced whole."""
    s = p.new_jobs
    return {name: s.where(name) for name in s.keys} if isinstance(s, NewJobs) else {}


def _scope(con: duckdb.DuckDBPyConnection, main: str, p: Plan) -> NewJobs | str | None:
    """The new jobs when `p`'s stale ranks are new ranks forming jobs of their own, else why not
    (None: some ranks changed or went, which refresh says already); leaves merge_jobs and jobs
    over every rank as TEMP tables."""
    held = dict(con.execute(f"SELECT rank, fingerprint FROM {main}.{STATE_TABLE}").fetchall())
    if p.removed or any(r in held for r in p.ranks):
        return None
    if job_stamp(p.stamps["analysis_global"], held, p.rankless) != _meta(con, "analysis_job"):
        return "files without ranks changed"
    missing = [n for n in (*NUMBERED, "collectives") if n not in p.tables]
    if missing:
        return f"{missing[0]} is not held"
    for q in query_layer.closure([q for q in query_layer.of_stage("job") if q.name in NUMBERED]):
        if q.stage == "job":  # merge_jobs, then jobs (load order)
            con.execute(q.create("view", temporary=True))
            con.execute(
                SQL.sql("every_rank_table", every=EVERY, name=q.name)
            )  # then read as computed (by jobs)
            con.execute(SQL.sql("all_rows_view", name=q.name, source=f'"{EVERY}{q.name}"'))
    for name in reversed(NUMBERED):
        con.execute(f'DROP VIEW temp.main."{name}"')
    new = rank_list(p.ranks)
    (joined,) = con.execute(SQL.sql("joined_job", every=EVERY, new=new)).fetchone()
    if joined is not None:
        return f"new ranks join job {joined}"
    held_rows = {  # the held ranks' jobs, and those jobs' rows (what the job step reads of them)
        "merge_jobs": ("rank, job", SQL.sql("held_ranks", new=new)),
        "jobs": ("*", SQL.sql("held_jobs", every=EVERY, new=new)),
    }
    for name, (columns, where) in held_rows.items():
        now = SQL.sql("held_rows_now", columns=columns, every=EVERY, name=name, where=where)
        stored = f'{main}."{name}"'
        (differ,) = con.execute(
            SQL.sql("held_rows_changed", now=now, columns=columns, stored=stored)
        ).fetchone()
        if differ:
            return f"the jobs held change ({name})"
    count, last = con.execute(SQL.sql("collectives_held", main=main)).fetchone()
    if count != last:
        return "the collectives held are not numbered 1 to n"
    jobs = [r[0] for r in con.execute(SQL.sql("new_jobs", every=EVERY, new=new)).fetchall()]
    (n_kept,) = con.execute(f"SELECT count(*) FROM {main}.jobs").fetchone()
    s = NewJobs(sorted(p.ranks), jobs, n_kept, count)
    columns = schema.table_columns(con)
    for name in (n for n in query_layer.stored("job") if n in p.tables and n != "merge_jobs"):
        cols = columns.get(name, [])
        if "job" in cols or "rank" in cols:
            s.keys[name] = "job" if "job" in cols else "rank"
        else:
            s.whole.append(name)
        if "coll_id" in cols:
            s.coll_ids.append(name)
    for name in s.whole:  # computed whole, so over every rank's results, never a job's alone
        per_job = (stored_closure([name]) & set(query_layer.stored("job"))) - set(s.whole)
        if per_job:
            return f"{name} reads {sorted(per_job)[0]}"
    return s


def step(con: duckdb.DuckDBPyConnection, main: str, p: Plan) -> tuple[Made, list[str]]:
    """The job step of the new jobs alone (`scope`), leaving every job result of `p.tables` as a TEMP
    table or view (the new jobs' rows; the whole ones' every row) and `ranks` as the new ranks'
    (their clock offsets), as `job_step` does for every job. Returns what it created and the notes."""
    s = p.new_jobs
    assert isinstance(s, NewJobs)
    made: Made = [(f"{EVERY}{n}", "TABLE") for n in NUMBERED]
    try:
        return made, _steps(con, main, p, s, made)
    except BaseException:
        drop_made(con, made)
        raise


def _steps(con: duckdb.DuckDBPyConnection, main: str, p: Plan, s: NewJobs, made: Made) -> list[str]:
    """step's work; what it creates is added to `made` as it goes."""
    if s.whole:  # over every rank, as shown now (each reads no per-job result: _scope)
        made += job_step(con, align=False, tables=s.whole)[0]
    for name in NUMBERED:  # the note an ingest prints (how many jobs) is the workspace's
        con.execute(SQL.sql("all_rows_view", name=name, source=f"{EVERY}{name}"))
    made += [(n, "VIEW") for n in NUMBERED]
    notes = assign_jobs(con)
    new, jobs = rank_list(s.ranks), rank_list(s.jobs)
    con.execute(SQL.sql("new_ranks_table", main=main, new=new))
    con.execute(SQL.sql("ranks_view", name="merge_jobs", source=f"{EVERY}merge_jobs", ranks=new))
    con.execute(SQL.sql("jobs_view", name="jobs", source=f"{EVERY}jobs", jobs=jobs))
    shown = [t for t in schema.owned_by(con, "rank") if t != "ranks"]
    for name in shown:
        con.execute(SQL.sql("ranks_view", name=name, source=f'{main}."{name}"', ranks=new))
    made += [(n, "VIEW") for n in shown]
    rank_results = [n for n in query_layer.stored("rank") if n in p.tables]
    for name in rank_results:  # the new ranks' rows alone (the caller's views, replaced: it drops them)
        con.execute(SQL.sql("all_rows_view", name=name, source=f'{main}."{STAGED}{name}"'))
    own = assign_jobs(con)  # what align_clocks says first, over the new jobs alone
    job_made, aligned = job_step(
        con, tables=p.tables - set(s.whole) - set(NUMBERED), inputs={*NUMBERED, *s.whole}
    )
    made += job_made
    for name in s.coll_ids:  # numbered over the whole workspace, ordered by job: after the held ones
        con.execute(SQL.sql("shift_coll_ids", name=name, collectives=s.collectives))
    # merge_jobs' every row: a held rank's time group or part may change with its job kept
    con.execute(SQL.sql("all_rows_view", name="merge_jobs", source=f"{EVERY}merge_jobs"))
    return notes + aligned[len(own) :]
