"""Options shared by the subcommands, so every command spells them the same way."""

from __future__ import annotations

import os

import click

DEFAULT_DB = "nsight_analyze.duckdb"


def default_db() -> str:
    return os.environ.get("NSIGHT_ANALYZE_DB", DEFAULT_DB)


db_option = click.option(
    "--db",
    "db",
    type=click.Path(dir_okay=False),
    default=default_db,
    show_default="$NSIGHT_ANALYZE_DB or ./nsight_analyze.duckdb",
    help="Workspace file.",
)


def format_option(*choices: str, default: str = "table"):
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(list(choices)),
        default=default,
        show_default=True,
        help="Output format.",
    )
