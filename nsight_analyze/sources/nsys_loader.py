"""One Nsight Systems export's event tables -> canonical tables, one INSERT ... SELECT each.

Why its own module: nsys_sqlite.py is the source interface (sniff, probe, load, release); this is
what its load() runs inside the file's transaction. Each table's rows are streamed by DuckDB from
the attached export into the workspace, never through Python, and what is not loaded is counted
in the file's `skipped` list or said in its warnings. The statements are
queries/sources/nsys_loader.sql's (read once per process), filled per file with the expressions
the file's columns give.
"""

from __future__ import annotations

from .. import classify
from ..store.duck import sql_rows, sql_value
from ..store.query_layer import statements
from . import nsys_meta, nvtx_binary
from .base import CORRUPT_TIMING
from .nsys_meta import KERNEL_NAME_IDS, PID_DIVISOR
from .nsys_query import (
    ABI_SUFFIX,
    API_CLASSES,
    DEVICE_MEM_KINDS,
    MEM_KINDS,
    MEMCPY_KINDS,
    NVTX_TYPES,
    SYNC_TYPES,
    ExportQuery,
)

SQL = statements("sources/nsys_loader")

# Tables that are read elsewhere or deliberately not loaded; their row counts are reported.
REPORTED_UNUSED = (
    "CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
    "OSRT_API",
    "MPI_P2P_EVENTS",
    "MPI_COLLECTIVES_EVENTS",
    "CUDNN_EVENTS",
    "CUBLAS_EVENTS",
    "CUDA_GRAPH_EVENTS",
    "CUDA_GRAPH_NODE_EVENTS",
    "CUPTI_ACTIVITY_KIND_OPENACC_LAUNCH",
    "CUPTI_ACTIVITY_KIND_OPENMP",
)


class Loader(ExportQuery):
    """One file's INSERT ... SELECT statements, built from the columns the file has."""

    # -- tables --------------------------------------------------------------------
    def load_all(self) -> None:
        self.con.execute(SQL.sql("create_rank_map", rank_map=self.rank_map))
        try:
            if self.ranks:
                rows = sql_rows(list(self.ranks.items()))
                self.con.execute(SQL.sql("insert_values", table=self.rank_map, rows=rows))
            self.load_kernels()
            self.load_memcpy()
            self.load_memset()
            self.load_api()
            self.load_sync()
            self.load_nvtx()
            self.load_threads()
            self.load_gpu_metrics()
            self.load_memory_usage()
            self.load_gpus_env()
            self.report_unused()
            self.report_past_capture()
        finally:
            self.con.execute(f"DROP TABLE IF EXISTS {self.rank_map}")

    def load_kernels(self) -> None:
        table = "CUPTI_ACTIVITY_KIND_KERNEL"
        if not self.meta.has(table):
            return
        names = self.kernel_names(table)
        graph_id = self.col(table, "graphId", cast="BIGINT")
        dn, sn = (self.col(table, c, "-1") for c in KERNEL_NAME_IDS)
        try:
            sql = SQL.sql(
                "kernel_rows",
                registers=self.col(table, "registersPerThread", cast="INTEGER"),
                static_shared=self.col(table, "staticSharedMemory", cast="BIGINT"),
                dynamic_shared=self.col(table, "dynamicSharedMemory", cast="BIGINT"),
                graph_id=graph_id,
                graph_node_id=self.col(table, "graphNodeId", cast="BIGINT"),
                table=self.t(table),
                rank_map=self.rank_map,
                pid=self.pid_expr("globalPid"),
                names=names,
                dn=dn,
                sn=sn,
            )
            self.insert("kernels", sql)
        finally:
            self.con.execute(f"DROP TABLE IF EXISTS {names}")

    def kernel_names(self, table: str) -> str:
        """A temp table of the file's distinct kernel name id pairs with their text and category.

        Names are resolved and classified once per distinct (demangled, short) id pair, so
        the insert of millions of kernels needs one small join instead of three.
        """
        names = f"kernel_names_{self.alias}"
        name, j1 = self.string(table, "demangledName")
        short, j2 = self.string(table, "shortName")
        dn, sn = (self.col(table, c, "-1") for c in KERNEL_NAME_IDS)
        pairs = self.meta.kernel_name_ids  # found by the probe's census of the kernels
        self.con.execute(
            SQL.sql(
                "kernel_name_ids",
                names=names,
                dn=dn,
                sn=sn,
                name=name,
                short=short,
                demangled_ids=sql_value([p[0] for p in pairs]),
                short_ids=sql_value([p[1] for p in pairs]),
                joins=f"{j1}{j2}",
            )
        )
        classify.build_name_map(self.con, SQL.sql("kernel_name_texts", names=names), f"{names}_map")
        self.con.execute(SQL.sql("kernel_names_classified", names=names))
        self.con.execute(f"DROP TABLE {names}_map")
        return names

    def load_memcpy(self) -> None:
        table = "CUPTI_ACTIVITY_KIND_MEMCPY"
        if not self.meta.has(table):
            return
        kind, jk = self.enum_map("ENUM_CUDA_MEMCPY_OPER", MEMCPY_KINDS, "x.copyKind", "ek")
        src, js = self.enum_map("ENUM_CUDA_MEM_KIND", MEM_KINDS, "x.srcKind", "es")
        dst, jd = self.enum_map("ENUM_CUDA_MEM_KIND", MEM_KINDS, "x.dstKind", "ed")
        sql = SQL.sql(
            "memcpy_rows",
            kind=kind,
            src=src,
            dst=dst,
            graph_node_id=self.col(table, "graphNodeId", cast="BIGINT"),
            ranked=self.ranked(table),
            joins=f"{jk}{js}{jd}",
        )
        self.insert("memops", sql)

    def load_memset(self) -> None:
        table = "CUPTI_ACTIVITY_KIND_MEMSET"
        if not self.meta.has(table):
            return
        if self.meta.has(table, "memKind"):
            mem, jm = self.enum_map("ENUM_CUDA_MEM_KIND", MEM_KINDS, "x.memKind", "em")
        else:
            mem, jm = "NULL", ""
        sql = SQL.sql(
            "memset_rows",
            mem=mem,
            graph_node_id=self.col(table, "graphNodeId", cast="BIGINT"),
            ranked=self.ranked(table),
            joins=jm,
        )
        self.insert("memops", sql)

    def load_api(self) -> None:
        table = "CUPTI_ACTIVITY_KIND_RUNTIME"
        if not self.meta.has(table):
            return
        api_class = self.col(table, "eventClass", "NULL")
        class_case = SQL.sql("api_class", whens=self.whens(api_class, API_CLASSES))
        if self.meta.has(table, "nameId"):
            # the ABI suffix is cut once per string (far fewer than calls), not once per call
            names = SQL.sql("api_names", abi_suffix=ABI_SUFFIX, strings=self.t("StringIds"))
            name, join = "n.name", " " + SQL.sql("api_names_join", names=names)
        elif self.meta.has(table, "name"):
            name, join = SQL.sql("api_name_of_row", abi_suffix=ABI_SUFFIX), ""
        else:
            name, join = "NULL", ""
        sql = SQL.sql(
            "api_rows",
            pid_divisor=PID_DIVISOR,
            name=name,
            return_value=self.col(table, "returnValue", cast="BIGINT"),
            api_class=class_case,
            ranked=self.ranked(table, "globalTid"),
            joins=join,
        )
        if self.meta.row_counts.get(table, 0) > self.insert("cuda_api", sql):
            self.report_api_only(table)

    def report_api_only(self, table: str) -> None:
        """Calls of processes that ran no GPU work (launchers) are not ranks: count them."""
        pid = self.pid_expr("globalTid")
        rows = self.con.execute(
            SQL.sql("api_only_processes", pid=pid, table=self.t(table), rank_map=self.rank_map)
        ).fetchall()
        self.result.skipped.append(
            f"cuda_api: {sum(n for _, n in rows)} rows of processes without GPU activity"
        )
        pids = ", ".join("?" if p is None else str(p // PID_DIVISOR % PID_DIVISOR) for p, _ in rows)
        self.result.warnings.append(f"process(es) {pids} made CUDA API calls but ran no GPU work: not ranks")

    def load_sync(self) -> None:
        table = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
        if not self.meta.has(table):
            return
        stype = self.col(table, "syncType", "0")
        sql = SQL.sql(
            "sync_rows",
            sync_type=SQL.sql("sync_type", whens=self.whens(stype, SYNC_TYPES)),
            event_id=self.col(table, "eventId", cast="BIGINT"),
            ranked=self.ranked(table),
        )
        self.insert("sync", sql)

    def load_nvtx(self) -> None:
        table = "NVTX_EVENTS"
        if not self.meta.has(table):
            return
        text_id, jt = self.string(table, "textId")
        text = SQL.sql("nvtx_text", text_id=text_id, text=self.col(table, "text"))
        json_id, jj = self.string(table, "jsonTextId")
        # an export without --include-json: the payload decoded from binaryData (nvtx_binary)
        binary, jb = nvtx_binary.payload_join(self.alias, self.meta)
        payload = SQL.sql(
            "nvtx_payload", json_id=json_id, json_text=self.col(table, "jsonText"), binary=binary
        )
        pid = self.pid_expr("globalTid")
        domain_col = self.col(table, "domainId", "0")
        type_case = SQL.sql("nvtx_type", whens=self.whens("x.eventType", NVTX_TYPES))
        types = ", ".join(str(k) for k in NVTX_TYPES)
        domains = SQL.sql(
            "nvtx_domains",
            pid=pid,
            domain_col=domain_col,
            text_id=text_id,
            text=self.col(table, "text"),
            table=self.t(table),
            joins=jt,
        )
        sql = SQL.sql(
            "nvtx_rows",
            pid_divisor=PID_DIVISOR,
            text=text,
            nvtx_type=type_case,
            payload=payload,
            table=self.t(table),
            rank_map=self.rank_map,
            pid=pid,
            joins=f"{jt}{jj}{jb}",
            domains=domains,
            domain_col=domain_col,
            types=types,
        )
        self.insert("nvtx", sql)
        other = self.count(table, SQL.sql("nvtx_other_types", types=types))
        if other:
            self.result.skipped.append(f"NVTX_EVENTS: {other} naming/domain rows (metadata, not ranges)")
        undecoded = nvtx_binary.undecoded(self.con, self.alias, self.meta)
        if undecoded:
            self.result.skipped.append(
                f"NVTX_EVENTS: {undecoded} binary payloads with no known schema (not decoded)"
            )
        self._report_unmapped_where(table, types)

    def _report_unmapped_where(self, table: str, types: str) -> None:
        total = self.count(table, SQL.sql("nvtx_range_types", types=types))
        loaded = self.result.counts.get("nvtx", 0)
        if total != loaded:
            self.result.skipped.append(f"nvtx: {total - loaded} ranges of processes without GPU activity")

    def load_threads(self) -> None:
        table = "ThreadNames"
        if not self.meta.has(table, "globalTid"):
            return
        name, jn = self.string(table, "nameId")
        sql = SQL.sql(
            "thread_rows",
            pid_divisor=PID_DIVISOR,
            name=name,
            ranked=self.ranked(table, "globalTid"),
            joins=jn,
        )
        self.insert("threads", sql)

    def load_gpu_metrics(self) -> None:
        if not (
            self.meta.has("GPU_METRICS", "metricId")
            and self.meta.has("TARGET_INFO_GPU_METRICS", "metricName")
        ):
            return
        single_rank = next(iter(self.ranks.values())) if len(self.ranks) == 1 else None
        rank = "NULL" if single_rank is None else str(single_rank)
        # source/host/GPU identity as DCGM rows have them (schema.sql: gpu_metrics is shared)
        host = "NULL" if self.meta.hostname is None else "'" + self.meta.hostname.replace("'", "''") + "'"
        utc0 = self.meta.session_start_utc_ns
        utc = "NULL" if utc0 is None else SQL.sql("metric_utc", utc0=int(utc0))
        has_gpu = self.meta.has("TARGET_INFO_GPU", "id") and self.meta.has("TARGET_INFO_GPU", "uuid")
        uuid, name, jg = "NULL", "NULL", ""
        if has_gpu:
            uuid = "g.uuid"
            name = "g.name" if self.meta.has("TARGET_INFO_GPU", "name") else "NULL"
            gpus = SQL.sql("metric_gpus", gpus=self.t("TARGET_INFO_GPU"))
            jg = " " + SQL.sql("metric_gpus_join", gpus=gpus)
        sql = SQL.sql(
            "gpu_metric_rows",
            rank=rank,
            file_id=int(self.file_id),
            host=host,
            uuid=uuid,
            name=name,
            utc=utc,
            metrics=self.t("GPU_METRICS"),
            metric_names=self.t("TARGET_INFO_GPU_METRICS"),
            joins=jg,
        )
        n = self.con.execute(SQL.sql("insert_gpu_metrics", select=sql)).fetchone()[0]
        self.result.counts["gpu_metrics"] = self.result.counts.get("gpu_metrics", 0) + n

    def load_memory_usage(self) -> None:
        """nsys --cuda-memory-usage rows -> memory_usage: per process and device, the running sum of
        Device / Device Static allocations minus frees, in time order (frees first at one ns).
        Host (pageable, pinned) and managed memory is not device capacity: counted, not loaded."""
        table = "CUDA_GPU_MEMORY_USAGE_EVENTS"
        needed = ("start", "globalPid", "deviceId", "bytes", "memKind", "memoryOperationType")
        if not all(self.meta.has(table, c) for c in needed):
            return
        device = SQL.sql("device_memory", kinds=", ".join(str(k) for k in DEVICE_MEM_KINDS))
        order = SQL["memory_order_with_address" if self.meta.has(table, "address") else "memory_order"]
        sql = SQL.sql("memory_usage_rows", order=order, ranked=self.ranked(table), device=device)
        n = self.insert("memory_usage", sql)
        other = self.count(table, SQL.sql("not_device_memory", device=device))
        if other:
            self.result.skipped.append(f"{table}: {other} rows of host or managed memory (not device memory)")
        if n:
            low = self.con.execute(SQL.sql("memory_below_zero", rank_map=self.rank_map)).fetchone()[0]
            if low:
                self.result.warnings.append(
                    f"{table}: memory freed that was allocated before the capture started ({low} rows below "
                    "zero): bytes in use count only the capture's allocations, so the peak is a lower bound"
                )

    def load_gpus_env(self) -> None:
        rows = []
        for gpid, rank in self.ranks.items():
            dev = self.meta.gpu_processes.get(gpid)
            g = self.meta.gpus.get((gpid, dev)) or nsys_meta.GpuInfo()
            rows.append(
                (
                    rank,
                    dev,
                    g.name,
                    g.sm_count,
                    g.clock_hz,
                    g.memory_bandwidth_bps,
                    g.memory_bytes,
                    g.compute_major,
                    g.compute_minor,
                    g.uuid,
                    g.bus_location,
                    g.source,
                )
            )
        if rows:
            self.con.execute(SQL.sql("insert_values", table="gpus", rows=sql_rows(rows)))
        env_rows = [(self.file_id, k, v) for k, v in sorted(self.meta.env.items()) if nsys_meta.keep_env(k)]
        if env_rows:
            self.con.execute(SQL.sql("insert_values", table="env", rows=sql_rows(env_rows)))

    def report_past_capture(self) -> None:
        """GPU work that ends long after the capture stopped has a corrupt end (a garbled
        timestamp): it stretches its rank's window, and every share of the partition with it
        (one kernel 1,000 s long read as "memory 100 %"). Said, with the count and how far."""
        if not self.meta.has("ANALYSIS_DETAILS", "stopTime") or not self.ranks:
            return
        for table, n, past in self.con.execute(_past_capture_sql(self.alias, self.rank_map)).fetchall():
            self.result.warnings.append(
                f"{CORRUPT_TIMING}{n:,} row(s) of {table} end more than 1 s after the capture stopped "
                f"(by up to {past / 1e9:,.1f} s: a corrupt timestamp); the time partition's window "
                "stretches to them, so its shares of that rank are not the run's"
            )

    def report_unused(self) -> None:
        for table in REPORTED_UNUSED:
            if self.meta.has(table):
                n = self.count(table)
                if n:
                    why = (
                        "CUDA-graph launches traced at graph level: no per-kernel rows for them"
                        if table == "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
                        else "not used by nsight-analyze"
                    )
                    self.result.skipped.append(f"{table}: {n} rows ({why})")
                    if table == "CUPTI_ACTIVITY_KIND_GRAPH_TRACE":
                        self.result.warnings.append(
                            f"{n} CUDA-graph launches have no per-kernel rows (graph-level trace)"
                        )
        if self.meta.has("DIAGNOSTIC_EVENT", "severity"):
            n = self.count("DIAGNOSTIC_EVENT", SQL["diagnostic_warnings"])
            if n:
                self.result.warnings.append(
                    f"{n} nsys diagnostic warnings/errors during capture (DIAGNOSTIC_EVENT)"
                )


PAST_CAPTURE_NS = 1_000_000_000  # an end this far past the capture's stop is not in-flight work


def _past_capture_sql(alias: str, rank_map: str) -> str:
    """Per GPU table: rows of the file's ranks that end more than PAST_CAPTURE_NS after the
    capture stopped (ANALYSIS_DETAILS.stopTime, the events' own time base), and by how much."""
    return SQL.sql("past_capture", rank_map=rank_map, alias=alias, past_ns=PAST_CAPTURE_NS)
