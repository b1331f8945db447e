"""Kineto `traceEvents` parsed by DuckDB's JSON reader: the fast path.

Why a module of its own: this is the SQL half of the fast path, the part that knows what the
events mean without a Python loop per event. pieces.py cuts the array's text into pieces of
whole events (`PIECE_BYTES` each, so memory stays bounded for any file size), each written
into a file of the parser's private temporary folder, which `read_json` of a private
in-memory DuckDB reads (C++ parse); one SELECT maps every event to one row of a wide Arrow
table (`target` says which canonical row set it feeds, or `skipped` why none), which pyarrow
splits into the row sets of batches.py. Two pieces are parsed at once (duck_parser.py runs
this SQL) while pieces.py cuts the next one and the loader inserts the last. Parse errors stay
in the private database, so they never abort the ingest's transaction: the caller falls back
to the ijson path (events.py), which loads the file or reports the exact reason.

Exact times: DuckDB's JSON reader keeps a number as a double, and a fractional epoch-µs
value (1.7e15 µs = 19 digits in ns) does not fit in one. Integer literals are exact, and
so is a double's shortest text with at most 15 significant digits and 3 decimals, which
the reader writes back for a JSON-typed column; both become ns with integer arithmetic
(`k_ns`). A piece holding any other number (e.g. 1712188298123456.001) is parsed again in
"raw" mode, where `read_json_objects` keeps each event's text and the `ts`/`dur` literals
are cut from it (`k_ns_raw`): exact to the decimal text, sub-ns digits rounded half-even
like the ijson path.

The meaning of each field is events.py's (`EventStream.on_*`), and the SQL follows it:
  * integers (`to_int`): an integer literal, or a float literal with an integral value;
  * strings (`to_text`): the string, or the JSON text of a non-string value (compact:
    `[0,1]` where the ijson path writes `[0, 1]`);
  * an event is "bad" (counted, not loaded) when its ts or dur is not a number;
  * a key whose value is null counts as absent (so does the ijson path, but for
    `"Collective name": null`, which there makes a non-NCCL kernel a collective's).
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from ...store.duck import OFFLINE_CONFIG

PIECE_BYTES = 32 << 20  # JSON text per DuckDB parse: bounds memory, amortises per-query cost

# CUPTI range-profiler FLOP counters (thread instructions) kept per profiled kernel.
RANGE_OPS = ("dadd", "dmul", "dfma", "fadd", "fmul", "ffma", "hadd", "hmul", "hfma")
RANGE_METRIC = "smsp__sass_thread_inst_executed_op_{}_pred_on.sum"
# Other range-profiler metrics kept (column, metric): the DRAM bytes the roofline needs and the
# tensor-pipe instructions (`kineto__tensor_core_insts`), as PyTorch's documentation records them.
RANGE_EXTRA = (
    ("dram_bytes", "dram__bytes.sum"),
    ("dram_read", "dram__bytes_read.sum"),
    ("dram_write", "dram__bytes_write.sum"),
    ("tensor_inst", "sm__inst_executed_pipe_tensor.sum"),
)
RANGE_COLUMNS = (*((op, RANGE_METRIC.format(op)) for op in RANGE_OPS), *RANGE_EXTRA)
CUDA_DEVICE_TYPE = 1  # c10::DeviceType::CUDA in the [memory] events' "Device Type"
# cpu_op events whose `Input Dims` / `Input type` / `Concrete Inputs` (record_shapes=True) are
# kept, in kineto_op_shapes: the softmax ops, whose input is the attention score matrix, and the
# matmul, convolution and attention ops whose FLOPs and bytes follow from their shapes
# (queries/hfu/op_flops.sql; COMPUTE_OPS is that query's list, anchored). A Python `re` and an RE2
# pattern at once (the ijson path searches with the first, DuckDB with the second).
COMPUTE_OPS = (
    "^aten::(mm|addmm|bmm|baddbmm|matmul|linear|_scaled_mm|conv[123]d|convolution|_convolution"
    "|convolution_backward|cudnn_convolution|miopen_convolution|(cudnn|miopen)_convolution_transpose"
    "|conv_transpose[123]d|scaled_dot_product_attention|_scaled_dot_product_(flash|efficient|cudnn)"
    "_attention(_backward)?|_(flash|efficient)_attention_(forward|backward))$"
    # the serving stacks' own GEMM and attention ops (op_flops counts those whose layout it knows)
    "|^(vllm|aiter|sglang|sgl_kernel|_C|_rocm_C|flash_attn|flash_attn_3)::[A-Za-z0-9_]*"
    "(gemm|_mm|matmul|attention|attn|mha|moe_forward)|^_vllm_fa[23]_C::[A-Za-z0-9_]*fwd"
)
SHAPE_OPS = "(?i)softmax|" + COMPUTE_OPS

# Fields read from each event: (JSON key, DuckDB type); the event's own keys, then args'.
# JSON-typed fields keep the literal's type (integer vs float vs string) for `_int`.
EVENT_FIELDS = [
    ("ph", "VARCHAR"),
    ("cat", "VARCHAR"),
    ("name", "VARCHAR"),
    ("pid", "JSON"),
    ("tid", "JSON"),
    ("ts", "JSON"),
    ("dur", "JSON"),
]
ARG_FIELDS = [
    ("device", "JSON"),
    ("stream", "JSON"),
    ("correlation", "JSON"),
    ("External id", "JSON"),
    ("grid", "JSON"),
    ("block", "JSON"),
    ("registers per thread", "JSON"),
    ("bytes", "JSON"),
    ("cuda_sync_kind", "VARCHAR"),
    ("Collective name", "VARCHAR"),
    ("dtype", "VARCHAR"),
    ("In msg nelems", "JSON"),
    ("Out msg nelems", "JSON"),
    ("In split size", "VARCHAR"),
    ("Out split size", "VARCHAR"),
    ("Group size", "JSON"),
    ("Process Group Name", "VARCHAR"),
    ("Process Group Description", "VARCHAR"),
    ("Process Group Ranks", "VARCHAR"),
    ("Seq", "JSON"),
    ("name", "VARCHAR"),
    # [memory] instant events (profile_memory=True)
    ("Total Allocated", "JSON"),
    ("Total Reserved", "JSON"),
    ("Device Type", "JSON"),
    ("Device Id", "JSON"),
    # cpu_op events recorded with record_shapes=True
    ("Input Dims", "JSON"),
    ("Input type", "JSON"),
    ("Concrete Inputs", "JSON"),
    # cuda_profiler_range events (CUPTI range profiler): the counters, per kernel
    *((metric, "JSON") for _, metric in RANGE_COLUMNS),
]
HANDLED = (
    "kernel",
    "gpu_memcpy",
    "gpu_memset",
    "cuda_runtime",
    "cuda_driver",
    "cuda_sync",
    "user_annotation",
    "gpu_user_annotation",
    "cpu_op",
    "cuda_profiler_range",
)

MACROS = [
    # events.to_int: an integer literal, or an integral float literal
    # (the reader writes a float with a '.', or with an exponent when too large for BIGINT)
    "k_int(v) AS CASE WHEN NOT contains(v, '.') THEN TRY_CAST(v AS BIGINT) "
    "WHEN TRY_CAST(v AS DOUBLE) = floor(TRY_CAST(v AS DOUBLE)) "
    "THEN TRY_CAST(TRY_CAST(v AS DOUBLE) AS BIGINT) END",
    # µs text '-?digits(.d{1,3})?' -> exact ns, in integers (DuckDB's DECIMAL casts are slow)
    "k_digits(t) AS TRY_CAST(TRY_CAST(replace(t, '.', '') AS HUGEINT) * CASE "
    "WHEN NOT contains(t, '.') THEN 1000 WHEN length(t) - strpos(t, '.') = 1 THEN 100 "
    "WHEN length(t) - strpos(t, '.') = 2 THEN 10 ELSE 1 END AS BIGINT)",
    # a JSON number written back by the reader -> exact ns; NULL when it is not a number, or
    # when the double may not be the literal (> 15 significant digits, > 3 decimals, exponent)
    "k_ns(v) AS CASE WHEN contains(v, 'e') OR contains(v, 'E') THEN NULL "
    "WHEN NOT contains(v, '.') OR (length(v) - strpos(v, '.') <= 3 "
    "AND length(v) - starts_with(v, '-')::INT <= 16) THEN k_digits(v) END",
    # raw mode: t is the literal cut from the event's text, v the reader's value of the same key;
    # when they disagree the regex met a nested key of that name first: fall back to the double
    "k_ns_raw(t, v) AS CASE WHEN v IS NULL OR contains(v, '\"') OR TRY_CAST(v AS DOUBLE) IS NULL "
    "THEN NULL WHEN TRY_CAST(t AS DOUBLE) IS DISTINCT FROM TRY_CAST(v AS DOUBLE) "
    "THEN round(TRY_CAST(v AS DOUBLE) * 1000)::BIGINT "
    "WHEN regexp_full_match(t, '-?[0-9]+(\\.[0-9]{1,3})?') THEN k_digits(t) "
    "ELSE TRY_CAST(round_even(TRY_CAST(t AS DECIMAL(38, 15)) * 1000, 0) AS BIGINT) END",
]


def sql_str(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


_COLUMNS = (
    "{"
    + ", ".join(f'"{k}": {sql_str(t)}' for k, t in EVENT_FIELDS)
    + ", args: "
    + sql_str("STRUCT(" + ", ".join(f'"{k}" {t}' for k, t in ARG_FIELDS) + ")")
    + "}"
)
_STRUCTURE = sql_str(
    "{"
    + ", ".join(f'"{k}": "{t}"' for k, t in EVENT_FIELDS)
    + ', "args": {'
    + ", ".join(f'"{k}": "{t}"' for k, t in ARG_FIELDS)
    + "}}"
)
_FIELDS = "ph, cat, name, pid::VARCHAR AS pid, tid::VARCHAR AS tid, args AS a"
SOURCE_FAST = f"""
    SELECT true AS is_obj, {_FIELDS}, k_ns(ts::VARCHAR) AS ts_ns, k_ns(dur::VARCHAR) AS dur_ns,
           (ts_ns IS NULL AND TRY_CAST(ts::VARCHAR AS DOUBLE) IS NOT NULL)
           OR (dur_ns IS NULL AND TRY_CAST(dur::VARCHAR AS DOUBLE) IS NOT NULL) AS lossy
    FROM read_json({{src}}, format = 'array', compression = 'uncompressed', columns = {_COLUMNS})
"""
_RAW_NUMBER = "regexp_extract(raw, '\"{key}\"\\s*:\\s*(-?[0-9][0-9.eE+-]*)', 1)"
SOURCE_RAW = f"""
    SELECT starts_with(ltrim(raw), '{{') AS is_obj, {_FIELDS},
           k_ns_raw({_RAW_NUMBER.format(key="ts")}, ts::VARCHAR) AS ts_ns,
           k_ns_raw({_RAW_NUMBER.format(key="dur")}, dur::VARCHAR) AS dur_ns, false AS lossy
    FROM (SELECT raw, unnest(json_transform(raw, {_STRUCTURE}))
          FROM (SELECT json AS raw
                FROM read_json_objects({{src}}, format = 'array', compression = 'uncompressed')))
"""

# Targets (row sets of batches.RowSets) an event feeds; an NCCL kernel also feeds `comm`.
KERNEL, MEMOP, API, SYNC, NVTX, GPU_ANN, THREAD, COMM_OP, MEMORY, RANGE, SHAPE = range(1, 12)
_STEP = "starts_with(name, 'ProfilerStep#') AND regexp_matches(name, '^ProfilerStep#[0-9]')"
_HANDLED = "(" + ", ".join(sql_str(c) for c in HANDLED) + ")"
_COUNTERS = ", ".join(
    f'CASE WHEN target = {RANGE} THEN k_int(a."{metric}"::VARCHAR) END AS {column}'
    for column, metric in RANGE_COLUMNS
)
_DIMS = ", ".join(
    f"CASE WHEN target = {KERNEL} THEN k_int({arg}[{i + 1}]::VARCHAR) END AS {arg}_{axis}"
    for arg in ("grid", "block")
    for i, axis in enumerate("xyz")
)
EVENTS_SQL = f"""
WITH e AS ({{source}}),
k AS (
    SELECT *,
        CASE WHEN NOT is_obj THEN NULL
             WHEN cat = 'kernel' THEN {KERNEL}
             WHEN cat IN ('gpu_memcpy', 'gpu_memset') THEN {MEMOP}
             WHEN cat IN ('cuda_runtime', 'cuda_driver') THEN {API}
             WHEN cat = 'cuda_sync' THEN {SYNC}
             WHEN cat = 'user_annotation' OR (cat = 'cpu_op' AND {_STEP}) THEN {NVTX}
             WHEN cat = 'gpu_user_annotation' THEN {GPU_ANN}
             WHEN cat = 'cpu_op' THEN CASE WHEN name = 'record_param_comms'
                                             AND a."Collective name" IS NOT NULL THEN {COMM_OP}
                                        WHEN regexp_matches(name, {sql_str(SHAPE_OPS)})
                                             AND a."Input Dims" IS NOT NULL AND ts_ns IS NOT NULL
                                             AND dur_ns IS NOT NULL THEN {SHAPE} END
             WHEN ph = 'M' AND name = 'thread_name' THEN {THREAD}
             WHEN cat = 'cpu_instant_event' AND name = '[memory]'
                  AND k_int(a."Device Type"::VARCHAR) = {CUDA_DEVICE_TYPE} THEN {MEMORY}
             WHEN cat = 'cuda_profiler_range' THEN {RANGE} END AS handler,
        CASE WHEN cat = 'kernel' THEN TRY_CAST(a.grid AS JSON[]) END AS grid,
        CASE WHEN cat = 'kernel' THEN TRY_CAST(a.block AS JSON[]) END AS block
    FROM e
),
b AS (
    SELECT *,
        coalesce((handler BETWEEN {KERNEL} AND {GPU_ANN} OR handler = {RANGE})
                 AND (ts_ns IS NULL OR dur_ns IS NULL)
                 OR (handler = {MEMORY} AND ts_ns IS NULL), false) AS bad
    FROM k
),
t AS (SELECT *, CASE WHEN bad THEN NULL ELSE handler END AS target FROM b)
SELECT target, bad, lossy,
    CASE WHEN NOT is_obj THEN 'non-object entries'
         WHEN cat = 'cpu_op' THEN CASE WHEN handler IS DISTINCT FROM {NVTX}
                                        AND handler IS DISTINCT FROM {SHAPE} THEN 'cpu_op' END
         WHEN cat IN {_HANDLED} THEN NULL
         WHEN ph = 'M' THEN CASE WHEN name IS DISTINCT FROM 'thread_name' THEN 'metadata (ph M)' END
         WHEN cat = 'cpu_instant_event' AND name = '[memory]' THEN
             CASE WHEN handler IS DISTINCT FROM {MEMORY} THEN '[memory] of a non-CUDA device' END
         ELSE coalesce(nullif(cat, ''), 'ph ' || coalesce(ph, 'None')) END AS skipped,
    target = {KERNEL} AND (a."Collective name" IS NOT NULL OR contains(name, 'nccl')) AS is_comm,
    CASE WHEN target IN ({KERNEL}, {GPU_ANN}) THEN coalesce(k_int(a.device::VARCHAR), k_int(pid))
         WHEN target IN ({MEMOP}, {SYNC}) THEN k_int(a.device::VARCHAR)
         WHEN target = {MEMORY} THEN k_int(a."Device Id"::VARCHAR) END AS device_id,
    CASE WHEN target IN ({KERNEL}, {MEMOP}, {SYNC}) THEN k_int(a.stream::VARCHAR)
         WHEN target = {GPU_ANN} THEN k_int(tid) END AS stream_id,
    CASE WHEN target <= {GPU_ANN} OR target IN ({MEMORY}, {RANGE}, {SHAPE}) THEN ts_ns END AS start_ns,
    CASE WHEN target <= {GPU_ANN} OR target IN ({RANGE}, {SHAPE}) THEN ts_ns + dur_ns END AS end_ns,
    CASE WHEN target <= {GPU_ANN} OR target IN ({RANGE}, {SHAPE}) THEN name
         WHEN target = {THREAD} THEN a.name END AS name,
    CASE WHEN target = {MEMORY} THEN k_int(a."Total Allocated"::VARCHAR) END AS bytes_in_use,
    CASE WHEN target = {MEMORY} THEN k_int(a."Total Reserved"::VARCHAR) END AS bytes_reserved,
    {_COUNTERS},
    CASE WHEN target IN ({KERNEL}, {MEMOP}, {API}, {SYNC}) THEN k_int(a.correlation::VARCHAR) END
        AS correlation_id,
    {_DIMS},
    CASE WHEN target = {KERNEL} THEN k_int(a."registers per thread"::VARCHAR) END AS registers_per_thread,
    CASE WHEN target = {MEMOP} THEN k_int(a.bytes::VARCHAR) END AS bytes,
    CASE WHEN target IN ({API}, {NVTX}, {THREAD}, {SHAPE}) THEN k_int(tid) END AS tid,
    CASE WHEN target = {THREAD} THEN k_int(pid)
         WHEN target = {API} AND regexp_full_match(pid, '-?[0-9]+') THEN k_int(pid) END AS pid,
    CASE WHEN target = {API} THEN CASE cat WHEN 'cuda_runtime' THEN 'runtime' ELSE 'driver' END
         WHEN target = {SYNC} THEN CASE coalesce(nullif(a.cuda_sync_kind, ''), name) {{sync_kinds}}
                                       ELSE 'unknown' END END AS kind,
    CASE WHEN target IN ({GPU_ANN}, {COMM_OP}, {SHAPE}) OR is_comm THEN k_int(a."External id"::VARCHAR) END
        AS external_id,
    CASE WHEN target = {SHAPE} THEN a."Input Dims"::VARCHAR END AS input_dims,
    CASE WHEN target = {SHAPE} THEN a."Input type"::VARCHAR END AS input_types,
    CASE WHEN target = {SHAPE} THEN a."Concrete Inputs"::VARCHAR END AS concrete_inputs,
    CASE WHEN target = {COMM_OP} OR is_comm THEN struct_pack(
        collective := a."Collective name", dtype := a.dtype,
        in_nelems := k_int(a."In msg nelems"::VARCHAR), out_nelems := k_int(a."Out msg nelems"::VARCHAR),
        in_split_size := a."In split size", out_split_size := a."Out split size",
        group_size := k_int(a."Group size"::VARCHAR), pg_name := a."Process Group Name",
        pg_desc := a."Process Group Description", pg_ranks := a."Process Group Ranks",
        seq := k_int(a."Seq"::VARCHAR)) END AS comm
FROM t
"""

# The batches' columns (batches.py schemas), taken from the wide table: (batch, target, columns).
_SPAN = ["start_ns", "end_ns"]
SPLITS = [
    (
        "kernels",
        KERNEL,
        [
            "device_id",
            "stream_id",
            *_SPAN,
            "name",
            "correlation_id",
            "grid_x",
            "grid_y",
            "grid_z",
            "block_x",
            "block_y",
            "block_z",
            "registers_per_thread",
        ],
    ),
    ("memops", MEMOP, ["device_id", "stream_id", *_SPAN, "name", "bytes", "correlation_id"]),
    ("api", API, ["tid", *_SPAN, "name", "correlation_id", "kind"]),
    ("sync", SYNC, ["device_id", "stream_id", *_SPAN, "kind", "correlation_id"]),
    ("nvtx", NVTX, ["tid", *_SPAN, "name"]),
    ("gpu_ann", GPU_ANN, ["device_id", "stream_id", *_SPAN, "name", "external_id"]),
    ("threads", THREAD, ["pid", "tid", "name"]),
    ("memory", MEMORY, ["device_id", "start_ns", "bytes_in_use", "bytes_reserved"]),
    ("ranges", RANGE, [*_SPAN, "name", *(c for c, _ in RANGE_COLUMNS)]),
    (
        "shapes",
        SHAPE,
        ["tid", *_SPAN, "name", "external_id", "input_dims", "input_types", "concrete_inputs"],
    ),
]
RENAMES = {
    ("api", "kind"): "api_class",
    ("nvtx", "name"): "text",
    ("gpu_ann", "name"): "text",
    ("memory", "start_ns"): "ts_ns",
}
COMM_FIELDS = [
    "collective",
    "dtype",
    "in_nelems",
    "out_nelems",
    "in_split_size",
    "out_split_size",
    "group_size",
    "pg_name",
    "pg_desc",
    "pg_ranks",
    "seq",
]


class NoFastPath(Exception):
    """This path cannot read the file; the ijson path will (or will say why not)."""


@dataclass
class Piece:
    """What one piece of events gives: a row set per batch and the counters."""

    tables: dict[str, pa.Table] = field(default_factory=dict)
    skipped: Counter[str] = field(default_factory=Counter)
    bad: int = 0
    devices: list[tuple[int, int]] = field(default_factory=list)  # (device, events), first seen first
    host_pids: list[tuple[int, int]] = field(default_factory=list)


def split(wide: pa.Table) -> Piece:
    """The wide table of one piece -> the batches' row sets and the counters (pyarrow, in C++).
    Every value it compares with or fills in is an Arrow scalar made by DuckDB (_constants)."""
    const = _constants()
    out = Piece()
    target = wide["target"]
    for batch, code, columns in SPLITS:
        rows = wide.select(columns).filter(pc.equal(target, const[f"code_{code}"]))
        out.tables[batch] = rows.rename_columns([RENAMES.get((batch, c), c) for c in columns])
    comm_columns = ["target", "correlation_id", "external_id", "stream_id", *_SPAN, "name", "comm"]
    comm = wide.select(comm_columns).filter(
        pc.fill_null(pc.or_(wide["is_comm"], pc.equal(target, const[f"code_{COMM_OP}"])), const["no"])
    )
    is_kernel = pc.equal(comm["target"], const[f"code_{KERNEL}"])
    fields = pc.struct_field  # comm's struct columns
    out.tables["comm"] = pa.table(
        {
            "kind": pc.if_else(is_kernel, const["kernel"], const["cpu_op"]),
            "correlation_id": comm["correlation_id"],
            "external_id": comm["external_id"],
            "stream_id": comm["stream_id"],
            "start_ns": comm["start_ns"],
            "end_ns": comm["end_ns"],
            "kernel_name": pc.if_else(is_kernel, comm["name"], const["no_name"]),
            **{f: fields(comm["comm"], f) for f in COMM_FIELDS},
        }
    )
    out.skipped.update(_counts(wide["skipped"]))
    out.bad = pc.sum(wide["bad"]).as_py() or 0
    gpu_work = pc.is_in(target, value_set=const["gpu_work"])
    out.devices = list(_counts(wide["device_id"].filter(gpu_work)).items())
    out.host_pids = list(_counts(wide["pid"].filter(pc.equal(target, const[f"code_{API}"]))).items())
    return out


@functools.cache
def _constants() -> dict[str, Any]:
    """The targets' codes, the comm rows' kinds, a NULL name, FALSE and the GPU-work codes as Arrow
    scalars made by DuckDB. Why: pyarrow imports pandas to convert any Python value to Arrow (0.4 s
    and 40 MB of a small ingest that needs no pandas: tests/test_imports.py)."""
    codes = ", ".join(f"{code}::INTEGER AS code_{code}" for code in range(KERNEL, SHAPE + 1))
    with duckdb.connect(config=OFFLINE_CONFIG) as con:
        table = con.execute(
            f"SELECT {codes}, 'kernel' AS kernel, 'cpu_op' AS cpu_op, NULL::VARCHAR AS no_name, FALSE AS no, "
            f"[{KERNEL}, {MEMOP}]::INTEGER[] AS gpu_work"
        ).to_arrow_table()
    const = {name: table[name][0] for name in table.column_names}
    const["gpu_work"] = const["gpu_work"].values  # an Array: is_in's value set
    return const


def _counts(values: pa.ChunkedArray) -> dict:
    """value -> count, non-null values only, in the order of first occurrence."""
    counts = pc.value_counts(values.drop_null()) if len(values) else []
    return {c["values"].as_py(): c["counts"].as_py() for c in counts}
