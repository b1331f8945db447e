"""`nsight-analyze classify`: re-apply the kernel rules and show how much GPU time they explain."""

from __future__ import annotations

from pathlib import Path

import click

from ..clihelp import output_options
from ..render.output import emit
from ..render.table import PlainTable


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
    from ..classify import COVERAGE_VIEWS, reclassify_all

    by, title = (
        ("other", "Kernels classified as 'other'")
        if list_other
        else ("subcategory", "Kernel time per category and subcategory")
        if by_subcategory
        else ("category", "Kernel time per category")
    )
    with Workspace(db).connect(read_only=False) as con:  # as Workspace.classify, in plain rows
        reclassify_all(con, rules)
        table = PlainTable.from_cursor(con.execute(f"SELECT * FROM {COVERAGE_VIEWS[by]}"))
    emit(table, fmt, title=title)
