"""One file's load: the fast path, else the ijson path, then the rows that need the whole file.

Why a module of its own: it is the one place that decides which parser reads a file and
what happens after the pass (collectives joined to their ops, threads of the host process,
profiler ranges, process groups, GPUs, the counts and warnings the ingest records). It
takes its settings (fast path or not, batch size, a read-ahead already under way) as
arguments from the package's `load`, which reads them from the package's knobs.
"""

from __future__ import annotations

import zlib
from contextlib import closing
from pathlib import Path

import duckdb

from ... import gpus
from ...store.duck import sql_rows, sql_value
from ...store.query_layer import statements
from ..base import BadInput, LoadResult, Probe, peak_rows
from .batches import DTYPE_BYTES, RowSets
from .duck_json import RANGE_COLUMNS, NoFastPath
from .events import EventStream, to_int, to_text
from .meta import KinetoMeta, derive, merge_tail, read_meta, tail_meta
from .pieces import EventText, parsed
from .readahead import ReadAhead

# Top-level metadata keys naming a version (Kineto writes the CUDA / HIP ones and the tracer's;
# the PyTorch ones appear where the program added them with the profiler's add_metadata_json):
# stored in kineto_versions as written, with distributedInfo.nccl_version.
VERSION_KEYS = (
    "cuda_runtime_version",
    "cuda_driver_version",
    "cupti_version",
    "hip_runtime_version",
    "hip_driver_version",
    "roctracer_version",
    "pytorch_version",
    "torch_version",
    "pytorch version",
)
SQL = statements("sources/kineto/loader")


class Loader:
    """One file's pass: events -> row sets -> canonical tables."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        path: Path,
        rank: int,
        meta: KinetoMeta,
        result: LoadResult,
        rows: RowSets,
        text: EventText | None = None,
        ahead: ReadAhead | None = None,
        file_id: int | None = None,
    ):
        """`text`: the file's pieces for the fast path (None: the ijson path only); `ahead`: a
        read-ahead of the file whose parsed pieces to take instead."""
        self.con, self.path, self.rank, self.meta, self.result = con, path, rank, meta, result
        self.file_id = file_id
        self.rows, self.text, self.ahead = rows, text, ahead
        self.stream: EventStream | None = None
        self.tail: bytes | None = None  # text after the array, when the fast path read the file
        self.probe_device = meta.device_id  # the device probe() would have found (tail_pending)

    def run(self) -> None:
        self.rows.create_temp()
        try:
            if not self._scan():
                self._stream()
            self.rows.flush()
            self._finish()
        finally:
            self.rows.drop_temp()

    def _scan(self) -> bool:
        """The fast path: pieces of the array parsed by DuckDB (duck_json) while the next ones
        are cut. False, with nothing loaded, when it cannot read the file; the ijson pass then
        loads it or says why it cannot."""
        ahead = self.ahead
        text = ahead.text if ahead else self.text
        if text is None:
            return False
        try:
            with closing(ahead.pieces()) if ahead else parsed(text) as pieces:
                for piece in pieces:
                    self.rows.add_piece(piece)
        except (NoFastPath, OSError, EOFError, zlib.error):
            self.rows.undo()
            return False
        self.tail = text.tail
        return True

    def _stream(self) -> None:
        """The ijson path (events.py)."""
        self.stream = EventStream(self.rows, self.path)
        self.stream.run()

    def _finish(self) -> None:
        r, tmp = int(self.rank), self.rows.tmp
        self.con.execute(
            SQL.sql(
                "insert_collectives",
                rank=r,
                tmp=tmp,
                dtypes=sql_value(list(DTYPE_BYTES)),
                dtype_bytes=sql_value(list(DTYPE_BYTES.values())),
            )
        )
        if self.meta.host_pid is None and self.rows.host_pids:
            pids = self.rows.host_pids  # most API events; of a tie the lowest pid, not the first seen
            self.meta.host_pid = min(pids, key=lambda p: (-pids[p], p))
        host_pid = self.meta.host_pid
        if host_pid is None:
            self.con.execute(SQL.sql("insert_threads", rank=r, tmp=tmp))
        else:
            self.con.execute(SQL.sql("insert_host_threads", rank=r, tmp=tmp, pid=int(host_pid)))
        self._profiler_ranges()
        self._tail_metadata()
        self._process_groups()
        self._versions()
        self._gpus()
        self._counter_peaks()
        self._report()

    def _profiler_ranges(self) -> None:
        """CUPTI range-profiler kernels in time order (range_id), and whether they can be placed
        on this trace's kernels (queries/timeline/cupti_range_joins.sql does it: same name, same order)."""
        r = int(self.rank)
        ops = ", ".join(c for c, _ in RANGE_COLUMNS)
        tmp = self.rows.tmp
        self.con.execute(SQL.sql("insert_profiler_ranges", rank=r, tmp=tmp, ops=ops))
        row = self.con.execute(SQL.sql("joinable_ranges", rank=r, tmp=tmp)).fetchone()
        ranges, joinable, missing, kernels = row
        if ranges and joinable < ranges:
            if not kernels:
                why = "the trace has no kernel events (record CUDA activities with the range profiler)"
            else:
                why = "no kernel of the same name and order"
                if missing:
                    why += f"; {missing} ranges have no kernel name (__missing__)"
            self.result.warnings.append(
                f"{ranges - joinable} of {ranges} CUPTI range-profiler kernels cannot be joined to kernels "
                f"of this trace: {why}; their FLOPs are in kernel_flops, not on the timeline"
            )

    def _tail_metadata(self) -> None:
        """Keys after traceEvents that probe() did not read (it reads a gzip's tail only when needed)."""
        tail = self.tail if self.tail is not None else self.stream.tail() if self.stream else None
        meta = self.meta
        if tail is None or (meta.base_time_ns is not None and not meta.tail_pending):
            return
        if meta.tail_pending:  # what probe() would have derived with the whole metadata
            if merge_tail(meta, tail):
                derive(meta)
            self.probe_device = meta.device_id
            return
        extra = tail_meta(tail) or {}
        base = extra.get("baseTimeNanoseconds")
        if isinstance(base, int):
            meta.base_time_ns = base

    def _process_groups(self) -> None:
        """distributedInfo.pg_config -> kineto_process_groups (one row per listed process group)."""
        dist = self.meta.top.get("distributedInfo")
        config = dist.get("pg_config") if isinstance(dist, dict) else None
        if not isinstance(config, list):
            return
        version = to_text(dist.get("nccl_version"))
        rows = []
        for g in config:
            if not isinstance(g, dict) or g.get("pg_name") is None:
                continue
            members = g.get("ranks")
            ranks = (
                [int(x) for x in members]
                if isinstance(members, list) and all(isinstance(x, int) for x in members)
                else None
            )
            rows.append(
                (self.rank, str(g["pg_name"]), to_text(g.get("pg_desc")), to_text(g.get("backend_config")),
                 to_int(g.get("pg_size")), ranks, version)
            )  # fmt: skip
        if rows:
            self.con.executemany(SQL["insert_process_groups"], rows)
        self.result.counts["kineto_process_groups"] = len(rows)

    def _versions(self) -> None:
        """The versions the trace's metadata names -> kineto_versions (one row per key present).

        Why a table of its own: `distributedInfo.nccl_version` was kept only beside pg_config's
        process groups, and the CUDA / HIP runtime and driver versions nowhere, so `compare` could
        not say that two runs differ in them (compare/setup.py)."""
        top = dict(self.meta.top)
        if any(k not in top for k in (*VERSION_KEYS, "distributedInfo")):  # keys after traceEvents
            tail = self.tail if self.tail is not None else self.stream.tail() if self.stream else None
            extra = (tail_meta(tail) or {}) if tail is not None else {}
            top.update({k: v for k, v in extra.items() if k not in top})
        dist = top.get("distributedInfo")
        found = [("nccl_version", dist.get("nccl_version"))] if isinstance(dist, dict) else []
        found += [(key, top.get(key)) for key in VERSION_KEYS]
        rows = [
            (self.rank, key, value if isinstance(value, str) else str(value))
            for key, value in found
            if value is not None and not isinstance(value, (dict, list, bool)) and str(value) != ""
        ]
        if rows:
            self.con.execute(SQL.sql("insert_versions", rows=sql_rows(rows)))  # no bound parameter
        self.result.counts["kineto_versions"] = len(rows)

    def _gpus(self) -> None:
        proc_device = self.meta.device_id
        devices = self.rows.devices
        if devices:
            main = min(devices, key=lambda d: (-devices[d], d))  # of a tie the lowest, not the first seen
            if proc_device is None or proc_device not in devices:
                self.meta.device_id = proc_device = main
            if len(devices) > 1:
                self.result.warnings.append(
                    f"GPU work on {len(devices)} devices ({', '.join(map(str, sorted(devices)))}) "
                    "in one trace: all of it is attributed to one rank"
                )
        props = self.meta.device_properties()
        rows = []
        for dev in sorted(set(devices) | ({proc_device} if proc_device is not None else set())):
            p = props.get(dev, {})
            rows.append(
                (
                    self.rank,
                    dev,
                    p.get("name"),
                    to_int(p.get("numSms")),
                    None,
                    None,
                    to_int(p.get("totalGlobalMem")),
                    to_int(p.get("computeMajor")),
                    to_int(p.get("computeMinor")),
                    None,
                    None,
                    "kineto" if p else "unknown",
                )
            )
        alike = self._one_model(props)
        if not rows and alike:  # no GPU work names the device, but every GPU the trace lists is alike
            rows.append(
                (self.rank, None, alike.get("name"), to_int(alike.get("numSms")), None, None,
                 to_int(alike.get("totalGlobalMem")), to_int(alike.get("computeMajor")),
                 to_int(alike.get("computeMinor")), None, None, "kineto")
            )  # fmt: skip
        if not rows:
            rows.append((self.rank, None, None, None, None, None, None, None, None, None, None, "unknown"))
        self.con.execute(SQL.sql("insert_gpus", rows=sql_rows(rows)))

    @staticmethod
    def _one_model(props: dict) -> dict:
        """The deviceProperties entry when every GPU the trace lists is the same model (name,
        SMs, memory), else {}: the rank's GPU model even when its index is unknown."""
        keys = {(q.get("name"), q.get("numSms"), q.get("totalGlobalMem")) for q in props.values()}
        return next(iter(props.values())) if len(keys) == 1 and next(iter(keys))[0] else {}

    def _counter_peaks(self) -> None:
        """A trace with CUPTI range-profiler counters gets `ncu_peaks` rows for its rank's GPU, as an
        Nsight Compute file does: the roofline (queries/hfu/roofline.sql) places its kernels with them."""
        if self.file_id is None or not self.rows.ranges.total:
            return
        props = self.meta.device_properties()
        dev = self.meta.device_id
        p = (props.get(dev, {}) if dev is not None else {}) or self._one_model(props)
        peak = gpus.resolve(
            name=to_text(p.get("name")),
            sm_count=to_int(p.get("numSms")),
            clock_hz=None,
            compute_major=to_int(p.get("computeMajor")),
            compute_minor=to_int(p.get("computeMinor")),
            mem_bw_bps=None,
        )
        if peak.source in ("assumed", "unknown"):
            self.result.warnings.append(f"CUPTI range-profiler GPU: {peak.reason}")
        self.con.executemany(SQL["insert_ncu_peaks"], peak_rows(self.file_id, peak))

    def _report(self) -> None:
        counts = self.result.counts
        batches = (
            ("kernels", self.rows.kernels),
            ("memops", self.rows.memops),
            ("cuda_api", self.rows.api),
            ("sync", self.rows.sync),
            ("nvtx", self.rows.nvtx),
            ("kineto_gpu_annotations", self.rows.gpu_ann),
        )
        for table, batch in batches:
            counts[table] = counts.get(table, 0) + batch.total
        counts["memory_usage"] = self.rows.memory.total
        counts["kineto_profiler_ranges"] = self.rows.ranges.total
        counts["kineto_collectives"] = self.con.execute(
            SQL.sql("collective_count", rank=int(self.rank))
        ).fetchone()[0]
        for what, n in sorted(self.rows.skipped.items()):
            self.result.skipped.append(f"{what}: {n} events (not used by nsight-analyze)")
        if self.rows.bad:
            self.result.warnings.append(f"{self.rows.bad} events without ts/dur were not loaded")


def load(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    ranks: dict[int, int],
    probe: Probe,
    *,
    batch_rows: int,
    text: EventText | None,
    ahead: ReadAhead | None,
    file_id: int | None = None,
) -> LoadResult:
    """The source interface's load (see the package), with its settings as arguments."""
    meta: KinetoMeta = probe.context if isinstance(probe.context, KinetoMeta) else read_meta(path)
    if len(set(ranks.values())) != 1:
        raise BadInput("a Kineto trace holds exactly one rank")
    rank = next(iter(ranks.values()))
    result = LoadResult(warnings=list(probe.warnings))
    pending = meta.tail_pending
    loader = Loader(con, path, rank, meta, result, RowSets(con, rank, batch_rows), text, ahead, file_id)
    try:
        loader.run()
    except duckdb.Error as exc:
        raise BadInput(f"failed while loading events ({str(exc).splitlines()[0]})") from None
    except OSError as exc:
        raise BadInput(f"cannot read the Kineto trace ({exc})") from None
    # Device, host pid and time base are only certain after the full pass; the ingest inserts
    # the ranks row after load(), from this Process.
    if probe.processes:
        proc = probe.processes[0]
        if pending:  # probe() left deviceProperties to this pass
            proc.device_id = loader.probe_device
            gpu = (
                meta.device_properties().get(loader.probe_device) if loader.probe_device is not None else None
            )
            proc.gpu_name = gpu.get("name") if gpu else None
        if proc.pid is None:
            proc.pid = meta.host_pid
        if meta.base_time_ns is not None:
            proc.session_start_utc_ns = meta.base_time_ns
        if proc.device_id is None and meta.device_id is not None:
            proc.device_id = meta.device_id
        if proc.gpu_name is None and meta.device_id is not None:
            proc.gpu_name = meta.device_properties().get(meta.device_id, {}).get("name")
        if proc.gpu_name is None and proc.device_id is None:  # index unknown, every listed GPU alike
            proc.gpu_name = Loader._one_model(meta.device_properties()).get("name")
    return result
