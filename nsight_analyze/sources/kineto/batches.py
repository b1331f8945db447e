"""The row sets of one file, batched into Arrow tables and inserted into DuckDB.

Why a module of its own: both parsers (the fast path's pieces, the ijson fallback's events)
fill the same row sets; each is a `Batch` of one target table with its Arrow schema and its
INSERT, flushed every BATCH_ROWS rows (ijson) or ARROW_BATCH_ROWS rows (fast path), so that
Python's memory is bounded by batches, not by the file. `RowSets` holds one file's batches,
the counters both parsers keep, and the TEMP tables the loader finishes from.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from itertools import count
from typing import Any

import duckdb
import pyarrow as pa

from ... import classify
from ...store.query_layer import statements
from .duck_json import RANGE_COLUMNS, Piece

BATCH_ROWS = 16384  # rows per table kept in Python before an Arrow flush (~100 MiB at most)
ARROW_BATCH_ROWS = 1 << 17  # rows per table of the fast path's Arrow pieces before an INSERT

SQL = statements("sources/kineto/batches")

# PyTorch scalar type names as written in NCCL op args -> element size in bytes.
DTYPE_BYTES = {
    "Float": 4,
    "Double": 8,
    "Half": 2,
    "BFloat16": 2,
    "Long": 8,
    "Int": 4,
    "Short": 2,
    "Char": 1,
    "Byte": 1,
    "Bool": 1,
    "ComplexFloat": 8,
    "ComplexDouble": 16,
    "ComplexHalf": 4,
    "Float8_e4m3fn": 1,
    "Float8_e5m2": 1,
    "Float8_e4m3fnuz": 1,
    "Float8_e5m2fnuz": 1,
    "UInt16": 2,
    "UInt32": 4,
    "UInt64": 8,
    "QInt8": 1,
    "QUInt8": 1,
    "QInt32": 4,
}

SYNC_KINDS = {
    "Stream Sync": "stream",
    "Event Sync": "event",
    "Context Sync": "context",
    "Stream Wait Event": "stream_wait_event",
}


_batch_counter = count()


class Batch:
    """Rows of one target, flushed into DuckDB as an Arrow table every `batch_rows` rows.

    The ijson path adds rows as tuples (one append per event), transposed into columns at
    flush time by zip(*rows), which runs in C; the fast path adds Arrow tables.
    """

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        schema: pa.Schema,
        insert: str | Callable[[str], None],
        batch_rows: int = BATCH_ROWS,
        values: dict[str, object] | None = None,
    ):
        """`insert`: the name of a batches.sql INSERT whose `$src` is the registered Arrow table
        (its other placeholders `values`), or a function of the table's name."""
        self.con, self.schema, self.insert, self.batch_rows = con, schema, insert, batch_rows
        self.values = values or {}
        self.pending: list[tuple] = []
        self.tables: list[pa.Table] = []
        self.table_rows = 0
        self.total = 0

    def add(self, *values: Any) -> None:
        self.pending.append(values)
        if len(self.pending) >= self.batch_rows:
            self.flush()

    def add_table(self, table: pa.Table) -> None:
        """Rows with this batch's columns (by name; types are cast), inserted with later ones."""
        if table.num_rows:
            self.tables.append(table)
            self.table_rows += table.num_rows
            if self.table_rows >= ARROW_BATCH_ROWS:
                self.flush()

    def flush(self) -> None:
        if self.pending:
            columns = zip(*self.pending, strict=True)
            self.tables.append(
                pa.Table.from_arrays(
                    [pa.array(col, type=f.type) for col, f in zip(columns, self.schema, strict=True)],
                    schema=self.schema,
                )
            )
            self.pending = []
        if not self.tables:
            return
        table = pa.concat_tables(self.tables, promote_options="permissive")
        self.tables, self.table_rows = [], 0
        name = f"kineto_batch_{next(_batch_counter)}"
        # the table as an Arrow stream (PyCapsule): DuckDB imports pandas to register a Python
        # object (0.4 s and 40 MB of a small ingest), not to read a capsule; a stream is read once
        self.con.register(name, self.con.from_arrow(table.__arrow_c_stream__()))
        try:
            if callable(self.insert):  # it may read the rows more than once: a table of them
                self.con.execute(SQL.sql("rows_table", name=name))
                try:
                    self.insert(f"{name}_rows")
                finally:
                    self.con.execute(f"DROP TABLE {name}_rows")
            else:
                self.con.execute(SQL.sql(self.insert, src=name, **self.values))
        finally:
            self.con.unregister(name)
        self.total += table.num_rows


def _schema(*cols: tuple[str, pa.DataType]) -> pa.Schema:
    return pa.schema([pa.field(n, t) for n, t in cols])


I64, I32, STR = pa.int64(), pa.int32(), pa.string()
_DUCK_TYPES = {I64: "BIGINT", I32: "INTEGER", STR: "VARCHAR"}  # a TEMP table's column of each

KERNEL_SCHEMA = _schema(
    ("device_id", I32),
    ("stream_id", I64),
    ("start_ns", I64),
    ("end_ns", I64),
    ("name", STR),
    ("correlation_id", I64),
    ("grid_x", I32),
    ("grid_y", I32),
    ("grid_z", I32),
    ("block_x", I32),
    ("block_y", I32),
    ("block_z", I32),
    ("registers_per_thread", I32),
)
MEMOP_SCHEMA = _schema(
    ("device_id", I32),
    ("stream_id", I64),
    ("start_ns", I64),
    ("end_ns", I64),
    ("name", STR),
    ("bytes", I64),
    ("correlation_id", I64),
)
API_SCHEMA = _schema(
    ("tid", I64),
    ("start_ns", I64),
    ("end_ns", I64),
    ("name", STR),
    ("correlation_id", I64),
    ("api_class", STR),
)
SYNC_SCHEMA = _schema(
    ("device_id", I32),
    ("stream_id", I64),
    ("start_ns", I64),
    ("end_ns", I64),
    ("kind", STR),
    ("correlation_id", I64),
)
NVTX_SCHEMA = _schema(("tid", I64), ("start_ns", I64), ("end_ns", I64), ("text", STR))
GPU_ANNOTATION_SCHEMA = _schema(
    ("device_id", I32),
    ("stream_id", I64),
    ("start_ns", I64),
    ("end_ns", I64),
    ("text", STR),
    ("external_id", I64),
)
COMM_SCHEMA = _schema(
    ("kind", STR),
    ("correlation_id", I64),
    ("external_id", I64),
    ("stream_id", I64),
    ("start_ns", I64),
    ("end_ns", I64),
    ("kernel_name", STR),
    ("collective", STR),
    ("dtype", STR),
    ("in_nelems", I64),
    ("out_nelems", I64),
    ("in_split_size", STR),
    ("out_split_size", STR),
    ("group_size", I32),
    ("pg_name", STR),
    ("pg_desc", STR),
    ("pg_ranks", STR),
    ("seq", I64),
)
THREAD_SCHEMA = _schema(("pid", I64), ("tid", I64), ("name", STR))
MEMORY_SCHEMA = _schema(("device_id", I32), ("ts_ns", I64), ("bytes_in_use", I64), ("bytes_reserved", I64))
RANGE_SCHEMA = _schema(
    ("start_ns", I64), ("end_ns", I64), ("name", STR), *((c, I64) for c, _ in RANGE_COLUMNS)
)
SHAPE_SCHEMA = _schema(
    ("tid", I64), ("start_ns", I64), ("end_ns", I64), ("name", STR), ("external_id", I64),
    ("input_dims", STR), ("input_types", STR), ("concrete_inputs", STR),
)  # fmt: skip


class RowSets:
    """One file's batches (one per target, by the names duck_json.SPLITS uses) and the
    counters both parsers keep; `tmp` names the TEMP tables of the rows the loader finishes
    from (collectives, threads, profiler ranges)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, rank: int, batch_rows: int = BATCH_ROWS):
        self.con, self.rank = con, rank
        self.tmp = f"kineto_comm_{next(_batch_counter)}"
        self.skipped: Counter[str] = Counter()
        self.devices: Counter[int] = Counter()
        self.host_pids: Counter[int] = Counter()
        self.bad = 0
        values = {"rank": int(rank), "tmp": self.tmp}  # the inserts' placeholders besides $src

        def batch(schema: pa.Schema, insert: str | Callable[[str], None]) -> Batch:
            return Batch(con, schema, insert, batch_rows, values)

        self.kernels = batch(KERNEL_SCHEMA, self._insert_kernels)
        self.memops = batch(MEMOP_SCHEMA, "insert_memops")
        self.api = batch(API_SCHEMA, "insert_api")
        self.sync = batch(SYNC_SCHEMA, "insert_sync")
        self.nvtx = batch(NVTX_SCHEMA, "insert_nvtx")
        self.gpu_ann = batch(GPU_ANNOTATION_SCHEMA, "insert_gpu_ann")
        self.comm = batch(COMM_SCHEMA, "insert_comm")
        self.threads = batch(THREAD_SCHEMA, "insert_threads")
        self.memory = batch(MEMORY_SCHEMA, "insert_memory")
        self.ranges = batch(RANGE_SCHEMA, "insert_ranges")
        self.shapes = batch(SHAPE_SCHEMA, "insert_shapes")

    def by_target(self) -> dict[str, Batch]:
        """The row sets, by the names duck_json.SPLITS uses (and `comm`)."""
        return {
            "kernels": self.kernels,
            "memops": self.memops,
            "api": self.api,
            "sync": self.sync,
            "nvtx": self.nvtx,
            "gpu_ann": self.gpu_ann,
            "comm": self.comm,
            "threads": self.threads,
            "memory": self.memory,
            "ranges": self.ranges,
            "shapes": self.shapes,
        }

    def create_temp(self) -> None:
        for suffix, schema in (("", COMM_SCHEMA), ("_threads", THREAD_SCHEMA), ("_ranges", RANGE_SCHEMA)):
            columns = ", ".join(f"{f.name} {_DUCK_TYPES[f.type]}" for f in schema)
            self.con.execute(SQL.sql("create_row_table", table=self.tmp + suffix, columns=columns))

    def drop_temp(self) -> None:
        for suffix in ("", "_threads", "_names", "_ranges"):
            self.con.execute(f"DROP TABLE IF EXISTS {self.tmp}{suffix}")

    def flush(self) -> None:
        for batch in self.by_target().values():
            batch.flush()

    def add_piece(self, parsed: Piece) -> None:
        """One piece of the fast path: its row sets and counters."""
        batches = self.by_target()
        for name, table in parsed.tables.items():
            batches[name].add_table(table)
        self.skipped.update(parsed.skipped)
        self.bad += parsed.bad
        for device, n in parsed.devices:
            self.devices[device] += n
        for pid, n in parsed.host_pids:
            self.host_pids[pid] += n

    def undo(self) -> None:
        """Forget what the fast path loaded (this rank's rows are only this file's)."""
        batches = self.by_target()
        if any(b.total for b in batches.values()):
            for table in (
                "kernels", "memops", "cuda_api", "sync", "nvtx", "kineto_gpu_annotations", "memory_usage",
                "kineto_op_shapes",
            ):  # fmt: skip
                self.con.execute(SQL.sql("delete_rank_rows", table=table), [self.rank])
            for suffix in ("", "_threads", "_ranges"):
                self.con.execute(SQL.sql("delete_all_rows", table=f"{self.tmp}{suffix}"))
        for batch in batches.values():
            batch.total = batch.table_rows = 0
            batch.tables = []
        self.skipped.clear()
        self.devices.clear()
        self.host_pids.clear()
        self.bad = 0

    def _insert_kernels(self, src: str) -> None:
        """Kernels go to `kernels` classified, as nsys files' do (classify.classify_kernels would
        otherwise move them out and back again): the rules and the short name are applied once
        per distinct name of the batch, then joined."""
        names = f"{self.tmp}_names"
        classify.build_name_map(self.con, SQL.sql("kernel_names", src=src), names)
        self.con.execute(SQL.sql("insert_kernels", rank=int(self.rank), src=src, names=names))
