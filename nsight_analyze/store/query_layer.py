"""The declared query layer: every file of queries/ with the stage it runs in and what it reads.

The files sit in domain folders that show the pipeline (queries/timeline, steps, partition,
kernels, comms, job, hfu, diagnose, whatif); a query's name is its file's stem, unique over
all folders, and the folder plays no part in the order. Each file defines one view or macro
and states, in its header,
    -- stage: rank | job | live
    -- result: stored | step | view        (rank and job stages only)
    -- requires: name, name, ...            (other queries and canonical tables it reads)
`rank` queries are computed for a batch of ranks from those ranks' canonical rows alone;
`job` queries read the stored rank results of every rank; `live` ones (cheap projections and
macros) stay views in the workspace. `stored` results become tables of the workspace,
`step` ones are materialised while their stage runs (they are read more than once) and
dropped after their last reader (analysis.last_readers), `view` ones are plain views of the
stage. The load order is the topological order of the declarations; a declaration naming an
unknown query, a cycle, or a stage reading a later stage is an error, so a broken layer fails
the command and the tests instead of loading half.
"""

from __future__ import annotations

import functools
import graphlib
import re
import string
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..errors import UserError

STAGES = ("live", "rank", "job")
# Folders of queries/ whose files hold the named statements of one Python module each, read by
# `statements`: queries/PACKAGE/.../MODULE.sql for nsight_analyze/PACKAGE/.../MODULE.py (PACKAGE.sql
# for the package's __init__), and queries/answers/MODULE.sql for a top-level nsight_analyze/MODULE.py.
STATEMENT_FOLDERS = (
    "analysis", "answers", "api", "commands", "compare", "export", "gpus", "ingest", "mfu", "report_doc",
    "rules", "runs", "sources", "store",
)  # fmt: skip
RESULTS = ("stored", "step", "view")
_HEADER = re.compile(r"^-- (stage|result|requires):\s*(.*?)\s*$", re.MULTILINE)
_CREATE = re.compile(r"CREATE OR REPLACE (VIEW|MACRO) (\w+)", re.IGNORECASE)
_NAMED = re.compile(r"^-- name: (\w+)[ \t]*$", re.MULTILINE)
_COMMENT_LINE = re.compile(r"^[ \t]*--.*\n?", re.MULTILINE)


@dataclass(frozen=True)
class Query:
    name: str
    kind: str  # view | macro
    stage: str
    result: str  # stored | step | view (live queries: view)
    requires: tuple[str, ...]
    sql: str
    path: str = ""  # queries/DOMAIN/NAME.sql, for messages

    @property
    def drop_keyword(self) -> str:
        """What DROP needs for this object as a view or macro (DuckDB's table macros differ)."""
        if self.kind == "view":
            return "VIEW"
        return "MACRO TABLE" if re.search(r"\bAS\s+TABLE\b", self.sql, re.IGNORECASE) else "MACRO"

    @property
    def private(self) -> bool:
        return self.name.startswith("_")

    def create(self, as_: str, temporary: bool) -> str:
        """The statement creating this query as a view, a table or a macro, optionally TEMP."""
        temp = "TEMP " if temporary else ""
        if self.kind == "macro":
            return self.sql.replace("CREATE OR REPLACE MACRO", f"CREATE OR REPLACE {temp}MACRO", 1)
        target = "TABLE" if as_ == "table" else "VIEW"
        return _CREATE.sub(f"CREATE OR REPLACE {temp}{target} {self.name}", self.sql, count=1)

    def into(self, table: str, create: bool) -> str:
        """The statement storing this view's rows in `table` (a qualified name): created from
        them, or appended to it."""
        if create:
            return _CREATE.sub(lambda _: f"CREATE TABLE {table}", self.sql, count=1)  # a literal name
        head = _CREATE.search(self.sql)
        body = re.sub(r"^\s*AS\b", "", self.sql[head.end() :], count=1, flags=re.IGNORECASE)
        return f"INSERT INTO {table} BY NAME {body}"


def queries_dir() -> Path:
    """queries/ at the repository root (editable install) or inside the wheel."""
    for candidate in (Path(__file__).parents[2] / "queries", Path(__file__).parents[1] / "queries"):
        if candidate.is_dir():
            return candidate
    raise UserError("the queries/ folder of nsight-analyze is missing from this installation")


def query_files() -> list[Path]:
    """Every query file, in the order of their names (the folders do not change the load order);
    the statement files of STATEMENT_FOLDERS are not queries of the layer."""
    root = queries_dir()
    files = sorted(
        (p for p in root.rglob("*.sql") if p.relative_to(root).parts[0] not in STATEMENT_FOLDERS),
        key=lambda p: p.name,
    )
    seen: dict[str, Path] = {}
    for f in files:
        if f.stem in seen:
            raise UserError(f"queries/: two queries named {f.stem} ({_shown(seen[f.stem])}, {_shown(f)})")
        seen[f.stem] = f
    return files


def query_path(name: str) -> Path:
    """The file of query `name` (queries/DOMAIN/NAME.sql)."""
    for f in query_files():
        if f.stem == name:
            return f
    raise UserError(f"queries/: no query named {name}")


def _shown(path: Path) -> str:
    return str(path.relative_to(queries_dir().parent))


def parse(path: Path) -> Query:
    text = path.read_text()
    create = _CREATE.search(text)
    if create is None or create.group(2) != path.stem:
        raise UserError(f"{_shown(path)} must create a view or macro named {path.stem}")
    decl = {key: value for key, value in _HEADER.findall(text, 0, create.start())}  # the header
    stage = decl.get("stage", "")
    result = decl.get("result", "view")
    if stage not in STAGES or result not in RESULTS or "requires" not in decl:
        raise UserError(f"{_shown(path)}: its header must declare stage, (result) and requires")
    requires = tuple(r.strip() for r in decl["requires"].split(",") if r.strip() and r.strip() != "(nothing)")
    return Query(path.stem, create.group(1).lower(), stage, result, requires, text, _shown(path))


@functools.lru_cache(maxsize=4)
def _layer(stamp: tuple[tuple[str, float], ...]) -> tuple[Query, ...]:
    queries = {q.name: q for q in (parse(Path(p)) for p, _ in stamp)}
    graph: dict[str, set[str]] = {}
    for q in queries.values():
        deps = {r for r in q.requires if r in queries}
        for dep in deps:
            if q.kind != "macro" and STAGES.index(queries[dep].stage) > STAGES.index(q.stage):
                raise UserError(f"{q.path} ({q.stage}) reads {dep}, computed later ({queries[dep].stage})")
        graph[q.name] = deps
    try:
        order = list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        raise UserError(f"queries/ declare a dependency cycle: {' -> '.join(exc.args[1])}") from None
    return tuple(queries[name] for name in order)


def layer() -> tuple[Query, ...]:
    """Every query, dependencies first (parsed once per process and per change of the files)."""
    return _layer(tuple((str(p), p.stat().st_mtime) for p in query_files()))


def of_stage(stage: str) -> list[Query]:
    return [q for q in layer() if q.stage == stage]


def closure(queries: list[Query], stop: Iterable[str] = ()) -> list[Query]:
    """The queries and every query they need (transitively), in load order. Names in `stop`
    (results already computed) are kept but what they read is not followed."""
    by_name = {q.name: q for q in layer()}
    need: set[str] = set()
    todo = [q.name for q in queries]
    stop = set(stop)
    while todo:
        name = todo.pop()
        if name in need:
            continue
        need.add(name)
        if name not in stop:
            todo.extend(r for r in by_name[name].requires if r in by_name)
    return [q for q in layer() if q.name in need]


def stored(stage: str) -> list[str]:
    """Names of the tables a stage keeps in the workspace."""
    return [q.name for q in of_stage(stage) if q.result == "stored"]


def names_in(text: str) -> set[str]:
    """The queries `text` (a user's SQL) names: what it may read. A name in a string or a comment
    counts too: computing a result nobody reads is the only cost of a false match."""
    words = {w.lower() for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text)}
    return {q.name for q in layer() if q.name in words}


class Statements(dict[str, str]):
    """The named statements of one module's file (name -> SQL text).

    Why: the SQL a rule, compare or export runs lives in queries/ beside the layer it reads, not
    in Python strings. A file is a header of comments, then statements, each after a line
    `-- name: NAME`; a statement's own comment lines are dropped (an evidence's SQL is shown
    folded onto one line, where a comment would swallow the rest), and so is a final `;`. A
    statement may hold `$placeholder`s (string.Template): SQL composed with another statement
    or a threshold, filled by `sql`.
    """

    def sql(self, name: str, /, **values: object) -> str:
        """Statement `name` with its $placeholders filled (a missing value is an error)."""
        return string.Template(self[name]).substitute({k: str(v) for k, v in values.items()})


@functools.cache
def statements(module: str) -> Statements:
    """The statements of queries/FOLDER/.../MODULE.sql, `module` being "FOLDER/.../MODULE" (e.g.
    "rules/launch_bound", "sources/kineto/loader"); read once per process."""
    folder = module.split("/", 1)[0]
    path = queries_dir() / f"{module}.sql"
    if folder not in STATEMENT_FOLDERS or not path.is_file():
        raise UserError(f"queries/: no statement file {module}.sql")
    parts = _NAMED.split(path.read_text())
    found = Statements()
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in found:
            raise UserError(f"{_shown(path)}: two statements named {name}")
        found[name] = _COMMENT_LINE.sub("", body).strip().removesuffix(";").rstrip()
    return found
