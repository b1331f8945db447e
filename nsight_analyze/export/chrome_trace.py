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

Every event is built by DuckDB (json_object over the tables) and streamed to the file in Arrow
batches: no Python loop per event, memory bounded by a batch, for millions of events.
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
from ..duck import out_of_memory
from ..errors import UserError
from . import replace_atomically

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


def _cases(column: str, mapping: dict[str, str], default: str) -> str:
    whens = " ".join(f"WHEN '{k}' THEN '{v}'" for k, v in mapping.items())
    return f"CASE {column} {whens} ELSE '{default}' END"


def _us_expr(con: duckdb.DuckDBPyConnection) -> str:
    """SQL turning integer ns `{}` into exact µs with 3 decimals, as cheap as the clock allows."""
    (far,) = con.execute(
        "SELECT coalesce(max(greatest(abs(aligned_start_ns), abs(aligned_end_ns))), 0) >= ? "
        "FROM (SELECT aligned_start_ns, aligned_end_ns FROM aligned_kernels "
        "UNION ALL SELECT aligned_start_ns, aligned_end_ns FROM aligned_memops)",
        [DOUBLE_EXACT_NS],
    ).fetchone()
    return "(({})::DECIMAL(38, 0) * 0.001::DECIMAL(4, 3))" if far else "(({}) / 1000)"


def _windows(con: duckdb.DuckDBPyConnection, ranks: list[int], steps: StepBounds | None) -> None:
    """TEMP table _export_windows(rank, off, lo, hi): each exported rank's clock offset and, with
    --steps, the aligned span of its selected steps (rows of ranks without one are left out)."""
    values = ", ".join(f"({int(r)})" for r in ranks) or "(NULL)"
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE _export_ranks AS
            SELECT r.rank, coalesce(k.clock_offset_ns, 0)::BIGINT AS off
            FROM (VALUES {values}) AS r(rank) LEFT JOIN ranks AS k ON k.rank = r.rank
            WHERE r.rank IS NOT NULL"""
    )
    if steps is None:
        con.execute(
            "CREATE OR REPLACE TEMP TABLE _export_windows AS "
            "SELECT rank, off, NULL::BIGINT AS lo, NULL::BIGINT AS hi FROM _export_ranks"
        )
        return
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE _export_windows AS
            SELECT e.rank, e.off, min(s.start_ns) + e.off AS lo, max(s.end_ns) + e.off AS hi
            FROM _export_ranks AS e JOIN steps AS s ON s.rank = e.rank
            WHERE {_step_filter(steps, "s.step")}
            GROUP BY e.rank, e.off"""
    )
    if con.execute("SELECT count(*) FROM _export_windows").fetchone()[0] == 0:
        have = con.execute(
            "SELECT min(step), max(step) FROM steps WHERE step IS NOT NULL AND rank IN "
            "(SELECT rank FROM _export_ranks)"
        ).fetchone()
        shown = f"{steps[0] if steps[0] is not None else ''}:{steps[1] if steps[1] is not None else ''}"
        if have[0] is None:
            raise UserError(
                f"--steps '{shown}': the exported ranks have no steps (the capture is one window)"
            )
        raise UserError(
            f"--steps '{shown}': no such step on the exported ranks (their steps: {have[0]}-{have[1]})"
        )


def _step_filter(steps: StepBounds, column: str) -> str:
    parts = [f"{column} IS NOT NULL"]
    if steps[0] is not None:
        parts.append(f"{column} >= {int(steps[0])}")
    if steps[1] is not None:
        parts.append(f"{column} <= {int(steps[1])}")
    return " AND ".join(parts)


def _in_window(column: str) -> str:
    return f"(w.lo IS NULL OR {column} >= w.lo) AND (w.hi IS NULL OR {column} < w.hi)"


def _queries(us: str, steps: StepBounds | None) -> dict[str, str]:
    """One SELECT per kind of event, each returning one VARCHAR column of JSON objects.

    Key order matters to the Kineto reader's probe: it finds the GPU's pid in the text
    `"cat": "kernel", "name": ..., "pid": N`, so cat, name and pid come first, in that order.
    `json_merge_patch('{}', args)` drops the args whose value is NULL (RFC 7386)."""

    def u(column: str) -> str:
        return us.format(column)

    kernels = f"""
        SELECT json_object(
            'ph', 'X', 'cat', 'kernel', 'name', coalesce(k.name, '?'), 'pid', k.rank,
            'tid', coalesce(k.stream_id, 0), 'ts', {u("k.aligned_start_ns")},
            'dur', {u("greatest(k.duration_ns, 0)")},
            'cname', {_cases("k.category", CNAME, "grey")},
            'args', json_merge_patch('{{}}', json_object(
                'category', coalesce(k.category, 'other'), 'subcategory', k.subcategory,
                'correlation', k.correlation_id, 'device', k.device_id, 'stream', k.stream_id,
                'grid', CASE WHEN k.grid_x IS NOT NULL THEN [k.grid_x, k.grid_y, k.grid_z] END,
                'block', CASE WHEN k.block_x IS NOT NULL THEN [k.block_x, k.block_y, k.block_z] END,
                'registers per thread', k.registers_per_thread,
                'shared memory',
                    CASE WHEN k.static_smem_bytes IS NOT NULL OR k.dynamic_smem_bytes IS NOT NULL
                         THEN coalesce(k.static_smem_bytes, 0) + coalesce(k.dynamic_smem_bytes, 0) END,
                'graph id', k.graph_id, 'graph node id', k.graph_node_id,
                'recorded duration ns', CASE WHEN k.duration_ns < 0 THEN k.duration_ns END))
        )::VARCHAR
        FROM aligned_kernels AS k JOIN _export_windows AS w ON w.rank = k.rank
        WHERE {_in_window("k.aligned_start_ns")}"""
    memops = f"""
        SELECT json_object(
            'ph', 'X', 'cat', CASE WHEN m.kind = 'memset' THEN 'gpu_memset' ELSE 'gpu_memcpy' END,
            'name', CASE WHEN m.kind = 'memset' THEN 'Memset (' || coalesce(m.dst_kind, 'Unknown') || ')'
                         ELSE 'Memcpy ' || coalesce(m.kind, 'Unknown') || ' ('
                              || coalesce(m.src_kind, 'Unknown') || ' -> ' || coalesce(m.dst_kind, 'Unknown')
                              || ')' END,
            'pid', m.rank, 'tid', coalesce(m.stream_id, 0),
            'ts', {u("m.aligned_start_ns")}, 'dur', {u("greatest(m.duration_ns, 0)")},
            'cname', '{CNAME["copies"]}',
            'args', json_merge_patch('{{}}', json_object(
                'category', 'copies', 'kind', m.kind, 'bytes', m.bytes, 'correlation', m.correlation_id,
                'device', m.device_id, 'stream', m.stream_id, 'graph node id', m.graph_node_id,
                'recorded duration ns', CASE WHEN m.duration_ns < 0 THEN m.duration_ns END))
        )::VARCHAR
        FROM aligned_memops AS m JOIN _export_windows AS w ON w.rank = m.rank
        WHERE {_in_window("m.aligned_start_ns")}"""
    idle = f"""
        SELECT json_object(
            'ph', 'X', 'cat', 'idle', 'name', coalesce(g.cause, 'idle'), 'pid', g.rank, 'tid', {IDLE_TID},
            'ts', {u("g.start_ns + w.off")}, 'dur', {u("g.duration_ns")},
            'cname', {_cases("g.cause", IDLE_CNAME, "grey")},
            'args', json_merge_patch('{{}}', json_object(
                'cause', g.cause, 'host activity', g.host_activity,
                'gap ts', {u("g.gap_start_ns + w.off")}, 'gap dur', {u("g.gap_end_ns - g.gap_start_ns")},
                'ended by correlation', g.correlation_id))
        )::VARCHAR
        FROM gaps AS g JOIN _export_windows AS w ON w.rank = g.rank
        WHERE g.step IS NULL AND {_in_window("g.start_ns + w.off")}"""
    step_rows = _step_filter(steps, "s.step") if steps is not None else "TRUE"
    step_events = f"""
        SELECT json_object(
            'ph', 'X', 'cat', 'step',
            'name', CASE WHEN s.step IS NULL THEN 'capture' ELSE 'step ' || s.step END,
            'pid', s.rank, 'tid', {STEPS_TID},
            'ts', {u("s.start_ns + w.off")}, 'dur', {u("greatest(s.end_ns - s.start_ns, 0)")},
            'cname', '{STEP_CNAME}',
            'args', json_merge_patch('{{}}', json_object('step', s.step, 'source', s.source))
        )::VARCHAR
        FROM steps AS s JOIN _export_windows AS w ON w.rank = s.rank
        WHERE {step_rows}"""
    # Members of each instance whose kernel is exported, chained in arrival order; instances
    # seen on one rank only (unmatched, or cut by --ranks) get no flow.
    flows = f"""
        WITH m AS (
            SELECT m.coll_id, m.op, m.rank, coalesce(m.stream_id, 0) AS tid, m.correlation_id,
                   m.arrive_ns, m.complete, (m.arrive_ns + m.aligned_end_ns) // 2 AS mid_ns
            FROM merge_coll_members AS m JOIN _export_windows AS w ON w.rank = m.rank
            WHERE m.coll_id IS NOT NULL AND {_in_window("m.arrive_ns")}
        ),
        multi AS (SELECT coll_id FROM m GROUP BY coll_id HAVING count(DISTINCT rank) > 1),
        chain AS (
            SELECT m.*,
                   lead(m.rank) OVER o AS to_rank, lead(m.tid) OVER o AS to_tid,
                   lead(m.mid_ns) OVER o AS to_mid_ns
            FROM m JOIN multi USING (coll_id)
            WINDOW o AS (PARTITION BY m.coll_id ORDER BY m.arrive_ns, m.rank, m.correlation_id)
        ),
        pairs AS (
            SELECT *, row_number() OVER (ORDER BY coll_id, arrive_ns, rank, correlation_id) AS flow_id
            FROM chain WHERE to_rank IS NOT NULL
        )
        SELECT e FROM pairs, LATERAL (VALUES
            (json_object('ph', 's', 'cat', 'collective', 'name', coalesce(op, 'collective'), 'pid', rank,
                         'tid', tid, 'ts', {u("mid_ns")}, 'id', flow_id,
                         'args', json_object('coll_id', coll_id, 'complete', complete))::VARCHAR),
            (json_object('ph', 'f', 'bp', 'e', 'cat', 'collective', 'name', coalesce(op, 'collective'),
                         'pid', to_rank, 'tid', to_tid, 'ts', {u("to_mid_ns")}, 'id', flow_id,
                         'args', json_object('coll_id', coll_id, 'complete', complete))::VARCHAR)
        ) AS v(e)"""
    return {"kernels": kernels, "memops": memops, "idle": idle, "steps": step_events, "flows": flows}


def _metadata_query() -> str:
    """Process and thread names (and sort order) for every exported rank and the tracks it has."""
    tracks = f"""
        SELECT DISTINCT k.rank, coalesce(k.stream_id, 0) AS tid, 'stream ' || coalesce(k.stream_id, 0) AS name
        FROM aligned_kernels AS k JOIN _export_windows AS w ON w.rank = k.rank
        WHERE {_in_window("k.aligned_start_ns")}
        UNION
        SELECT DISTINCT m.rank, coalesce(m.stream_id, 0), 'stream ' || coalesce(m.stream_id, 0)
        FROM aligned_memops AS m JOIN _export_windows AS w ON w.rank = m.rank
        WHERE {_in_window("m.aligned_start_ns")}
        UNION
        SELECT rank, {STEPS_TID}, 'steps' FROM _export_windows WHERE rank IN (SELECT rank FROM steps)
        UNION
        SELECT rank, {IDLE_TID}, 'idle' FROM _export_windows
        WHERE rank IN (SELECT rank FROM gaps WHERE step IS NULL)"""
    return f"""
        WITH procs AS (
            SELECT e.rank,
                   'rank ' || e.rank || ' · ' || coalesce(r.hostname, '?') || ' · '
                   || coalesce(r.gpu_name, 'GPU') || coalesce(' (device ' || r.device_id || ')', '') AS label
            FROM _export_ranks AS e LEFT JOIN ranks AS r ON r.rank = e.rank
        ),
        tracks AS ({tracks})
        SELECT e FROM (
            SELECT 0 AS part, rank, 0 AS tid, json_object('ph', 'M', 'name', 'process_name', 'pid', rank,
                   'tid', 0, 'args', json_object('name', label))::VARCHAR AS e FROM procs
            UNION ALL
            SELECT 1, rank, 0, json_object('ph', 'M', 'name', 'process_sort_index', 'pid', rank, 'tid', 0,
                   'args', json_object('sort_index', rank))::VARCHAR FROM procs
            UNION ALL
            SELECT 2, rank, tid, json_object('ph', 'M', 'name', 'thread_name', 'pid', rank, 'tid', tid,
                   'args', json_object('name', name))::VARCHAR FROM tracks
            UNION ALL
            SELECT 3, rank, tid, json_object('ph', 'M', 'name', 'thread_sort_index', 'pid', rank, 'tid', tid,
                   'args', json_object('sort_index', CASE tid WHEN {STEPS_TID} THEN -2 WHEN {IDLE_TID} THEN -1
                                                         ELSE least(tid, 1000000000) END))::VARCHAR
            FROM tracks
        ) ORDER BY rank, part, tid"""


def _top_level(con: duckdb.DuckDBPyConnection, ranks: list[int], steps: StepBounds | None) -> dict:
    """Keys around traceEvents: what the viewers read, what the Kineto reader reads (one rank's
    distributedInfo and deviceProperties, the time base), and how the file was made."""
    top: dict = {"schemaVersion": 1, "displayTimeUnit": "ns"}
    first = ranks[0] if ranks else None
    row = (
        con.execute(
            "SELECT r.world_size, r.device_id, r.session_start_utc_ns - coalesce(r.clock_offset_ns, 0), "
            "g.name, g.sm_count, g.memory_bytes, g.compute_major, g.compute_minor "
            "FROM ranks AS r LEFT JOIN gpus AS g "
            "ON g.rank = r.rank AND g.device_id IS NOT DISTINCT FROM r.device_id "
            "WHERE r.rank = ? LIMIT 1",
            [first],
        ).fetchone()
        if first is not None
        else None
    )
    if row is not None and row[2] is not None:
        top["baseTimeNanoseconds"] = int(row[2])  # wall clock of aligned time 0 (first rank's view)
    if len(ranks) == 1 and row is not None:
        world = row[0] or con.execute("SELECT count(*) FROM ranks").fetchone()[0]
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
        parts = {"metadata": _metadata_query(), **_queries(_us_expr(con), steps)}
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
        for table in ("_export_windows", "_export_ranks"):
            con.execute(f"DROP TABLE IF EXISTS temp.main.{table}")
    return result
