"""The job's aligned GPU timeline as a Chrome Trace Event Format file (chrome://tracing, Perfetto UI).

Why: the HTML report's timeline keeps a budget of operations; engineers who need every kernel
of every rank, zoomable, with the idle causes and the collectives linked across ranks, open
this file in the Perfetto UI instead. It is also a Kineto-shaped trace: nsight-analyze's own
PyTorch-profiler reader ingests it again (one rank per file, so an export of one rank comes
back as that rank), which the tests use to check nothing is lost.

Layout (one process per rank, `pid` = rank; one thread per CUDA stream, `tid` = stream id):
  kernels         ph X, cat "kernel"; args.category = compute | memory | comms | other (the
                  colour, via `cname`), correlation, device, stream, grid/block where known
  memory ops      ph X, cat "gpu_memcpy" / "gpu_memset", named as Kineto names them
                  ("Memcpy HtoD (Pinned -> Device)") so the reader recovers kind and memory kinds;
                  args.category = copies and the copies colour: the partition's copies_ns, apart
                  from the memory-bound kernels (category memory, memory_kernels_ns), as the
                  summary, compare and the report split them (partition.py MEMORY_PARTS)
  idle            ph X on the rank's "idle" track: the stored `gaps` pieces of the whole-capture
                  window (step IS NULL), named by their cause
  steps           ph X on the rank's "steps" track: the stored `steps` windows
  collectives     flow events (ph s / f, one `id` per pair) chaining the kernels of each matched
                  instance (merge_coll_members) in arrival order, so the last arrow points at the
                  rank everybody waited for; bound to the kernel slices (`bp: e`)
`cat` stays Kineto's ("kernel", ...) because the reader dispatches on it; the category is in
`args` and in the colour. Times are the aligned clock (ranks.clock_offset_ns added), `ts` and
`dur` in µs with 3 decimals: exact ns, which the reader turns back into the same integers. A
slice whose recorded end precedes its start (a tracer clock error, which the ingest warns of)
has `dur` 0 and its recorded duration in `args` ("recorded duration ns"): viewers reject or
misdraw negative durations.

Every event is built by DuckDB (json_object over the tables: the statements of
queries/export/chrome_trace.sql) and streamed to the file in Arrow batches: no Python loop per
event, memory bounded by a batch, for millions of events.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import duckdb

from .. import __version__
from ..errors import UserError
from ..store.duck import out_of_memory
from ..store.query_layer import statements
from . import replace_atomically

SQL = statements("export/chrome_trace")

READS = ("gaps", "collectives", "merge_coll_members")  # computed on first read (analysis.refresh)

STEPS_TID = 2_000_000_000  # the steps and idle tracks: far above any CUDA stream id
IDLE_TID = STEPS_TID + 1
BATCH_ROWS = 65_536  # events per Arrow batch written at once
# |aligned ns| below this: ns / 1000 as a double prints exactly (<= 15 significant digits); above
# (epoch-based clocks), DECIMAL(38, 3) keeps every digit, at some cost.
DOUBLE_EXACT_NS = 10**15

# Chrome trace-viewer's reserved colour names (Perfetto picks its own colours by name). `cname`
# takes only these names, not a hex colour, so each category gets the reserved name nearest the
# palette's (render/palette.py CATEGORY): memory orange (iowait, 255,140,0), copies light yellow
# (cq_build_running, 255,255,119; the palette's #ffd166), so copies never read as memory kernels.
# The statements' CASEs (kernel_events, idle_events) list these keys; the names are filled in.
CNAME = {
    "compute": "thread_state_running",
    "memory": "thread_state_iowait",
    "copies": "cq_build_running",
    "comms": "rail_response",
}
IDLE_CNAME = {
    "input_stall": "terrible",
    "sync_stall": "bad",
    "launch_gap": "yellow",
    "host_bound": "olive",
    "idle_other": "grey",
}
STEP_CNAME = "generic_work"

StepBounds = tuple[int | None, int | None]  # inclusive first, last step (None: open)


@dataclass
class TraceExport:
    """What `export_chrome_trace` wrote: event counts by kind (the command prints them)."""

    path: Path
    ranks: list[int]
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def events(self) -> int:
        return sum(self.counts.values())


def _queries(con: duckdb.DuckDBPyConnection, steps: StepBounds | None) -> dict[str, str]:
    """One SELECT per kind of event, each returning one VARCHAR column of JSON objects (the
    statements of queries/export/chrome_trace.sql).

    First defines the TEMP macro `_export_us` they call, which turns integer ns into exact µs
    with 3 decimals as cheaply as the clock allows: a double below DOUBLE_EXACT_NS, a DECIMAL
    above (epoch-based clocks)."""
    (far,) = con.execute(SQL["far_clock"], [DOUBLE_EXACT_NS]).fetchone()
    con.execute(SQL["us_exact_macro"] if far else SQL["us_double_macro"])
    first, last = _bounds(steps)
    return {
        "kernels": SQL.sql("kernel_events", **_cname_values(CNAME)),
        "memops": SQL.sql("memop_events", cname_copies=CNAME["copies"]),
        "idle": SQL.sql("idle_events", idle_tid=IDLE_TID, **_cname_values(IDLE_CNAME)),
        "steps": SQL.sql(
            "step_events",
            steps_tid=STEPS_TID,
            cname_step=STEP_CNAME,
            all_steps="TRUE" if steps is None else "FALSE",
            first=first,
            last=last,
        ),
        "flows": SQL["collective_flows"],
    }


def _cname_values(mapping: dict[str, str]) -> dict[str, str]:
    """A colour table as the statements' `$cname_KEY` placeholders."""
    return {f"cname_{k}": v for k, v in mapping.items()}


def _bounds(steps: StepBounds | None) -> tuple[str, str]:
    """--steps first..last as the statements' `$first`, `$last` (NULL: open)."""
    first, last = steps if steps is not None else (None, None)
    return ("NULL" if first is None else str(int(first))), ("NULL" if last is None else str(int(last)))


def _windows(con: duckdb.DuckDBPyConnection, ranks: list[int], steps: StepBounds | None) -> None:
    """TEMP table _export_windows(rank, off, lo, hi): each exported rank's clock offset and, with
    --steps, the aligned span of its selected steps (rows of ranks without one are left out)."""
    con.execute(SQL.sql("export_ranks", ranks=", ".join(str(int(r)) for r in ranks) or "NULL"))
    if steps is None:
        con.execute(SQL["whole_windows"])
        return
    first, last = _bounds(steps)
    con.execute(SQL.sql("step_windows", first=first, last=last))
    if con.execute(SQL["window_count"]).fetchone()[0] == 0:
        have = con.execute(SQL["steps_of_exported_ranks"]).fetchone()
        shown = f"{steps[0] if steps[0] is not None else ''}:{steps[1] if steps[1] is not None else ''}"
        if have[0] is None:
            raise UserError(
                f"--steps '{shown}': the exported ranks have no steps (the capture is one window)"
            )
        raise UserError(
            f"--steps '{shown}': no such step on the exported ranks (their steps: {have[0]}-{have[1]})"
        )


def _top_level(con: duckdb.DuckDBPyConnection, ranks: list[int], steps: StepBounds | None) -> dict:
    """Keys around traceEvents: what the viewers read, what the Kineto reader reads (one rank's
    distributedInfo and deviceProperties, the time base), and how the file was made."""
    top: dict = {"schemaVersion": 1, "displayTimeUnit": "ns"}
    first = ranks[0] if ranks else None
    row = con.execute(SQL["first_rank_device"], [first]).fetchone() if first is not None else None
    if row is not None and row[2] is not None:
        top["baseTimeNanoseconds"] = int(row[2])  # wall clock of aligned time 0 (first rank's view)
    if len(ranks) == 1 and row is not None:
        world = row[0] or con.execute(SQL["rank_count"]).fetchone()[0]
        top["distributedInfo"] = {"rank": first, "world_size": int(world)}
        if row[1] is not None:
            props = {
                "id": int(row[1]),
                "name": row[3],
                "numSms": row[4],
                "totalGlobalMem": row[5],
                "computeMajor": row[6],
                "computeMinor": row[7],
            }
            top["deviceProperties"] = [{k: v for k, v in props.items() if v is not None}]
    shown = None
    if steps is not None:
        shown = f"{'' if steps[0] is None else steps[0]}:{'' if steps[1] is None else steps[1]}"
    top["otherData"] = {
        "exporter": f"nsight-analyze {__version__}",
        "clock": "aligned job timeline (file time + ranks.clock_offset_ns); ts and dur in microseconds",
        "ranks": ranks,
        "steps": shown,
        "pid": "rank",
        "tid": f"CUDA stream id; {STEPS_TID} = steps, {IDLE_TID} = idle",
    }
    return top


def _rows(con: duckdb.DuckDBPyConnection, sql: str, what: str) -> Iterator[list[str]]:
    """The query's single column in batches of BATCH_ROWS strings."""
    try:
        reader = con.execute(sql).to_arrow_reader(BATCH_ROWS)
        for batch in reader:
            yield batch.column(0).to_pylist()
    except duckdb.OutOfMemoryException:
        raise out_of_memory(f"exporting the {what}") from None


def _open(path: Path, compressed: bool) -> IO[str]:
    """`path` opened for text, gzip-compressed if asked (by the final name's .gz: `path` is the
    temporary name, which does not end in .gz)."""
    if compressed:
        return gzip.open(path, "wt", encoding="utf-8", compresslevel=6)
    return open(path, "w", encoding="utf-8")


def check_file(out: Path, force: bool) -> None:
    """OUT must be a file name in an existing folder; an existing file only with --force."""
    if out.is_dir():
        raise UserError(f"{out} is a folder: --format chrome-trace writes one .json file")
    if out.exists() and not force:
        raise UserError(f"{out} exists: pass --force to overwrite it")
    if not out.parent.is_dir():
        raise UserError(f"the folder of {out} does not exist")


def export_chrome_trace(
    con: duckdb.DuckDBPyConnection,
    out: Path,
    ranks: list[int],
    steps: StepBounds | None = None,
    force: bool = False,
) -> TraceExport:
    """Write the Chrome-trace JSON of `ranks` (optionally only steps first..last) to `out`.

    `out` ending in .gz is written gzip-compressed (the Perfetto UI and the reader open both).
    The file appears under its name only when complete (written under a temporary name first).
    """
    check_file(out, force)
    result = TraceExport(out, ranks)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    try:
        _windows(con, ranks, steps)
        metadata = SQL.sql("metadata_events", steps_tid=STEPS_TID, idle_tid=IDLE_TID)
        parts = {"metadata": metadata, **_queries(con, steps)}
        head = json.dumps(_top_level(con, ranks, steps))[:-1] + ', "traceEvents": [\n'
        with _open(tmp, out.name.endswith(".gz")) as fh:
            fh.write(head)
            sep = ""
            for what, sql in parts.items():
                n = 0
                for batch in _rows(con, sql, what):
                    if batch:
                        fh.write(sep + ",\n".join(batch))
                        sep = ",\n"
                        n += len(batch)
                result.counts[what] = n
            fh.write("\n]}\n")
        replace_atomically(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        for drop in ("drop_export_windows", "drop_export_ranks", "drop_us_macro"):
            con.execute(SQL[drop])
    return result
