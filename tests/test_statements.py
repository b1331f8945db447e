"""The statement files of queries/ (query_layer.statements): the SQL a rule, compare or export runs,
kept beside the query layer instead of in Python strings (issue 54, "SQL in queries/ only").

Why these tests: a statement file is read by name at run time, so a misspelt name, a statement no
module uses or one DuckDB cannot parse would surface only on the trace that reaches it (and a rule
that fails is one line in diagnose's errors, not a failed command). The expected values are the
files themselves and their modules' source text.
"""

from __future__ import annotations

import functools
import re
import string
from collections.abc import Iterator
from itertools import combinations, product
from pathlib import Path

import duckdb
import pytest

import nsight_analyze
from nsight_analyze.errors import UserError
from nsight_analyze.store import query_layer
from nsight_analyze.store.query_layer import STATEMENT_FOLDERS, Statements, queries_dir, statements

PACKAGE = Path(nsight_analyze.__file__).parent


def statement_files() -> list[Path]:
    return sorted(p for folder in STATEMENT_FOLDERS for p in (queries_dir() / folder).rglob("*.sql"))


def key_of(path: Path) -> str:
    """What a module passes to `statements`: the file's path under queries/, without `.sql`."""
    return path.relative_to(queries_dir()).with_suffix("").as_posix()


def module_of(path: Path) -> Path:
    """nsight_analyze/FOLDER/.../MODULE.py, or .../FOLDER/__init__.py for queries/.../FOLDER/FOLDER.sql,
    or nsight_analyze/MODULE.py for queries/answers/MODULE.sql."""
    parts = path.relative_to(queries_dir()).with_suffix("").parts
    if parts[0] == "answers":
        return PACKAGE / f"{parts[-1]}.py"
    folder = PACKAGE.joinpath(*parts[:-1])
    return folder / "__init__.py" if path.stem == path.parent.name else folder / f"{path.stem}.py"


@functools.cache
def package_sources() -> tuple[str, ...]:
    """The text of every module of the package, read once for all the statement files."""
    return tuple(p.read_text() for p in sorted(PACKAGE.rglob("*.py")))


def users(path: Path) -> str:
    """The source of every module that reads the statement file (its own and any importer)."""
    key = f'"{key_of(path)}"'
    return "".join(text for text in package_sources() if key in text)


def test_each_statement_file_belongs_to_a_module_that_reads_it():
    for path in statement_files():
        module = module_of(path)
        assert module.is_file(), f"{path.name}: no module {module.relative_to(PACKAGE.parent)}"
        assert f'statements("{key_of(path)}")' in module.read_text(), (
            f"{module.name} does not read {key_of(path)}.sql"
        )


# How a statement may stand: whole, or as the piece of one a module joins in (a select item, a
# filter, a join condition, a whole join clause, the branches of a CASE).
PIECES = (
    "{}",
    "SELECT {} FROM t",
    "SELECT * FROM t WHERE {}",
    "SELECT * FROM t WHERE true {}",
    "SELECT * FROM t JOIN u {}",
    "SELECT * FROM t x {}",
    "SELECT CASE {} END",
)


# What a placeholder stands for: a name (a catalog, a column, a value), a subquery (composed SQL),
# the rows of a VALUES list, the branches of a CASE, a condition added or not (AND ...), the
# column definitions of a CREATE TABLE.
STAND_INS = ("x1", "(SELECT 1)", "(1)", "WHEN 1 THEN 1", "", "x1 INTEGER")


def stand_in_choices(holes: int, most_differing: int = 2) -> Iterator[tuple[str, ...]]:
    """Choices of STAND_INS for `holes` placeholders, the likeliest first: all of one kind, then
    those with one placeholder of another kind, then two (a loader's statement has up to ~20
    placeholders, mostly of one kind; trying every choice, 5^20, would never end)."""
    if holes <= 4:  # every choice: at most 625
        yield from product(STAND_INS, repeat=holes)
        return
    for differing in range(most_differing + 1):
        for base in STAND_INS:
            for where in combinations(range(holes), differing):
                for kinds in product([k for k in STAND_INS if k != base], repeat=differing):
                    choice = [base] * holes
                    for i, kind in zip(where, kinds, strict=True):
                        choice[i] = kind
                    yield tuple(choice)


def parses(con: duckdb.DuckDBPyConnection, sql: str) -> bool:
    """Whether DuckDB's parser takes `sql` as one statement or one of its PIECES."""
    for piece in PIECES:
        try:
            if len(con.extract_statements(piece.format(sql))) == 1:
                return True
        except duckdb.ParserException:
            pass
    return False


@pytest.mark.parametrize("path", statement_files(), ids=key_of)
def test_every_statement_is_used_and_parses(path: Path):
    """Each named statement appears in the source of a module that reads the file (`SQL["name"]`,
    `SQL.sql("name", ...)`), and DuckDB's parser takes it, whole or as a piece, with some choice of
    STAND_INS for its $placeholders."""
    found = statements(key_of(path))
    assert found, f"{path.name} holds no `-- name:` statement"
    source = users(path)
    con = duckdb.connect()
    for name, sql in found.items():
        assert re.search(rf"""["']{name}["']""", source), f"{path.name}: {name} is never used"
        holes = sorted(
            {m.group("named") or m.group("braced") for m in string.Template.pattern.finditer(sql)} - {None}
        )
        fills = (
            found.sql(name, **dict(zip(holes, kinds, strict=True))) for kinds in stand_in_choices(len(holes))
        )
        assert any(parses(con, f) for f in fills), f"{path.name}: DuckDB cannot parse {name}"


def test_every_statement_a_module_names_exists():
    for path in statement_files():
        module = module_of(path)
        named = set(re.findall(r"""\bSQL(?:\[|\.sql\()["'](\w+)["']""", module.read_text()))
        missing = named - set(statements(key_of(path)))
        assert not missing, f"{module.name} names statements {sorted(missing)} that {path.name} lacks"


def test_comments_and_the_final_semicolon_are_not_part_of_a_statement(tmp_path, monkeypatch):
    """A hand-made file: what the loader keeps (the statement's SQL lines) and refuses (a name twice,
    an unknown file), and that a missing placeholder value is an error, not an empty string."""
    folder = tmp_path / "rules"
    folder.mkdir()
    (folder / "demo.sql").write_text(
        "-- the demo module's statements\n\n-- name: first\n-- what it returns\nSELECT 1\n  -- inside\n"
        "FROM t WHERE x > $limit;\n\n-- name: second\nSELECT '$$'\n"
    )
    (folder / "twice.sql").write_text("-- name: a\nSELECT 1\n-- name: a\nSELECT 2\n")
    monkeypatch.setattr(query_layer, "queries_dir", lambda: tmp_path)
    statements.cache_clear()
    try:
        demo = statements("rules/demo")
        assert isinstance(demo, Statements)
        assert dict(demo) == {"first": "SELECT 1\nFROM t WHERE x > $limit", "second": "SELECT '$$'"}
        assert demo.sql("first", limit=5) == "SELECT 1\nFROM t WHERE x > 5"
        assert demo.sql("second") == "SELECT '$'"
        with pytest.raises(KeyError):
            demo.sql("first")
        with pytest.raises(UserError, match="two statements named a"):
            statements("rules/twice")
        with pytest.raises(UserError, match="no statement file"):
            statements("rules/absent")
        with pytest.raises(UserError, match="no statement file"):
            statements("steps/steps")  # a layer folder, not a statement folder
    finally:
        statements.cache_clear()


def test_statement_folders_are_not_queries_of_the_layer():
    assert not {p.parent.name for p in query_layer.query_files()} & set(STATEMENT_FOLDERS)
