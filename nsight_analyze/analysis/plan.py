"""What the stored analysis is computed from and what is stale: the stamps, the results held,
and the plan of what a read needs computed (`plan`).

Why a module of its own: every command asks it first (cheap: metadata reads and row counts), and
the answer is what decides whether anything is computed at all; the computing is steps.py's and
the orchestration the package's (`refresh`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field

import duckdb

from ..errors import UserError
from ..store import query_layer, schema
from ..store.duck import sql_string
from ..store.query_layer import statements
from .steps import ALIGNMENT_READS, rank_list

SQL = statements("analysis/plan")

STATE_TABLE = "_analysis_ranks"
COUNTED = ("kernels", "memops", "cuda_api", "nvtx", "sync")  # rows that make a rank's size
SCHEMA_VERSION = "2"
TABLES_KEY = "analysis_tables"  # meta: the stored results computed under the current stamps
# The first answers: what `summary`, `ranks`' table and ingest's closing table read. An ingest
# computes these (and their closure); every other stored result is computed the first time a
# command, `sql`, the API or an export reads it (`refresh(wanted=...)`), then stored.
FIRST_ANSWERS = (
    "time_partition", "kernel_summary", "steps", "job_steps", "diag_rank_kernels", "rank_rollup",
    "collectives", "alignment_quality", "imbalance", "merge_straggler_verdict", *ALIGNMENT_READS,
)  # fmt: skip
# A workspace of several runs (jobs) is read first by `runs`: its first answers also hold what
# `runs` reads beyond FIRST_ANSWERS (runs.READS; tests/test_lazy_analysis.py checks the two agree).
MANY_RUNS_ANSWERS = ("comm_groups", "memory_peak")
# what a reader asks computed: stored results (or any query names), "all", None: the first answers
Wanted = Iterable[str] | str | None


@dataclass
class NewJobs:
    """The new jobs whose job-level results are computed alone, and how their rows are replaced."""

    ranks: list[int]
    jobs: list[int]
    kept: int  # jobs whose results are kept
    collectives: int  # collectives held: the new jobs' coll_id follow theirs
    keys: dict[str, str] = field(default_factory=dict)  # job result -> "job" | "rank": its rows' owner
    whole: list[str] = field(default_factory=list)  # job results of no rank or job: computed whole
    coll_ids: list[str] = field(default_factory=list)  # job results with a coll_id column

    def where(self, name: str) -> str:
        """The SQL condition selecting the new jobs' rows of the job result `name`."""
        key = self.keys[name]
        return SQL.sql("owned_rows", owner=key, ids=rank_list(self.jobs if key == "job" else self.ranks))

    def line(self) -> str:
        """What refresh says: which jobs were computed, which kept."""
        jobs = ", ".join(map(str, self.jobs))
        return (
            f"analysis: job-level results of the new job(s) {jobs} only; "
            f"the results of the {self.kept} other job(s) kept"
            + (f" ({', '.join(self.whole)} computed whole)" if self.whole else "")
        )


@dataclass
class Plan:
    """What `refresh` found stale, and why (the one line a command prints before recomputing)."""

    full: bool
    ranks: list[int]
    removed: list[int]
    job: bool
    reason: str
    sizes: dict[int, int] = field(default_factory=dict)
    stamps: dict[str, str] = field(default_factory=dict)
    fingerprints: dict[int, str] = field(default_factory=dict)
    counts: dict[int, str] = field(default_factory=dict)  # per rank: its rows per table, as fingerprinted
    tables: set[str] = field(default_factory=set)  # the stored results recomputed (stale ranks, the job)
    extend: set[str] = field(default_factory=set)  # then computed for every rank, for first use
    have: set[str] = field(default_factory=set)  # the stored results computed under the stamps
    rankless: str = ""  # the content hashes of the files that own no rank (in the job stamp)
    new_jobs: NewJobs | str | None = None  # the new jobs computed alone, or why not (by_job.scope)

    @property
    def needed(self) -> bool:
        return self.outdated or bool(self.extend)

    @property
    def outdated(self) -> bool:
        """Some held results are stale: every rank's (full), some ranks' or the job's."""
        return self.full or bool(self.ranks or self.removed) or self.job

    @property
    def kept(self) -> list[int]:
        """The ranks whose stored rank-local results stay as they are (none in a full recompute)."""
        return [] if self.full else sorted(set(self.fingerprints) - set(self.ranks))

    @property
    def stale(self) -> str:
        """The ranks whose stored rows are replaced or removed, as an SQL `IN (...)` list."""
        return rank_list([*self.ranks, *self.removed])


def _objects(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """{name: 'table' | 'view'} of the workspace's main schema."""
    return dict(con.execute(SQL["workspace_objects"]).fetchall())


def layer_hash() -> str:
    """The queries and schema files: a change of either recomputes everything."""
    digest = hashlib.sha256(SCHEMA_VERSION.encode())
    for path in schema.schema_files():
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    for q in sorted(query_layer.layer(), key=lambda q: q.name):  # parsed once per process
        digest.update(f"{q.name}.sql".encode())
        digest.update(q.sql.encode())
    return digest.hexdigest()


def global_stamp(con: duckdb.DuckDBPyConnection) -> str:
    """The queries, the settings (user kernel rules included) and the rules kernels were last
    re-classified with."""
    classified = _meta(con, "classified_with") or ""
    settings = con.execute(SQL["settings_text"]).fetchone()[0]
    return hashlib.sha256(f"{layer_hash()}\x1f{settings}\x1f{classified}".encode()).hexdigest()


def _fingerprints(
    con: duckdb.DuckDBPyConnection, objects: dict[str, str]
) -> tuple[dict[int, str], dict[int, int], str, dict[int, str]]:
    """Per rank: a hash of its file's content hash and its row counts; its event count; the
    workspace's row totals and rank identities (`totals`); and the per-rank counts themselves.
    `objects`: the workspace's tables and views (_objects).

    Counting rows per rank scans every canonical table (0.1 s at 64 ranks x 200k kernels, on
    every command); a table's total is a metadata read. So when the totals and every rank's
    file and source equal those of the last analysis, the per-rank counts are read from it.
    """
    # the schema gives every counted table a rank column: only whether it exists is read (a
    # workspace of an older version may lack one); duckdb_columns() would cost 20 ms a command
    present = [t for t in COUNTED if objects.get(t) == "table"]
    state = _columns_of(con, STATE_TABLE) if objects.get(STATE_TABLE) == "table" else []
    ident = con.execute(SQL["rank_identities"]).fetchone()[0]
    sums = con.execute(
        SQL.sql("table_totals", totals=", ".join(SQL.sql("table_total", table=t) for t in present) or "1")
    ).fetchone()
    totals = ident + "|" + ",".join(f"{t}:{n}" for t, n in zip(present, sums))
    if _meta(con, "analysis_totals") == totals and "counts" in state:
        counts = SQL.sql("held_rank_counts", state=STATE_TABLE)
    else:
        per = " UNION ALL ".join(SQL.sql("rank_rows_of_table", table=t) for t in present)
        counts = SQL.sql("rank_counts", per=per or SQL["no_rank_rows"])
    rows = con.execute(SQL.sql("rank_fingerprints", counts=counts)).fetchall()
    return (
        {int(r): fp for r, fp, _, _ in rows},
        {int(r): int(n) for r, _, n, _ in rows},
        totals,
        {int(r): cs for r, _, _, cs in rows},
    )


def _columns_of(con: duckdb.DuckDBPyConnection, table: str) -> list[str]:
    """A table's column names, from binding a query of it (no catalog scan)."""
    return [d[0] for d in con.execute(f'SELECT * FROM "{table}" LIMIT 0').description]


def _meta(con: duckdb.DuckDBPyConnection, key: str) -> str | None:
    row = con.execute(f"SELECT value FROM meta WHERE key = {sql_string(key)}").fetchone()
    return row[0] if row else None


def all_stored() -> set[str]:
    """Every stored result, rank-local and job-level."""
    return {*query_layer.stored("rank"), *query_layer.stored("job")}


def stored_closure(names: Iterable[str]) -> set[str]:
    """The stored results that reading `names` (queries of any kind, or canonical tables, which
    need nothing) needs computed: those among them and every one they read, transitively."""
    by_name = {q.name: q for q in query_layer.layer()}
    queries = query_layer.closure([by_name[n] for n in names if n in by_name])
    return {q.name for q in queries if q.result == "stored" and q.stage in ("rank", "job")}


def targets(wanted: Wanted = None) -> set[str]:
    """The stored results a reader of `wanted` needs: the first answers always (they hold the
    clock alignment every job result reads), and the closure of what it reads."""
    if wanted == "all":
        return all_stored()
    names = [wanted] if isinstance(wanted, str) else list(wanted or ())
    return stored_closure([*FIRST_ANSWERS, *names])


def parse_analyze(text: str | None) -> Wanted:
    """`ingest --analyze`: first (None), all, or comma-separated names of results or views."""
    if text is None or text.strip() == "first":
        return None
    if text.strip() == "all":
        return "all"
    names = [n.strip() for n in text.split(",") if n.strip()]
    known = {q.name for q in query_layer.layer()}
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise UserError(
            f"--analyze {text!r}: {'no table named ' + unknown[0] if unknown else 'nothing named'}; "
            "give first, all, or table names (docs/metrics.md lists them)"
        )
    return names


def computed(con: duckdb.DuckDBPyConnection) -> set[str]:
    """The stored results the workspace holds under its stamps (`meta.analysis_tables`)."""
    value = _meta(con, TABLES_KEY)
    return {n for n in (value or "").split(",") if n} & all_stored()


def plan(con: duckdb.DuckDBPyConnection, wanted: Wanted = None) -> Plan:
    """What is stale and what is missing for `wanted` (targets): cheap (row counts per rank, a
    few small tables); changes nothing.

    A stale workspace (queries, settings or rules changed) recomputes only the targets; the other
    results are dropped and computed again on their next read. When only some ranks (or the
    job's files) changed, every result held is recomputed for those ranks (work in proportion to
    what changed, and nothing computed before is lost); the targets not held yet are then
    computed for every rank (`extend`)."""
    want = targets(wanted)
    glob = global_stamp(con)
    objects = _objects(con)
    fps, sizes, totals, counts = _fingerprints(con, objects)
    # files that own no rank feed job results too (a recipe output read beside its reports' ranks)
    (rankless,) = con.execute(SQL["rankless_files"]).fetchone()
    stamps = {
        "analysis_global": glob,
        "analysis_job": job_stamp(glob, fps, rankless),
        "analysis_totals": totals,
    }
    have = computed(con) if _meta(con, "analysis_global") == glob else set()
    missing = sorted(n for n in have if objects.get(n) != "table")
    if not have or missing or objects.get(STATE_TABLE) != "table":
        why = "not computed yet" if _meta(con, "analysis_global") is None else "queries or settings changed"
        if missing:
            why = f"{missing[0]} is missing"
        return Plan(
            True, sorted(fps), [], True, why, sizes, stamps, fps, counts, want, set(), set(), rankless
        )
    done = dict(con.execute(f"SELECT rank, fingerprint FROM {STATE_TABLE}").fetchall())
    changed = [r for r, fp in fps.items() if done.get(r) != fp]
    removed = sorted(set(done) - set(fps))
    job = _meta(con, "analysis_job") != stamps["analysis_job"] or bool(changed or removed)
    reason = f"{len(changed)} rank(s) changed" if changed else ("ranks removed" if removed else "job changed")
    tables = have if job else set()
    return Plan(
        False, changed, removed, job, reason, sizes, stamps, fps, counts, tables, want - have, have, rankless
    )


def job_stamp(glob: str, fingerprints: dict[int, str], rankless: str) -> str:
    """What the job-level results are computed from: the global stamp, every rank's fingerprint and
    the files without ranks (by_job recomputes it from the fingerprints held, to see that new
    ranks are the only change)."""
    ranked = "".join(f"{r}:{fp};" for r, fp in sorted(fingerprints.items()))
    return hashlib.sha256((glob + ranked + (f"|{rankless}" if rankless else "")).encode()).hexdigest()
