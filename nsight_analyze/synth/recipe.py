"""Synthetic Nsight Systems recipe output: the folder `nsys recipe nvtx_gpu_proj_trace --input DIR`
writes, computed from nsys SQLite exports (the generator's report_rank*.sqlite, or any export).

Why: the real recipe outputs we have (NVIDIA JAX-Toolbox test data, ../shared/traces/nsys-recipe)
come without their reports, so they cannot test what users do most: run the recipe on their
reports and ingest both. This writes the recipe's output beside the reports it was computed
from, with values computed here on the raw SQLite tables (SQLite SQL, independent of the
DuckDB queries under test), so a test can check that the output is read beside its reports and
that `nvtx_projection_compare` finds both sides equal.

Layout written (`nvtx_gpu_proj_trace/` beside the reports):
  nvtx_gpu_proj_trace.nsys-analysis  JSON: RecipeName, DisplayName, InputFiles, StartTime, ...
  trace.parquet  one row per projected range; the columns and dtypes of NVIDIA's output as found
                 in its JAX-Toolbox test data (traces README, "Nsight Systems recipe outputs"; the
                 columns named in issue 21): Name, Projected Start, Projected Duration (int64 ns),
                 Orig Start, Orig Duration (float64 ns), Style ('PushPop' / 'StartEnd'), PID, TID,
                 NumGPUOps, Lvl (float64), NumChild, RangeId, ParentId (float64), RangeStack
                 (':outer:...:self' RangeIds), Rank (the report's index in files.parquet)
  files.parquet  column File (report name without suffix), row i = Rank i
NVIDIA's user guide documents what the recipe computes, not these columns ("provides a trace of
NVTX time ranges projected from the CPU onto the GPU",
https://docs.nvidia.com/nsight-systems/UserGuide/index.html, "Available Recipes"); the
projection is the one its NVTX recipe notebook describes (docs/nsys-recipes.md): a range's
projection spans the earliest start to the latest end of the kernels, memcpys and memsets
launched by CUDA runtime calls on the range's thread that start inside [start, end).
Ranges that launched nothing get no row. The recipe's extra per-process row without a range
(Name NULL) is not written: nothing documents what it holds.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

FOLDER = "nvtx_gpu_proj_trace"
RECIPE_JSON = {
    "RecipeJsonVersion": "1.2.0",
    "RecipeRuntimeVersion": "2.0.0",
    "RecipeName": "nvtx_gpu_proj_trace",
    "DisplayName": "NVTX GPU Projection Trace",
    "Mode": "concurrent",
    "StartTime": "2026-11-02 15:00:00.000000",  # fixed: the same inputs give the same bytes
    "EndTime": "2026-11-02 15:00:01.000000",
}
GPU_OP_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
TID_BITS = 24  # nsys globalTid = (vm << 56) | (pid << 24) | tid

# Every NVTX push/pop or start/end range with an end: its name as the recipe writes it
# ('DOMAIN:text' in a named domain), its thread, and its nesting on that thread (a range's
# containers: the ranges of its thread that start no later and end no earlier).
_RANGES = """
CREATE TEMP TABLE r AS
WITH dom AS (SELECT domainId, max(text) AS dname FROM NVTX_EVENTS WHERE eventType = 75 GROUP BY 1)
SELECT n.rowid AS id, n.start, n.end, n.globalTid AS gtid, n.eventType AS type,
       CASE WHEN n.domainId != 0 AND d.dname IS NOT NULL THEN d.dname || ':' ELSE '' END
       || coalesce(n.text, s.value, '') AS name
FROM NVTX_EVENTS AS n
LEFT JOIN {strings} AS s ON s.id = n.textId
LEFT JOIN dom AS d ON d.domainId = n.domainId
WHERE n.eventType IN (59, 60) AND n.end IS NOT NULL AND n.end >= n.start;
CREATE TEMP TABLE contains AS
SELECT o.id AS outer_id, i.id AS inner_id
FROM r AS o JOIN r AS i
  ON o.gtid = i.gtid AND o.id != i.id AND o.start <= i.start AND o.end >= i.end
 AND (o.start < i.start OR o.end > i.end OR o.id < i.id);
CREATE TEMP TABLE lvl AS
SELECT r.id, (SELECT count(*) FROM contains AS c WHERE c.inner_id = r.id) AS lvl FROM r;
CREATE TEMP TABLE parent AS
SELECT c.inner_id AS id, c.outer_id AS parent_id
FROM contains AS c JOIN lvl AS li ON li.id = c.inner_id JOIN lvl AS lo ON lo.id = c.outer_id
WHERE lo.lvl = li.lvl - 1;
CREATE TEMP TABLE stack AS
WITH RECURSIVE s(id, stack) AS (
    SELECT id, ':' || id FROM lvl WHERE lvl = 0
    UNION ALL
    SELECT p.id, s.stack || ':' || p.id FROM parent AS p JOIN s ON s.id = p.parent_id
)
SELECT id, stack FROM s;
"""
# GPU operations with the runtime call that launched them (same process, same correlation id).
_OPS = """
SELECT a.globalTid AS gtid, a.start AS at, o.start, o.end
FROM CUPTI_ACTIVITY_KIND_RUNTIME AS a
JOIN ({ops}) AS o ON o.correlationId = a.correlationId AND o.globalPid = (a.globalTid >> {bits}) << {bits}
"""
_TRACE = """
SELECT r.name, min(l.start), max(l.end) - min(l.start), r.start, r.end - r.start,
       CASE r.type WHEN 59 THEN 'PushPop' ELSE 'StartEnd' END,
       (r.gtid >> {bits}) & {mask}, r.gtid & {mask}, count(*),
       lvl.lvl, (SELECT count(*) FROM parent AS c WHERE c.parent_id = r.id), r.id, p.parent_id, st.stack
FROM r JOIN ({launches}) AS l ON l.gtid = r.gtid AND l.at >= r.start AND l.at < r.end
JOIN lvl ON lvl.id = r.id LEFT JOIN parent AS p ON p.id = r.id LEFT JOIN stack AS st ON st.id = r.id
GROUP BY r.id ORDER BY r.start, r.id
"""
COLUMNS = (
    "Name", "Projected Start", "Projected Duration", "Orig Start", "Orig Duration", "Style",
    "PID", "TID", "NumGPUOps", "Lvl", "NumChild", "RangeId", "ParentId", "RangeStack",
)  # fmt: skip


def project(report: Path) -> list[tuple]:
    """The recipe's rows (COLUMNS, without Rank) of one nsys SQLite export."""
    con = sqlite3.connect(f"file:{report}?mode=ro", uri=True)
    try:
        tables = {t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        ops = " UNION ALL ".join(
            f"SELECT correlationId, globalPid, start, end FROM {t}"
            for t in (
                "CUPTI_ACTIVITY_KIND_KERNEL",
                "CUPTI_ACTIVITY_KIND_MEMCPY",
                "CUPTI_ACTIVITY_KIND_MEMSET",
            )
            if t in tables
        )
        if "NVTX_EVENTS" not in tables or "CUPTI_ACTIVITY_KIND_RUNTIME" not in tables or not ops:
            return []
        strings = "StringIds" if "StringIds" in tables else "(SELECT NULL AS id, NULL AS value)"
        con.executescript(_RANGES.format(strings=strings))
        launches = _OPS.format(ops=ops, bits=TID_BITS)
        mask = (1 << TID_BITS) - 1
        return con.execute(_TRACE.format(launches=launches, bits=TID_BITS, mask=mask)).fetchall()
    finally:
        con.close()


def write_nvtx_gpu_proj_trace(reports: list[Path], out: Path) -> dict[str, dict[str, int]]:
    """Write the recipe output folder for `reports` (Rank = position in file-name order, as
    files.parquet lists them) to `out`; return per report name its rows, GPU ops and summed
    projected ns (what a test compares the workspace with)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    reports = sorted(reports, key=lambda p: p.stem)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[tuple] = []
    truth: dict[str, dict[str, int]] = {}
    for rank, report in enumerate(reports):
        mine = project(report)
        rows += [(*r, rank) for r in mine]
        truth[report.stem] = {
            "rows": len(mine),
            "gpu_ops": sum(r[8] for r in mine),
            "projected_ns": sum(r[2] for r in mine),
        }
    cols = list(zip(*rows)) if rows else [[] for _ in range(len(COLUMNS) + 1)]
    types = [
        pa.string(), pa.int64(), pa.int64(), pa.float64(), pa.float64(), pa.string(), pa.int64(),
        pa.int64(), pa.int64(), pa.float64(), pa.int64(), pa.float64(), pa.float64(), pa.string(), pa.int64(),
    ]  # fmt: skip
    table = pa.table(
        {name: pa.array(list(c), type=t) for name, c, t in zip((*COLUMNS, "Rank"), cols, types, strict=True)}
    )
    pq.write_table(table, out / "trace.parquet")
    pq.write_table(pa.table({"File": [p.stem for p in reports]}), out / "files.parquet")
    analysis = {
        **RECIPE_JSON,
        "InputFiles": [p.with_suffix(".nsys-rep").name for p in reports],  # as the user named them
        "Outputs": {"trace.parquet": "Trace", "files.parquet": "Files"},
    }
    (out / f"{FOLDER}.nsys-analysis").write_text(json.dumps(analysis, indent=1) + "\n")
    return truth


def for_traces(folder: str | Path) -> dict[str, dict[str, int]]:
    """The recipe output of every report_rank*.sqlite in `folder`, written to folder/nvtx_gpu_proj_trace/."""
    folder = Path(folder)
    reports = sorted(folder.glob("report_rank*.sqlite"))
    return write_nvtx_gpu_proj_trace(reports, folder / FOLDER)
