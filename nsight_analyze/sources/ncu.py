"""Nsight Compute results: `ncu --csv` (long details page or `--page raw` wide) and `.ncu-rep`.

Why this shape: HFU needs FLOPs the hardware executed, which only counters give, and
Nsight Compute is where those counters come from. Its exports are awkward (program
output before the header, quoted values with locale-dependent thousands separators,
`n/a`, unit prefixes, a units row in the raw page, rates instead of totals in some
reports), so this reader only normalises values (ncu_read.py) and stores every metric as it
was measured (`ncu_metrics`); the FLOP arithmetic is SQL (queries/hfu/hfu_ncu_flops.sql) so it
is visible and testable. `.ncu-rep` files need NVIDIA's `ncu_report` module, an optional
extra (`pip install ncu-report`); without it they fail with one clear line.

The layouts are described in ../shared/docs/nsys-sqlite-schema.md §10.5-10.6.
"""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pandas as pd

from .. import gpus
from ..store.query_layer import statements
from .base import BadInput, LoadResult, Probe, peak_rows
from .ncu_read import HEADER_SCAN_BYTES, REP_MAGIC, frames, header_offset, is_rep

SQL = statements("sources/ncu")

FORMAT = "ncu-csv"
REP_FORMAT = "ncu-rep"

# Counters HFU needs, grouped for the "missing" report (any one metric of a group suffices).
REQUIRED_GROUPS = {
    "CUDA-core FLOP counters (sm[sp]__sass_thread_inst_executed_op_{d,f,h}{add,mul,fma}_pred_on)": (
        r"^(sm|smsp)__sass_thread_inst_executed_op_[dfh](add|mul|fma)_pred_on\.sum(\.per_cycle_elapsed)?$"
    ),
    "tensor FLOP counters (sm__ops_path_tensor_src_* or sm__inst_executed_pipe_tensor)": (
        r"^(sm|smsp)__(ops_path_tensor_src_|inst_executed_pipe_tensor\.sum)"
    ),
    "DRAM bytes (dram__bytes.sum or dram__bytes_read/write.sum)": r"^dram__bytes(_read|_write)?\.sum$",
}


def sniff(path: Path) -> bool:
    """An .ncu-rep (suffix or magic NVR\\0), or a CSV/log whose header row is Nsight Compute's."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".ncu-rep":
        return True
    try:
        with open(path, "rb") as fh:
            if suffix not in (".csv", ".txt", ".log", ""):
                return fh.read(4) == REP_MAGIC
            head = fh.read(HEADER_SCAN_BYTES)
    except OSError:
        return False
    return head.startswith(REP_MAGIC) or header_offset(head) is not None


def probe(path: Path) -> Probe:
    """ncu files carry no ranks; the probe only checks that the file is readable as ncu output."""
    path = Path(path)
    if is_rep(path):
        return Probe(format=REP_FORMAT, processes=[], version=None)
    with open(path, "rb") as fh:
        head = fh.read(HEADER_SCAN_BYTES)
    if header_offset(head) is None:
        raise BadInput(f'{path.name}: no Nsight Compute CSV header (a line starting with "ID","Process ID")')
    return Probe(format=FORMAT, processes=[])


# ---------------------------------------------------------------------------------------
# Load


def _dims(series: pd.Series | None, index: pd.Index) -> pd.DataFrame:
    """'(256, 1, 1)' -> three integer columns (NULL when the column is absent or a scalar)."""
    if series is None:
        return pd.DataFrame({"x": pd.NA, "y": pd.NA, "z": pd.NA}, index=index)
    parts = series.astype(str).str.extract(r"^\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)$")
    parts.columns = ["x", "y", "z"]
    return parts.apply(pd.to_numeric, errors="coerce").astype("Int64")


def short_name(name: str) -> str:
    """Function name without namespace, template arguments or parameters (what nsys calls shortName).

    `void ns::<unnamed>::kern<(int)4, F<float>>(int, T2)` -> `kern`. Scans one kernel
    name's characters, tracking <> and () depth; called once per profiled launch.
    """
    depth_angle = depth_paren = 0
    cut = len(name)
    for i, ch in enumerate(name):
        if ch == "<":
            depth_angle += 1
        elif ch == ">" and depth_angle:
            depth_angle -= 1
        elif ch == "(" and depth_angle == 0:
            if depth_paren == 0 and not name.startswith("(anonymous", i):
                cut = i
                break
            depth_paren += 1
        elif ch == ")" and depth_paren:
            depth_paren -= 1
    head = name[:cut]
    out, depth = [], 0
    for ch in head:  # drop template arguments
        if ch == "<":
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    match = re.search(r"([A-Za-z_][A-Za-z0-9_]*)\s*$", "".join(out))
    return match.group(1) if match else name


def load(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    file_id: int,
    ranks: dict | None = None,
    _probe: Probe | None = None,  # the source interface's; the report itself is read again
) -> LoadResult:
    """Insert ncu_kernels, ncu_metrics and ncu_peaks rows for one file (caller's transaction)."""
    path = Path(path)
    result = LoadResult()
    launches, metrics, layout = frames(path)
    if launches.empty:
        result.warnings.append(f"{path.name}: no profiled kernel launches")
        return result
    metrics = metrics.assign(launch_id=pd.to_numeric(metrics["launch_id"]).astype("int64"), file_id=file_id)
    metrics = metrics[["file_id", "launch_id", "section", "metric", "unit", "value", "value_text"]]
    index = launches.index
    grid = _dims(launches.get("Grid Size"), index)
    block = _dims(launches.get("Block Size"), index)
    cc = launches.get("CC", pd.Series([None] * len(launches), index=index)).astype(str)
    meta = pd.DataFrame(
        {
            "launch_id": pd.to_numeric(launches["ID"]).astype("int64"),
            "name": launches["Kernel Name"].astype(str),
            "function_name": launches.get("Function Name", pd.Series([None] * len(launches), index=index)),
            "short_name": launches["Kernel Name"].astype(str).map(short_name),
            "process_id": pd.to_numeric(launches.get("Process ID"), errors="coerce"),
            "process_name": launches.get("Process Name"),
            "host_name": launches.get("Host Name"),
            "context_id": pd.to_numeric(launches.get("Context"), errors="coerce"),
            "stream_id": pd.to_numeric(launches.get("Stream"), errors="coerce"),
            "device_text": launches.get("Device"),
            "grid_x": grid["x"],
            "grid_y": grid["y"],
            "grid_z": grid["z"],
            "block_x": block["x"],
            "block_y": block["y"],
            "block_z": block["z"],
            "cc_major": pd.to_numeric(cc.str.extract(r"^(\d+)\.")[0], errors="coerce"),
            "cc_minor": pd.to_numeric(cc.str.extract(r"^\d+\.(\d+)")[0], errors="coerce"),
        }
    )
    for col in ("function_name", "process_name", "host_name", "device_text"):
        if meta[col].isna().all():
            meta[col] = meta[col].astype(object)
    con.register("_ncu_metrics_in", metrics)
    con.register("_ncu_meta_in", meta)
    try:
        con.execute(SQL["insert_metrics"])
        con.execute(SQL["insert_kernels"], [file_id, file_id])
    finally:
        con.unregister("_ncu_metrics_in")
        con.unregister("_ncu_meta_in")
    _insert_peaks(con, file_id, result)
    _report_missing(con, file_id, path, result)
    result.counts = {
        "ncu_kernels": len(meta),
        "ncu_metrics": len(metrics),
    }
    return result


def _insert_peaks(con: duckdb.DuckDBPyConnection, file_id: int, result: LoadResult) -> None:
    """Resolve the file's GPU once (device attributes, else kernel-name family) for the roofline."""
    dev = con.execute(SQL.sql("file_gpu", families=gpus.families_sql()), [file_id]).fetchone()
    assert dev is not None
    name, sms, clock, cmaj, cmin = dev[:5]
    families = [f for (f, _p, _m), hit in zip(gpus.KERNEL_FAMILIES, dev[5:], strict=True) if hit]
    # DRAM bandwidth for a derived peak (2 transfers/clock x max memory clock x bus width / 8)
    mem = con.execute(SQL["dram_bandwidth"], [file_id]).fetchone()
    peak = gpus.resolve(
        name=name,
        sm_count=sms,
        clock_hz=clock,
        compute_major=cmaj,
        compute_minor=cmin,
        mem_bw_bps=mem[0] if mem else None,
        families=families,
    )
    if peak.source in ("assumed", "unknown"):
        result.warnings.append(f"ncu GPU: {peak.reason}")
    con.executemany(SQL["insert_peaks"], peak_rows(file_id, peak))


def _report_missing(con: duckdb.DuckDBPyConnection, file_id: int, path: Path, result: LoadResult) -> None:
    """Say which counter groups HFU needs are absent, and for how many launches."""
    total = con.execute("SELECT count(*) FROM ncu_kernels WHERE file_id = ?", [file_id]).fetchone()[0]
    for label, pattern in REQUIRED_GROUPS.items():
        have = con.execute(SQL["launches_with_counters"], [file_id, pattern]).fetchone()[0]
        if have < total:
            result.warnings.append(f"{path.name}: {total - have} of {total} launches lack {label}")
    unknown = con.execute(SQL["tensor_flops_unknown"], [file_id]).fetchone()[0]
    if unknown:
        result.warnings.append(
            f"{path.name}: {unknown} launches have tensor-pipe instructions but no sm__ops_path_tensor_* "
            "counters: their tensor FLOPs are not counted (collect sm__ops_path_tensor_src_*_dst_*.sum)"
        )
