"""Options and checks shared by the subcommands, so every command spells them the same way."""

from __future__ import annotations

import os

import click

from .errors import UserError
from .no_data import require_gpu_data
from .render.streams import ERRORS

DEFAULT_DB = "nsight_analyze.duckdb"
DB_ENV = "NSIGHT_ANALYZE_DB"


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

# --step-pattern: the NVTX ranges that delimit steps, stored in the workspace's settings
# (commands.summary.apply_step_pattern), so every later command uses the same steps.
step_pattern_option = click.option(
    "--step-pattern",
    metavar="REGEX",
    default=None,
    help="RE2 regex of the NVTX ranges that delimit steps; stored in the workspace (settings "
    "step_pattern), so later commands use it too.",
)

job_option = click.option(
    "--job",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="The job to show when the workspace holds several (`info` lists them) "
    "[default: the one with the most ranks with GPU work].",
)


def require_workspace_data(db: str, what: str) -> None:
    """Open the workspace at `db` (it must exist) just to check it has GPU data to `what`."""
    from .store.workspace import open_workspace

    con = open_workspace(db, read_only=True, must_exist=True, analyse=False)
    try:
        require_gpu_data(con, db, what)
    finally:
        con.close()


# ------------------------------------------------------------------------------------------------
# The output convention every printing command shares (the model: sqlite-utils' output options):
# the same --db, the same --format set, and -o/--output FILE. A command adopts it with one
# decorator, `@output_options(...)`, in place of its own --db/--format options; its callback
# keeps its `db` and `fmt` parameters and prints to stdout as before (--output redirects it).

FORMATS = ("table", "json", "csv", "markdown")
HTML_SUFFIXES = (".html", ".htm")


def _format_help(unsupported: dict[str, str]) -> str:
    text = (
        "Output format: table (the terminal, human units), json (integer nanoseconds, the stable "
        "document), csv (one table, raw values), markdown (tables for PR comments and docs)."
    )
    for fmt, why in unsupported.items():
        text += f" Not --format {fmt} here: {why}."
    return text


def check_format(command: str, fmt: str, unsupported: dict[str, str]) -> None:
    """One clear line (exit 2) for a format the command cannot give."""
    if fmt in unsupported:
        usable = "|".join(f for f in FORMATS if f not in unsupported)
        raise UserError(f"{command} --format {fmt}: {unsupported[fmt]}; use --format {usable}")


def _open_output(path: str):
    """A temporary file beside `path` (replaced into it when the command succeeds)."""
    target = os.path.abspath(path)
    folder = os.path.dirname(target)
    if os.path.isdir(target):
        raise UserError(f"--output {path}: is a folder; give a file name")
    if not os.path.isdir(folder):
        raise UserError(f"--output {path}: folder {folder} does not exist")
    tmp = f"{target}.tmp{os.getpid()}"
    try:
        return target, tmp, open(tmp, "w", encoding="utf-8", errors=ERRORS, newline="")  # noqa: SIM115 - closed by caller
    except OSError as exc:
        raise UserError(f"--output {path}: cannot write: {exc.strerror or exc}") from None


def output_options(
    *,
    unsupported: dict[str, str] | None = None,
    db: bool = True,
    default: str = "table",
    html_alias: bool = False,
):
    """The shared output options: `--db`, `--format table|json|csv|markdown`, `-o/--output FILE`.

    unsupported: {format: why it makes no sense for this command}; the format is still accepted
    by the parser (every command takes the same set), said in --help, and refused with one line
    (exit 2). db=False: a command whose inputs are arguments (compare). html_alias: an --output
    ending in .html/.htm is passed on as the command's `html_out` (compare's HTML diff) instead of
    receiving the printed result. The callback keeps its `db` and `fmt` parameters (not `output`):
    with --output its stdout goes to FILE, written whole when the command ends (a `sys.exit` of a
    gate included), removed when it fails; stderr (progress, notes) stays on the terminal.
    """
    import contextlib
    import functools

    unsupported = dict(unsupported or {})

    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            fmt = kwargs.get("fmt", default)
            output = kwargs.pop("output", None)
            check_format(click.get_current_context().info_name or fn.__name__, fmt, unsupported)
            if html_alias and output and output.lower().endswith(HTML_SUFFIXES):
                if kwargs.get("html_out"):
                    raise UserError(f"--output {output} and --html {kwargs['html_out']}: give one HTML file")
                kwargs["html_out"] = output
                output = None
            if not output:
                return fn(*args, **kwargs)
            target, tmp, fh = _open_output(output)
            keep = False
            try:
                with fh, contextlib.redirect_stdout(fh):
                    try:
                        result = fn(*args, **kwargs)
                    except SystemExit as exc:  # a gate's exit status: the result was printed
                        fh.flush()  # a full disk shows here, before the file is kept
                        keep = exc.code in (None, 0, 1)
                        raise
                    fh.flush()
                    keep = True
                    return result
            finally:
                if keep:
                    os.replace(tmp, target)
                    click.echo(f"wrote {output}", err=True)
                else:
                    with contextlib.suppress(OSError):
                        os.remove(tmp)

        wrapper.output_formats = tuple(f for f in FORMATS if f not in unsupported)  # for tests and --help
        cmd = wrapper
        cmd = click.option(
            "-o",
            "--output",
            "output",
            type=click.Path(dir_okay=False),
            default=None,
            metavar="FILE",
            help="Write the result to FILE instead of stdout"
            + (" (a FILE ending in .html: the HTML diff, as --html)." if html_alias else "."),
        )(cmd)
        cmd = click.option(
            "--format",
            "fmt",
            type=click.Choice(list(FORMATS)),
            default=default,
            show_default=True,
            help=_format_help(unsupported),
        )(cmd)
        if db:
            cmd = db_option(cmd)
        return cmd

    return decorate
