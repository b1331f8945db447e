"""`nsight-analyze classify`: re-apply the kernel rules and show how much GPU time they explain."""

from __future__ import annotations

from pathlib import Path

import click
import duckdb
import pandas as pd

from ..clihelp import output_options
from ..render.output import emit


def coverage(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """Kernel time per category and subcategory, all ranks together; `other` is what no rule explains."""
    return con.execute(
        """
        SELECT category, subcategory, count(*) AS kernels, count(DISTINCT name) AS names,
               CAST(sum(end_ns - start_ns) AS BIGINT) AS total_ns,
               100.0 * sum(end_ns - start_ns) / NULLIF(sum(sum(end_ns - start_ns)) OVER (), 0) AS pct
        FROM kernels
        GROUP BY category, subcategory
        ORDER BY CASE category WHEN 'compute' THEN 0 WHEN 'memory' THEN 1 WHEN 'comms' THEN 2 ELSE 3 END,
                 total_ns DESC, subcategory
        """
    ).df()


def category_totals(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """Kernel time per category, all ranks together."""
    return con.execute(
        """
        SELECT category, count(*) AS kernels, count(DISTINCT name) AS names,
               CAST(sum(end_ns - start_ns) AS BIGINT) AS total_ns,
               100.0 * sum(end_ns - start_ns) / NULLIF(sum(sum(end_ns - start_ns)) OVER (), 0) AS pct
        FROM kernels
        GROUP BY category
        ORDER BY CASE category WHEN 'compute' THEN 0 WHEN 'memory' THEN 1 WHEN 'comms' THEN 2 ELSE 3 END
        """
    ).df()


def other_kernels(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """Names left in `other`, largest first: the candidates for a --rules line."""
    return con.execute(
        """
        SELECT name, subcategory, count(*) AS instances, count(DISTINCT rank) AS ranks,
               CAST(sum(end_ns - start_ns) AS BIGINT) AS total_ns,
               100.0 * sum(end_ns - start_ns) / NULLIF((SELECT sum(end_ns - start_ns) FROM kernels), 0) AS pct
        FROM kernels
        WHERE category = 'other'
        GROUP BY name, subcategory
        ORDER BY total_ns DESC, name
        """
    ).df()


@click.command("classify")
@click.option(
    "--rules",
    "rules",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="CSV of extra rules (priority,pattern,category,subcategory,note); they win over the built-in "
    "ones and are kept in the workspace for later ingests.",
)
@click.option("--list-other", is_flag=True, help="List the kernel names no rule classifies.")
@click.option("--by-subcategory", is_flag=True, help="Break the coverage down by subcategory.")
@output_options()
def command(db: str, rules: Path | None, list_other: bool, by_subcategory: bool, fmt: str) -> None:
    """Re-classify every kernel of the workspace and show kernel time per category.

    Python: nsight_analyze.open(DB).classify(rules, by="category"|"subcategory"|"other")."""
    from ..api import Workspace

    by, title = (
        ("other", "Kernels classified as 'other'")
        if list_other
        else ("subcategory", "Kernel time per category and subcategory")
        if by_subcategory
        else ("category", "Kernel time per category")
    )
    emit(Workspace(db).classify(rules, by=by), fmt, title=title)
