"""SQL over one attached Nsight Systems export, built from the columns the file has.

Why its own module: every table's SELECT (nsys_loader.py) is written through these few helpers,
which hide what differs between export schemas from 2021 to 2026 (a column a file lacks reads as
its default, an id column is resolved through StringIds, an enum code through the file's ENUM
table or the built-in names below), so the loader reads as one statement per table.
"""

from __future__ import annotations

from .base import LoadResult
from .nsys_meta import PID_DIVISOR, NsysMeta

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
ABI_SUFFIX = "'_v[0-9]{4,}$'"  # cudaLaunchKernel_v7000 -> cudaLaunchKernel


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
            expr = f'x."{column}"'
            return f"CAST({expr} AS {cast})" if cast else expr
        return default if cast is None else f"CAST({default} AS {cast})"

    def string(self, table: str, column: str) -> tuple[str, str]:
        """(select expression, join clause) resolving an id column through StringIds."""
        if not self.meta.has(table, column):
            return "NULL", ""
        j = f"s_{column}"
        return f"{j}.value", f' LEFT JOIN {self.t("StringIds")} {j} ON {j}.id = x."{column}"'

    def insert(self, target: str, sql: str) -> int:
        n = self.con.execute(f"INSERT INTO {target} {sql}").fetchone()[0]
        self.result.counts[target] = self.result.counts.get(target, 0) + n
        return n

    def count(self, table: str, where: str = "") -> int:
        return self.con.execute(f"SELECT count(*) FROM {self.t(table)} x {where}").fetchone()[0]

    @staticmethod
    def pid_expr(column: str) -> str:
        """globalPid of a globalPid/globalTid column (clears the thread bits)."""
        return f'(x."{column}" // {PID_DIVISOR}) * {PID_DIVISOR}'

    def enum_map(self, enum_table: str, fallback: dict[int, str], column: str, alias: str) -> tuple[str, str]:
        """A CASE over the built-in names; the file's ENUM table, when present and not empty, wins."""
        case = "CASE " + " ".join(f"WHEN {column} = {k} THEN '{v}'" for k, v in fallback.items())
        case += f" ELSE 'kind ' || CAST({column} AS VARCHAR) END"
        if self.meta.has(enum_table, "name") and self.meta.has(enum_table, "id"):
            n = self.con.execute(f"SELECT count(*) FROM {self.t(enum_table)}").fetchone()[0]
            if n:
                label = "label" if self.meta.has(enum_table, "label") else "name"
                pretty = _enum_pretty_sql(f"{alias}.name", f"{alias}.{label}")
                join = f" LEFT JOIN {self.t(enum_table)} {alias} ON {alias}.id = {column}"
                return f"COALESCE({pretty}, {case})", join
        return case, ""

    def ranked(self, table: str, column: str = "globalPid") -> str:
        """FROM clause keeping the rows of processes that are ranks, with their rank as m.rank."""
        pid = self.pid_expr(column)
        return f" FROM {self.t(table)} x JOIN {self.rank_map} m ON m.global_pid = {pid}"


def _enum_pretty_sql(name_col: str, label_col: str) -> str:
    """ENUM names like CUDA_MEMCPY_KIND_HTOD / CUDA_MEMOPR_MEMORY_KIND_PINNED -> HtoD / Pinned."""
    return f"""CASE
        WHEN {name_col} LIKE 'CUDA_MEMCPY_KIND_%' THEN
            CASE regexp_extract({name_col}, 'CUDA_MEMCPY_KIND_(\\w+)', 1)
                WHEN 'HTOD' THEN 'HtoD' WHEN 'DTOH' THEN 'DtoH'
                WHEN 'HTOA' THEN 'HtoA' WHEN 'ATOH' THEN 'AtoH'
                WHEN 'ATOA' THEN 'AtoA' WHEN 'ATOD' THEN 'AtoD'
                WHEN 'DTOA' THEN 'DtoA' WHEN 'DTOD' THEN 'DtoD'
                WHEN 'HTOH' THEN 'HtoH' WHEN 'PTOP' THEN 'PtoP' WHEN 'UNKNOWN' THEN 'Unknown'
                ELSE NULL END
        WHEN {label_col} IS NOT NULL AND {name_col} LIKE 'CUDA_MEMOPR_MEMORY_KIND_%' THEN {label_col}
        ELSE NULL END"""
