"""Feedback on long work (issue 16, item 10): a progress bar on a terminal, nothing elsewhere.

ingest (its files, then "computing the analysis"), report and compare draw a transient rich bar
or spinner on stderr when stderr is a terminal; in pipes, files, CliRunner and CI logs no
progress character and no ANSI escape reaches stdout or stderr. The terminal case runs the real
CLI with its stderr on a pseudo-terminal (stdlib `pty`), its stdout on a pipe.

The traces are two ranks of the repository's sample_traces: neither ../shared nor a GPU needed.
"""

from __future__ import annotations

import io
import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import ROOT

from nsight_analyze.cli import main
from nsight_analyze.commands import ingest as ingest_command
from nsight_analyze.commands.ingest import IngestProgress, Spinner, progress_wanted
from nsight_analyze.ingest.run import ingest

SAMPLE = ROOT / "sample_traces"
RANKS = [SAMPLE / "report_rank0.sqlite", SAMPLE / "report_rank1.sqlite"]
# What a rich bar or spinner leaves: escapes, carriage returns, the bar's and the spinner's glyphs.
PROGRESS = re.compile("[\x1b\r━╸╺\u2800-\u28ff]")


def env() -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k != "NSIGHT_ANALYZE_DB"}
    out.update(TERM="xterm-256color", COLUMNS="120")
    out.pop("NO_COLOR", None)
    return out


@pytest.fixture(scope="module")
def traces(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("traces")
    for path in RANKS:
        (folder / path.name).symlink_to(path)
    return folder


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, traces) -> Path:
    db = tmp_path_factory.mktemp("ws") / "ws.duckdb"
    ingest([traces], db)
    return db


def run_with_pty_stderr(args: list[str], cwd: Path, timeout: float = 300) -> tuple[str, str, int]:
    """Run the CLI with stderr on a pseudo-terminal and stdout on a pipe: (stdout, terminal, rc)."""
    pty = pytest.importorskip("pty")
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "nsight_analyze", *args],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave, cwd=cwd, env=env(),
    )  # fmt: skip
    os.close(slave)
    seen, deadline = [], time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal's last end
                break
            if not data:
                break
            seen.append(data)
        stdout = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))[0]
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    return stdout.decode(), b"".join(seen).decode(errors="replace"), proc.returncode


# --------------------------------------------------------------------------------------------
# The decision: a terminal on stderr, and one that can move its cursor


class _Stream(io.StringIO):
    def __init__(self, tty: bool):
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_progress_only_when_stderr_is_a_terminal(monkeypatch):
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.setattr(sys, "stderr", _Stream(tty=True))
    assert progress_wanted() is True
    monkeypatch.setattr(sys, "stderr", _Stream(tty=False))  # a pipe, a file, a CI log
    assert progress_wanted() is False
    closed = io.StringIO()
    closed.close()  # isatty() on a closed stream raises ValueError
    monkeypatch.setattr(sys, "stderr", closed)
    assert progress_wanted() is False
    monkeypatch.setattr(sys, "stderr", _Stream(tty=True))
    monkeypatch.setenv("TERM", "dumb")
    assert progress_wanted() is False


def test_no_bar_is_started_without_a_terminal(monkeypatch):
    monkeypatch.setattr(sys, "stderr", _Stream(tty=False))
    with Spinner("working") as spinner:
        spinner.say("still working")
        assert spinner.bar is None
    with IngestProgress(enabled=True) as progress:
        assert progress.bar is None
        progress.analysis(0, 0)  # no bar: nothing to draw, nothing printed
    assert sys.stderr.getvalue() == ""


def test_ingest_bar_follows_the_analysis(monkeypatch, tmp_path):
    """After the files, the same bar says "computing the analysis": its rank batches, the job."""
    from rich.console import Console

    screen = io.StringIO()
    monkeypatch.setattr(ingest_command, "progress_wanted", lambda: True)
    monkeypatch.setattr(ingest_command, "_console", lambda: Console(file=screen, force_terminal=True))
    batches: list[tuple[int, int]] = []
    with IngestProgress(enabled=True) as progress:

        def analysis(done: int, total: int) -> None:
            batches.append((done, total))
            progress.analysis(done, total)

        ingest(RANKS[:1], tmp_path / "ws.duckdb", progress=progress.update, analysis_progress=analysis)
        shown = [(t.fields["phase"], t.description) for t in progress.bar.tasks if t.visible]
    assert batches == [(1, 1)]  # one rank: one batch
    assert shown == [("computing the analysis", "the job: clocks, collectives, waits")]
    assert "computing the analysis" in screen.getvalue()


# --------------------------------------------------------------------------------------------
# Pipes and CliRunner: no progress characters, no escapes


def test_ingest_in_pipes_prints_plain_lines(tmp_path, traces):
    result = subprocess.run(
        [sys.executable, "-m", "nsight_analyze", "ingest", str(traces), "--db", str(tmp_path / "ws.duckdb")],
        capture_output=True, text=True, env=env(), timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert not PROGRESS.search(result.stdout), result.stdout
    assert not PROGRESS.search(result.stderr), result.stderr
    assert "ok: " in result.stderr  # the plain one line per file


@pytest.mark.parametrize(
    "args",
    [
        ["report", "-o", "{tmp}/r.html"],
        ["compare", "{db}", "{db}", "--no-findings", "--fail-on-regression", "5"],
    ],
    ids=["report", "compare"],
)
def test_report_and_compare_without_a_terminal_stay_quiet(workspace, tmp_path, args):
    args = [a.format(tmp=tmp_path, db=workspace) for a in args]
    if args[0] == "report":
        args += ["--db", str(workspace)]
    result = CliRunner().invoke(main, args, env={"NSIGHT_ANALYZE_DB": None, "COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert not PROGRESS.search(result.stdout), result.stdout
    assert not PROGRESS.search(result.stderr), result.stderr


# --------------------------------------------------------------------------------------------
# A terminal on stderr: the bar appears there, stdout stays clean


def test_ingest_on_a_terminal_draws_the_bar_and_the_analysis(tmp_path, traces):
    stdout, screen, rc = run_with_pty_stderr(
        ["ingest", str(traces), "--db", str(tmp_path / "ws.duckdb")], tmp_path
    )
    assert rc == 0, screen
    assert "\x1b[" in screen and "━" in screen
    assert "ingest" in screen and "computing the analysis" in screen
    assert "workspace " in stdout and not PROGRESS.search(stdout)


def test_report_on_a_terminal_draws_a_spinner(tmp_path, workspace):
    out = tmp_path / "r.html"
    stdout, screen, rc = run_with_pty_stderr(["report", "--db", str(workspace), "-o", str(out)], tmp_path)
    assert rc == 0, screen
    assert "writing the report" in screen and "\x1b[" in screen
    assert stdout.startswith("report: ") and not PROGRESS.search(stdout)
    assert out.stat().st_size > 0


def test_compare_on_a_terminal_draws_a_spinner(tmp_path, workspace):
    args = ["compare", str(workspace), str(workspace), "--no-findings", "--format", "json"]
    stdout, screen, rc = run_with_pty_stderr(args, tmp_path)
    assert rc == 0, screen
    assert "compare: comparing the runs" in screen and "\x1b[" in screen
    assert stdout.startswith("{") and not PROGRESS.search(stdout)
