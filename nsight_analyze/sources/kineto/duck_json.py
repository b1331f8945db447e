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
to the ijson path (events.py), which loads the file or reports the exact reason. The SQL (the
macros, the two readers of a piece, the events statement) is queries/sources/kineto/duck_json.sql;
this module fills in the field lists and the target codes, once per process.

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
from ...store.query_layer import statements

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

SQL = statements("sources/kineto/duck_json")
# The parser's macros (duck_parser creates them on its private database): exact integers and ns.
MACROS = [SQL[name] for name in ("k_int_macro", "k_digits_macro", "k_ns_macro", "k_ns_raw_macro")]


def sql_str(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


# read_json's `columns` and json_transform's structure: the fields above, as DuckDB literals.
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
# The two ways to read a piece (the statements' names): the fast reader, else raw mode.
SOURCE_FAST = "fast_source"
SOURCE_RAW = "raw_source"
_SOURCE_VALUES = {
    "columns": _COLUMNS,
    "structure": _STRUCTURE,
    "ts_number": SQL.sql("raw_number", key="ts"),
    "dur_number": SQL.sql("raw_number", key="dur"),
}

# Targets (row sets of batches.RowSets) an event feeds; an NCCL kernel also feeds `comm`.
KERNEL, MEMOP, API, SYNC, NVTX, GPU_ANN, THREAD, COMM_OP, MEMORY, RANGE, SHAPE = range(1, 12)
_CODES = {
    "kernel": KERNEL,
    "memop": MEMOP,
    "api": API,
    "sync": SYNC,
    "nvtx": NVTX,
    "gpu_ann": GPU_ANN,
    "thread": THREAD,
    "comm_op": COMM_OP,
    "memory": MEMORY,
    "range": RANGE,
    "shape": SHAPE,
}
# The events statement's values but the piece's source and the sync kinds, filled once per process.
_EVENTS_VALUES = {
    **_CODES,
    "cuda_device_type": CUDA_DEVICE_TYPE,
    "shape_ops": sql_str(SHAPE_OPS),
    "handled": ", ".join(sql_str(c) for c in HANDLED),
    "counters": ", ".join(
        SQL.sql("range_counter", range=RANGE, metric=metric, column=column)
        for column, metric in RANGE_COLUMNS
    ),
    "dims": ", ".join(
        SQL.sql("launch_dim", kernel=KERNEL, arg=arg, index=i + 1, axis=axis)
        for arg in ("grid", "block")
        for i, axis in enumerate("xyz")
    ),
}


def sync_kind_cases(kinds: dict[str, str]) -> str:
    """The events statement's `$sync_kinds`: a WHEN branch per cuda_sync kind (batches.SYNC_KINDS)."""
    return " ".join(SQL.sql("sync_kind_case", kind=sql_str(k), label=sql_str(v)) for k, v in kinds.items())


def events_sql(source: str, src: str, sync_kinds: str) -> str:
    """The SELECT of one piece's wide rows: the piece in file `src` read by `source` (SOURCE_FAST
    or SOURCE_RAW), `sync_kinds` from sync_kind_cases. Filled per piece (well under a millisecond,
    against the parse of megabytes); the statement file is read once per process."""
    piece = SQL.sql(source, src=sql_str(src), **_SOURCE_VALUES)
    return SQL.sql("events", source=piece, sync_kinds=sync_kinds, **_EVENTS_VALUES)


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
    codes = ", ".join(SQL.sql("target_code", code=code) for code in range(KERNEL, SHAPE + 1))
    with duckdb.connect(config=OFFLINE_CONFIG) as con:
        table = con.execute(
            SQL.sql("arrow_constants", codes=codes, kernel=KERNEL, memop=MEMOP)
        ).to_arrow_table()
    const = {name: table[name][0] for name in table.column_names}
    const["gpu_work"] = const["gpu_work"].values  # an Array: is_in's value set
    return const


def _counts(values: pa.ChunkedArray) -> dict:
    """value -> count, non-null values only, in the order of first occurrence."""
    counts = pc.value_counts(values.drop_null()) if len(values) else []
    return {c["values"].as_py(): c["counts"].as_py() for c in counts}
