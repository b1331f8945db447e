"""Kernel classification: a regex rules table decides each kernel's category and subcategory.

The name is the only thing every trace format has, so a name heuristic is the baseline
(Nsight Compute data, where ingested, may override it later). Matching is done once per
DISTINCT name inside DuckDB with one CASE expression whose patterns are constants (each
compiled once), then joined back, so millions of kernel rows cost one regex pass over a
few thousand names. The statements are those of queries/answers/classify.sql; the rules'
CASE branches and inline VALUES rows are pieces of it, filled per rule.

Rules are read from `data/kernel_rules.csv` (columns `priority,pattern,category,
subcategory,note`; RE2 syntax as in DuckDB's `regexp_matches`, case-sensitive unless the
pattern says `(?i)`). The first matching rule wins: user rules (from `--rules FILE`)
before the built-in ones, each set in ascending priority, ties in file order. A name no
rule matches is `other` with a NULL subcategory; the short name stands in where the
demangled name is missing.

What a name cannot tell: an application's own kernels (CloverLeaf's `clover::par_ranged2d_
kernel<...>`, Mordred's `probe_group_by_GPU2`, a user's `saxpy`-like loop with a made-up name)
carry no library marker, so they stay `other` unless the user adds a rule. Compiler-generated
loops (stdpar/thrust `_kernel_agent`, OpenMP `__omp_offloading_`/`nvkernel_`, OpenACC
`*_NN_gpu`) are recognisable and classed `compute`/`offload`.
"""

from __future__ import annotations

import csv
import hashlib
import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from .errors import UserError
from .store.duck import has_relation, sql_string
from .store.query_layer import statements

if TYPE_CHECKING:  # classification is SQL; only classify_names hands back a DataFrame
    import pandas as pd

BUILTIN_RULES = Path(__file__).parent / "data" / "kernel_rules.csv"
CATEGORIES = ("compute", "memory", "comms", "other")
COLUMNS = ("priority", "pattern", "category", "subcategory", "note")
# settings row that keeps the user's rules, so a later ingest classifies new files the same way
USER_RULES_KEY = "kernel_rules_user"

SQL = statements("answers/classify")


@dataclass(frozen=True)
class Rule:
    priority: float
    pattern: str
    category: str
    subcategory: str | None
    note: str
    origin: str  # "file:line", for error messages and --list-other


def parse_rules(text: str, origin: str) -> list[Rule]:
    """Rules of one CSV text, in file order; a malformed row is a user error naming its line."""
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None or tuple(h.strip().lower() for h in header[: len(COLUMNS)]) != COLUMNS:
        raise UserError(f"{origin}: the first line must be the header {','.join(COLUMNS)}")
    rules: list[Rule] = []
    for line_no, row in _rows(reader, origin):
        if not row or all(not cell.strip() for cell in row) or row[0].lstrip().startswith("#"):
            continue
        row = [cell.strip() for cell in row] + [""] * (len(COLUMNS) - len(row))
        priority, pattern, category, subcategory, note = row[: len(COLUMNS)]
        where = f"{origin}:{line_no}"
        try:
            prio = float(priority)
        except ValueError:
            raise UserError(f"{where}: priority {priority!r} is not a number") from None
        if not pattern:
            raise UserError(f"{where}: empty pattern")
        if category not in CATEGORIES:
            raise UserError(f"{where}: category {category!r} is not one of {', '.join(CATEGORIES)}")
        rules.append(Rule(prio, pattern, category, subcategory or None, note, where))
    return rules


def _rows(reader, origin: str) -> Iterator[tuple[int, list[str]]]:
    """(line the row starts on, row) after the header. A row holding a line break is a quote
    opened and never closed: it swallowed the lines after it, and the row was blamed for an
    empty category instead."""
    start = reader.line_num + 1
    try:
        for row in reader:
            if reader.line_num != start:
                raise csv.Error("a quote opened here is not closed on this line")
            yield start, row
            start = reader.line_num + 1
    except csv.Error as exc:
        raise UserError(f"{origin}:{start}: not a CSV row ({exc})") from None


def _read_rules_file(path: Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot read rules file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise UserError(
            f"rules file {path} is not UTF-8 text ({exc.reason} at byte {exc.start}): save it as UTF-8 CSV"
        ) from None


def _stored_user_rules(con: duckdb.DuckDBPyConnection) -> str | None:
    try:
        row = con.execute(f"SELECT value FROM settings WHERE key = {sql_string(USER_RULES_KEY)}").fetchone()
    except duckdb.Error:
        return None
    return row[0] if row else None


def ordered_rules(user_text: str | None, user_origin: str = "user rules") -> list[Rule]:
    """User rules first, then built-in ones; each set sorted by priority (stable: file order on ties)."""
    user = parse_rules(user_text, user_origin) if user_text else []
    builtin = parse_rules(_read_rules_file(BUILTIN_RULES), "kernel_rules.csv")
    return sorted(user, key=lambda r: r.priority) + sorted(builtin, key=lambda r: r.priority)


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


_valid_patterns: set[str] = set()  # checked in this process: RE2 accepts them


def _check_patterns(con: duckdb.DuckDBPyConnection, rules: list[Rule]) -> None:
    """One clear error for a rule RE2 rejects (checked once per pattern and process: the
    ingest classifies every file's kernels with the same rules)."""
    for rule in rules:
        if rule.pattern in _valid_patterns:
            continue
        try:
            con.execute(SQL.sql("pattern_check", pattern=_literal(rule.pattern))).fetchone()
        except duckdb.Error as exc:
            first = str(exc).splitlines()[0]
            raise UserError(
                f"{rule.origin}: pattern {rule.pattern!r} is not a valid RE2 regex: {first}"
            ) from None
        _valid_patterns.add(rule.pattern)


def _rule_index_sql(rules: list[Rule], column: str) -> str:
    """CASE expression giving the index of the first rule matching `column` (NULL: no rule)."""
    if not rules:
        return SQL["no_rule_index"]
    whens = " ".join(
        SQL.sql("rule_when", column=column, pattern=_literal(rule.pattern), index=i)
        for i, rule in enumerate(rules)
    )
    return SQL.sql("rule_index", whens=whens)


def _rules_values(rules: list[Rule]) -> str:
    """The rules as an inline VALUES table (rule_idx, category, subcategory, rule)."""
    if not rules:
        return SQL["no_rules"]
    values = ", ".join(
        SQL.sql(
            "rule_row",
            index=i,
            category=_literal(r.category),
            subcategory="NULL" if r.subcategory is None else _literal(r.subcategory),
            origin=_literal(r.origin),
        )
        for i, r in enumerate(rules)
    )
    return SQL.sql("rules_values", rows=values)


_NAME_MAP_CACHE = "_name_map_cache"  # TEMP: names this connection classified, per rule set


def build_name_map(
    con: duckdb.DuckDBPyConnection, names_sql: str, table: str, rules_path: Path | None = None
) -> None:
    """Create TEMP TABLE `table` (name, category, subcategory, rule): one row per distinct
    name of `names_sql` (a query with a `name` column), classified in one regex pass.

    Without `rules_path` the user rules stored in the workspace apply, like at ingest.
    Names are classified once per connection and rule set: an ingest's files share most kernel
    names, and the regex pass over long templated names is the costly part (~70 ms for a
    Kineto rank's 200 names of 300 characters).
    """
    user_text = _read_rules_file(rules_path) if rules_path else _stored_user_rules(con)
    rules = ordered_rules(user_text, str(rules_path) if rules_path else "stored user rules")
    _check_patterns(con, rules)
    key = _literal(
        hashlib.sha256(
            repr([(r.pattern, r.category, r.subcategory, r.origin) for r in rules]).encode()
        ).hexdigest()
    )
    con.execute(SQL.sql("name_map_cache", cache=_NAME_MAP_CACHE))
    fresh = con.execute(SQL.sql("fresh_names", names=names_sql, cache=_NAME_MAP_CACHE, key=key)).fetchone()[0]
    if fresh:  # binding the rules' CASE costs as much as running it: only for new names
        con.execute(
            SQL.sql(
                "classify_fresh_names",
                cache=_NAME_MAP_CACHE,
                rule_index=_rule_index_sql(rules, "coalesce(name, '')"),
                key=key,
                rules=_rules_values(rules),
            )
        )
    con.execute("DROP TABLE _name_map_fresh")
    con.execute(SQL.sql("name_map", table=table, cache=_NAME_MAP_CACHE, key=key, names=names_sql))


def classify_names(
    con: duckdb.DuckDBPyConnection, names: list[str], rules_path: Path | None = None
) -> pd.DataFrame:
    """Category, subcategory and deciding rule of each given name (sorted by name)."""
    con.execute(SQL["classify_input"], [names])
    try:
        build_name_map(con, SQL["input_names"], "_classify_map", rules_path)
        return con.execute("SELECT * FROM _classify_map ORDER BY name").df()
    finally:
        con.execute("DROP TABLE IF EXISTS _classify_input")
        con.execute("DROP TABLE IF EXISTS _classify_map")


def store_user_rules(con: duckdb.DuckDBPyConnection, rules_path: Path) -> None:
    """Keep the user's rules in the workspace so that every later ingest applies them too."""
    text = _read_rules_file(rules_path)
    _check_patterns(con, ordered_rules(text, str(rules_path)))
    con.execute(
        SQL["store_user_rules"], [USER_RULES_KEY, text, "CSV text of the user's kernel rules (--rules)"]
    )


def classify_kernels(con: duckdb.DuckDBPyConnection, rules_path: Path | None = None) -> None:
    """Fill category/subcategory of kernels whose category IS NULL (those just loaded by a
    source that does not classify on insert), and stamp the rules (stamp_rules). Without
    `rules_path`, the user rules stored by `--rules` apply, so later files are classified like
    earlier ones. An ingest calls it from one place: rank_task.load_file, per file."""
    _classify_rows(con, SQL["unclassified_kernels"], rules_path)
    stamp_rules(con)


# Above this share of kernel time in category 'other', `summary` prints a note and `diagnose` a
# capture finding (threshold `unclassified_max_pct`): a fifth of the kernel time that could be
# compute or memory moves either share by up to 20 points, more than the gaps the memory-bound
# and compute-efficiency findings are read against.
UNCLASSIFIED_WARN_PCT = 20.0


def unclassified_share(con: duckdb.DuckDBPyConnection) -> tuple[float, int] | None:
    """(% of kernel time no rule classifies, its distinct kernel names), or None without kernel time.

    Why: the partition's compute and memory columns are the kernel rules' verdicts; time in
    'other' is neither, so a large share makes that split (and the findings read from it)
    uncertain. The share is over all ranks, like `classify`'s table."""
    if has_relation(con, "kernel_summary"):
        rows = SQL["kernel_summary_times"]
    elif has_relation(con, "kernels"):
        rows = SQL["kernel_times"]
    else:
        return None
    pct, names = con.execute(SQL.sql("unclassified_share", rows=rows)).fetchone()
    return None if pct is None else (float(pct), int(names))


def unclassified_note(pct: float, names: int) -> str:
    """The one wording of the low-coverage warning (summary's note, diagnose's finding)."""
    return (
        f"{pct:.1f} % of kernel time is unclassified ({names} kernel name(s) in category other: no "
        "rule says what they compute): the partition's compute/memory split is uncertain; see "
        "`nsight-analyze classify --list-other` and add rules with `classify --rules FILE`"
    )


# What `classify` shows, by its `by`: documented live views (queries/kernels/kernel_category_totals.sql,
# kernel_coverage.sql, kernel_unclassified.sql), so `nsight-analyze sql` reaches them too
COVERAGE_VIEWS = {
    "category": "kernel_category_totals",
    "subcategory": "kernel_coverage",
    "other": "kernel_unclassified",
}


def reclassify_all(con: duckdb.DuckDBPyConnection, rules_path: Path | None) -> None:
    """Re-apply the rules to every kernel; a given rules file is stored for later ingests.

    With `rules_path=None` the stored user rules (if any) are kept and re-applied.
    """
    if rules_path is not None:
        store_user_rules(con, rules_path)
    _classify_rows(con, "true", None)
    stamp_rules(con)


def stamp_rules(con: duckdb.DuckDBPyConnection) -> None:
    """Record the built-in rules the kernels were classified with (`meta.classified_with`). The
    analysis stamp covers it: re-classifying with other built-in rules (a new version) makes the
    stored results stale; user rules live in `settings`, which the stamp covers already.

    Called alone where kernels are classified elsewhere but the stamp must hold here: an ingest's
    workspace before its rank pipeline takes the stamp, and after landing what workers classified."""
    digest = hashlib.sha256(BUILTIN_RULES.read_bytes()).hexdigest()
    con.execute(SQL.sql("stamp_rules", digest=sql_string(digest)))


def _classify_rows(con: duckdb.DuckDBPyConnection, where: str, rules_path: Path | None) -> None:
    """Classify the kernels matching `where` by moving them out and back in, joined to a
    per-name map: DuckDB's UPDATE of millions of rows is an order of magnitude slower."""
    if not con.execute(f"SELECT count(*) FROM kernels WHERE {where}").fetchone()[0]:
        return
    build_name_map(con, SQL.sql("kernel_names", where=where), "_fresh_map", rules_path)
    con.execute(SQL.sql("fresh_kernels", where=where))
    con.execute(SQL.sql("delete_fresh_kernels", where=where))
    con.execute(SQL["insert_classified_kernels"])
    con.execute("DROP TABLE _fresh_kernels")
    con.execute("DROP TABLE _fresh_map")
