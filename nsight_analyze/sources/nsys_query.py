"""SQL over one attached Nsight Systems export, built from the columns the file has.

Why its own module: every table's SELECT (nsys_loader.py) is written through these few helpers,
which hide what differs between export schemas from 2021 to 2026 (a column a file lacks reads as
its default, an id column is resolved through StringIds, an enum code through the file's ENUM
table or the built-in names below), so the loader reads as one statement per table. The SQL
pieces, join clauses included, are queries/sources/nsys_query.sql's.
"""

from __future__ import annotations

from ..store.query_layer import statements
from .base import LoadResult
from .nsys_meta import PID_DIVISOR, NsysMeta

SQL = statements("sources/nsys_query")

# Built-in fallbacks for exports without (or with empty) ENUM tables (§6 of the schema doc).
MEMCPY_KINDS = {
    0: "Unknown",
    1: "HtoD",
    2: "DtoH",
    3: "HtoA",
    4: "AtoH",
    5: "AtoA",
    6: "AtoD",
    7: "DtoA",
    8: "DtoD",
    9: "HtoH",
    10: "PtoP",
    11: "Unified Memory HtoD",
    12: "Unified Memory DtoH",
    13: "Unified Memory DtoD",
}
MEM_KINDS = {
    0: "Pageable",
    1: "Pinned",
    2: "Device",
    3: "Array",
    4: "Managed",
    5: "Device Static",
    6: "Managed Static",
    7: "Unknown",
}
DEVICE_MEM_KINDS = (2, 5)  # MEM_KINDS: Device, Device Static (what counts against the GPU's capacity)
SYNC_TYPES = {0: "unknown", 1: "event", 2: "stream_wait_event", 3: "stream", 4: "context"}
NVTX_TYPES = {59: "push_pop", 60: "start_end", 70: "push_pop", 71: "start_end", 34: "mark"}
API_CLASSES = {0: "runtime", 1: "driver"}
ABI_SUFFIX = SQL.sql("abi_suffix")  # cudaLaunchKernel_v7000 -> cudaLaunchKernel


class ExportQuery:
    """The helpers one file's INSERT ... SELECT statements are built from (nsys_loader.Loader)."""

    def __init__(
        self, con, alias: str, meta: NsysMeta, file_id: int, ranks: dict[int, int], result: LoadResult
    ):
        self.con, self.alias, self.meta, self.file_id, self.ranks, self.result = (
            con,
            alias,
            meta,
            file_id,
            ranks,
            result,
        )
        self.rank_map = f"rank_map_{alias}"

    # -- helpers -------------------------------------------------------------------
    def t(self, table: str) -> str:
        return f'{self.alias}."{table}"'

    def col(self, table: str, column: str, default: str = "NULL", cast: str | None = None) -> str:
        if self.meta.has(table, column):
            expr = SQL.sql("column_of_row", column=column)
            return SQL.sql("cast_to", expr=expr, type=cast) if cast else expr
        return default if cast is None else SQL.sql("cast_to", expr=default, type=cast)

    def string(self, table: str, column: str) -> tuple[str, str]:
        """(select expression, join clause) resolving an id column through StringIds."""
        if not self.meta.has(table, column):
            return "NULL", ""
        j = f"s_{column}"
        join = SQL.sql("string_join", strings=self.t("StringIds"), alias=j, column=column)
        return SQL.sql("string_value", strings=j), f" {join}"

    def insert(self, target: str, sql: str) -> int:
        n = self.con.execute(SQL.sql("insert_rows", target=target, select=sql)).fetchone()[0]
        self.result.counts[target] = self.result.counts.get(target, 0) + n
        return n

    def count(self, table: str, condition: str = "") -> int:
        """Rows of `table` (as x), of those meeting `condition` when one is given."""
        if condition:
            sql = SQL.sql("row_count_where", table=self.t(table), condition=condition)
        else:
            sql = SQL.sql("row_count", table=self.t(table))
        return self.con.execute(sql).fetchone()[0]

    @staticmethod
    def pid_expr(column: str) -> str:
        """globalPid of a globalPid/globalTid column (clears the thread bits)."""
        return SQL.sql("pid_of_tid", column=column, divisor=PID_DIVISOR)

    def enum_map(self, enum_table: str, fallback: dict[int, str], column: str, alias: str) -> tuple[str, str]:
        """A CASE over the built-in names; the file's ENUM table, when present and not empty, wins."""
        case = SQL.sql("enum_fallback", whens=self.whens(column, fallback), column=column)
        if self.meta.has(enum_table, "name") and self.meta.has(enum_table, "id"):
            n = self.con.execute(f"SELECT count(*) FROM {self.t(enum_table)}").fetchone()[0]
            if n:
                label = "label" if self.meta.has(enum_table, "label") else "name"
                pretty = SQL.sql("enum_pretty", name_col=f"{alias}.name", label_col=f"{alias}.{label}")
                join = SQL.sql("enum_join", enum=self.t(enum_table), alias=alias, column=column)
                return SQL.sql("enum_label", pretty=pretty, fallback=case), f" {join}"
        return case, ""

    def ranked(self, table: str, column: str = "globalPid") -> str:
        """FROM clause keeping the rows of processes that are ranks, with their rank as m.rank."""
        pid = self.pid_expr(column)
        return " " + SQL.sql("ranked_rows", table=self.t(table), rank_map=self.rank_map, pid=pid)

    @staticmethod
    def whens(column: str, labels: dict[int, str]) -> str:
        """The WHEN branches of a CASE naming each code of `column` (`labels`: code -> name)."""
        return " ".join(SQL.sql("code_label", column=column, code=k, label=v) for k, v in labels.items())
