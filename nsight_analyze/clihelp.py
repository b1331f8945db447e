"""Options and checks shared by the subcommands, so every command spells them the same way."""

from __future__ import annotations

import os

import click
import duckdb

from .errors import UserError

DEFAULT_DB = "nsight_analyze.duckdb"
DB_ENV = "NSIGHT_ANALYZE_DB"

# Exit status of a command that found nothing to work on (documented in docs/diagnose.md): distinct
# from 1 (a gate failed: findings, regression), 2 (bad input) and 3 (workspace busy), so that a CI
# gate never passes, and never looks like a plain failure, on a workspace without data.
NO_DATA_EXIT = 4


class NoData(UserError):
    """The workspace holds nothing a command can work on (no GPU operation was ingested)."""

    exit_code = NO_DATA_EXIT


def env_db() -> str | None:
    """$NSIGHT_ANALYZE_DB, or None when it is unset or empty."""
    return os.environ.get(DB_ENV) or None


def default_db() -> str:
    return env_db() or DEFAULT_DB


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


# --gpu: the GPU model, stated by the user for traces that do not record it (no guessing from
# kernel names newer GPUs also run); checked against the peak table by nsight_analyze.gpus.
gpu_option = click.option(
    "--gpu",
    "gpu",
    default=None,
    metavar="NAME",
    help="GPU model of every rank, e.g. 'H100 SXM' (see `gpus --list-models`); sets the dense peak.",
)


def has_gpu_operations(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether a workspace holds any GPU operation: a timeline kernel or memory operation, or an
    Nsight Compute kernel (a workspace of ncu reports has no timeline but can still be diagnosed)."""
    known = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    tables = [t for t in ("kernels", "memops", "ncu_kernels") if t in known]
    return any(con.execute(f"SELECT EXISTS (SELECT 1 FROM {t})").fetchone()[0] for t in tables)


def require_gpu_data(con: duckdb.DuckDBPyConnection, db: str, what: str) -> None:
    """Raise NoData (exit NO_DATA_EXIT) when the workspace has no GPU operation to `what`."""
    if not has_gpu_operations(con):
        raise NoData(
            f"no data to {what} in {db}: the workspace has no GPU operations "
            "(nothing was ingested, or no file had any; see `nsight-analyze info`)"
        )


def require_workspace_data(db: str, what: str) -> None:
    """Open the workspace at `db` (it must exist) just to check it has GPU data to `what`."""
    from .workspace import open_workspace

    con = open_workspace(db, read_only=True, must_exist=True, analyse=False)
    try:
        require_gpu_data(con, db, what)
    finally:
        con.close()
