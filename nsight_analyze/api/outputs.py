"""The Workspace methods that write files: the HTML report and the exports (Chrome trace, Parquet).

Why its own module: these methods check their output path and options before the workspace is
opened (no recompute for a refused OUT) and hand a connection to the writers; api.Workspace
inherits them, so `ws.report()` and `ws.export()` are called as before. The report is the library's
document (report_doc) rendered (render.report): `write_report`, which the command calls too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .tables import PathArg

if TYPE_CHECKING:
    import duckdb

    from ..mfu.options import MfuOptions
    from ..report_doc import StepRange


def render_report(
    con: duckdb.DuckDBPyConnection,
    steps: StepRange | str | None = None,
    mfu_options: MfuOptions | dict[str, Any] | None = None,
    job_note: str | None = None,
) -> str:
    """The HTML report of an open workspace as one string: its document (report_doc), rendered."""
    from ..render.report import render_html
    from ..report_doc import report_document

    return render_html(report_document(con, steps, mfu_options, job_note=job_note))


def write_report(
    con: duckdb.DuckDBPyConnection,
    out_path: PathArg,
    steps: StepRange | str | None = None,
    mfu_options: MfuOptions | dict[str, Any] | None = None,
    job_note: str | None = None,
) -> Path:
    """Write the self-contained HTML report of an open workspace; return its path. A refused
    path fails before the document is read; `job_note` (job_scope.JobScope.note) names the job."""
    from ..render.report import check_output, write_html
    from ..report_doc import report_document

    out = check_output(out_path)
    return write_html(report_document(con, steps, mfu_options, job_note=job_note), out)


class OutputMethods:
    """`Workspace.report` and `Workspace.export` (api.Workspace provides `connect`, `path` and
    `scope`)."""

    path: Path
    scope: Any

    def report(
        self,
        path: PathArg = "report.html",
        steps: str | None = None,
        model_flops_per_step: float | None = None,
        peak_tflops: float | None = None,
        gpu: str | None = None,
    ) -> Path:
        """Write the self-contained HTML report (as `nsight-analyze report -o PATH`); return its path.

        `steps`: 'A:B' (inclusive), 'A:', ':B' or 'N'; MFU options as for `mfu`."""
        from ..gpus.table import validate_gpu
        from ..mfu.options import MfuOptions
        from ..report_doc import READS, parse_steps

        step_range = parse_steps(steps)
        options = MfuOptions(model_flops_per_step=model_flops_per_step, peak_tflops=peak_tflops, gpu=gpu)
        validate_gpu(gpu)
        with self.connect(scope=True, needs=READS) as con:
            note = self.scope.note() if self.scope else None
            return write_report(con, path, step_range, options, note)

    def export(
        self,
        out: PathArg,
        format: Literal["chrome-trace", "parquet"] = "chrome-trace",  # noqa: A002 - the CLI's --format
        steps: str | None = None,
        ranks: str | Sequence[int] | None = None,
        force: bool = False,
        while_writing: Callable[[str], contextlib.AbstractContextManager] | None = None,
    ) -> Any:
        """What `nsight-analyze export OUT --format F` writes; returns what was written (`.counts`).

        chrome-trace: OUT is one .json (.json.gz) file for the Perfetto UI / chrome://tracing, the
        aligned timeline (one process per rank, one track per stream, idle gaps by cause, steps,
        collectives linked across ranks); `steps` 'A:B' keeps those steps only. parquet: OUT is
        a folder of <table>.parquet files and manifest.json. `ranks`: '0,2-3' or [0, 2, 3].
        A refused OUT or bad option fails before the workspace is opened (no recompute first);
        `while_writing(text)` wraps the writing only (the command's spinner)."""
        from ..errors import UserError
        from ..export import parse_ranks, select_ranks
        from ..report_doc import parse_steps

        busy = while_writing or (lambda text: contextlib.nullcontext())
        wanted = parse_ranks(ranks) if ranks is None or isinstance(ranks, str) else _rank_numbers(ranks)
        out = Path(out)
        if format == "parquet":
            from ..export.parquet import check_folder, export_parquet

            if steps is not None:
                raise UserError(
                    "--steps applies to --format chrome-trace only (parquet exports whole tables)"
                )
            check_folder(out, force)
            with self.connect() as con:
                select_ranks(con, wanted)
                with busy(f"exporting Parquet files to {out}"):
                    return export_parquet(con, out, wanted, force=force, workspace=str(self.path.resolve()))
        if format != "chrome-trace":
            raise UserError(f"unknown export format {format!r}: use chrome-trace or parquet")
        from ..export.chrome_trace import READS, check_file, export_chrome_trace
        from ..no_data import require_gpu_data

        step_range = parse_steps(steps)
        check_file(out, force)
        with self.connect(needs=READS) as con:
            chosen = select_ranks(con, wanted)
            require_gpu_data(con, str(self.path), "export")
            with busy(f"writing the Chrome trace {out}"):
                bounds = (step_range.first, step_range.last) if step_range is not None else None
                return export_chrome_trace(con, out, chosen, bounds, force=force)


def _rank_numbers(ranks: Sequence[int]) -> list[int]:
    """`ranks` given as numbers, sorted and unique; anything else is a ValueError naming them (not
    int()'s "invalid literal ... 'x'")."""
    from numbers import Integral

    if not all(isinstance(r, Integral) and not isinstance(r, bool) for r in ranks):
        raise ValueError(f"ranks must be rank numbers (or a string such as '0,2-3'), not {list(ranks)!r}")
    return sorted({int(r) for r in ranks})  # numpy's integers too
