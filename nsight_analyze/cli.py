"""The `nsight-analyze` command line: parse, call the library, render.

Each subcommand lives in its own module under `nsight_analyze/commands/`, named like the
command, and exposes a click command named `command`. Modules are imported only when their
command runs (or --help lists them), so `ingest` does not load plotly and the report. This
module only assembles them and turns errors into one clear line and a non-zero exit.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import pkgutil
import signal
import sys
import threading
from collections.abc import Iterator

import click

from . import __version__, commands
from .errors import UserError


class _Group(click.Group):
    """Prints user errors as one line; a traceback only with NSIGHT_ANALYZE_DEBUG=1."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(m.name for m in pkgutil.iter_modules(commands.__path__))

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list from commands.SHORT_HELP: --help imports no command module."""
        rows = [(name, commands.SHORT_HELP.get(name, "")) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.list_commands(ctx):
            return None
        return importlib.import_module(f"{commands.__name__}.{cmd_name}").command

    def main(self, *args, **kwargs):
        from .render.streams import make_safe

        make_safe()  # a non-UTF-8 locale gets ASCII for what it cannot encode, not an error
        return super().main(*args, **kwargs)

    def invoke(self, ctx: click.Context):
        try:
            with _ctrl_c_interrupts_queries():
                return self._invoke(ctx)
        except KeyboardInterrupt:  # also one that arrived while an error was being reported
            click.echo("interrupted", err=True)
            sys.exit(130)

    def _invoke(self, ctx: click.Context):
        from .render.escape import clean

        try:
            result = super().invoke(ctx)
            sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
            return result
        except BrokenPipeError:  # `... | head`: the reader has what it wanted; stop quietly
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the exit flush too
            sys.exit(141)  # 128 + SIGPIPE, as `cat big | head` reports it
        except UserError as exc:
            click.echo(f"error: {clean(exc)}", err=True)  # it may quote a file's name or content
            sys.exit(exc.exit_code)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException, SystemExit):
            raise
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(130)
        except Exception as exc:  # noqa: BLE001 - the last line of defence against tracebacks
            if _interrupted(exc):  # Ctrl-C inside a DuckDB query: its RuntimeError, from the interrupt
                click.echo("interrupted", err=True)
                sys.exit(130)
            if type(exc).__name__ == "OutOfMemoryException":  # DuckDB's, where no step named itself
                from .store.duck import out_of_memory

                click.echo(f"error: {out_of_memory(f'`{ctx.invoked_subcommand}`')}", err=True)
                sys.exit(UserError.exit_code)
            from .store.duck import no_room, no_room_error

            if no_room(exc):
                click.echo(f"error: {clean(no_room_error(exc))}", err=True)
                sys.exit(UserError.exit_code)
            if os.environ.get("NSIGHT_ANALYZE_DEBUG"):
                raise
            if isinstance(exc, OSError) and exc.filename:
                # a path the system refused (read-only, no permission, no such folder): the user's to fix
                what = exc.strerror or type(exc).__name__
                click.echo(f"error: {clean(exc.filename)}: {clean(what)}", err=True)
                sys.exit(UserError.exit_code)
            first = str(exc).splitlines()[0] if str(exc) else ""
            click.echo(
                f"error: {type(exc).__name__}: {clean(first)} (set NSIGHT_ANALYZE_DEBUG=1 for details)",
                err=True,
            )
            sys.exit(1)


@contextlib.contextmanager
def _ctrl_c_interrupts_queries() -> Iterator[None]:
    """While the command runs, a Ctrl-C interrupts every open DuckDB query at once.

    Why: DuckDB's Python client sees a SIGINT only between the tasks the calling thread runs;
    with two or more threads a Ctrl-C during a long query was noticed 13-26 s later or never
    (`sql` ran the query to its end and exited 0). Python's C-level handler writes each signal's
    number to the wakeup fd at once; a thread reading it interrupts the open connections
    (duck.interrupt_all), and the KeyboardInterrupt follows in the main thread as before. Only
    in the main thread (set_wakeup_fd's rule): elsewhere DuckDB's own handling stays."""
    read, write = os.pipe()
    os.set_blocking(write, False)
    try:
        previous = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    except ValueError:  # not the main thread
        os.close(read)
        os.close(write)
        yield
        return

    def watch() -> None:
        try:
            while data := os.read(read, 64):  # empty: the command ended (`write` closed)
                duck = sys.modules.get("nsight_analyze.store.duck")  # none imported: no connection
                if signal.SIGINT in data and duck is not None:
                    duck.interrupt_all()
        finally:
            os.close(read)

    threading.Thread(target=watch, name="ctrl-c", daemon=True).start()
    try:
        yield
    finally:
        signal.set_wakeup_fd(previous)
        os.close(write)


def _interrupted(exc: BaseException) -> bool:
    """Whether `exc` was raised because of a Ctrl-C: DuckDB's Python client turns a
    KeyboardInterrupt during a query into `RuntimeError: Query interrupted`, raised from it, and
    a query `duck.interrupt_all` stopped raises DuckDB's InterruptException."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt) or type(cause).__name__ == "InterruptException":
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="nsight-analyze")
def main() -> None:
    """Where each rank's GPU time goes, whether NCCL hides behind compute, who straggles, MFU/HFU."""
