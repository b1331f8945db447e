"""Synthetic DCGM time series with known values, in the layouts sources/dcgm.py reads.

`samples()` is the ground truth: one dict per (scrape, GPU, metric) with the exact value and UTC
time; the writers put those samples into a dcgm-exporter scrape file (Prometheus text: with a
comment time stamp per scrape, exposition-format time stamps per sample, or none), a Prometheus
`query_range` JSON answer, or a `dcgmi dmon` table. `for_traces()` writes the series of the GPUs
that synthetic (or any) nsys exports in a folder ran on, over their capture, so an ingest of the
folder can be checked to match DCGM samples to ranks by host and GPU.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

FORMATS = ("prom", "prom-ts", "prom-untimed", "json", "dmon")
UTC_BASE_NS = 1_764_590_400_000_000_000  # 2025-12-01T12:00:00Z

#: metric -> base value: PROF activity as a 0-1 ratio, DEV utilisation in %, clock MHz, power W.
DEFAULT_METRICS: dict[str, float] = {
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 0.4,
    "DCGM_FI_PROF_SM_ACTIVE": 0.8,
    "DCGM_FI_PROF_DRAM_ACTIVE": 0.3,
    "DCGM_FI_DEV_GPU_UTIL": 97.0,
    "DCGM_FI_DEV_SM_CLOCK": 1755.0,
    "DCGM_FI_DEV_POWER_USAGE": 612.5,
}
COUNTERS = ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",)
_DMON_NAMES = {
    "DCGM_FI_DEV_GPU_UTIL": "GPUTL",
    "DCGM_FI_DEV_MEM_COPY_UTIL": "MCUTL",
    "DCGM_FI_DEV_POWER_USAGE": "POWER",
    "DCGM_FI_DEV_SM_CLOCK": "SMCLK",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": "GRACT",
    "DCGM_FI_PROF_SM_ACTIVE": "SMACT",
    "DCGM_FI_PROF_SM_OCCUPANCY": "SMOCC",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": "TENSO",
    "DCGM_FI_PROF_DRAM_ACTIVE": "DRAMA",
    "DCGM_FI_PROF_PCIE_TX_BYTES": "PCITX",
    "DCGM_FI_PROF_PCIE_RX_BYTES": "PCIRX",
}


@dataclass(frozen=True)
class DcgmGpu:
    host: str
    gpu: int  # NVML index (dcgm-exporter's `gpu` label)
    uuid: str  # as DCGM writes it: GPU-xxxxxxxx-...
    model: str = "NVIDIA H100 80GB HBM3"
    pci_bus_id: str | None = None


def value_at(metric: str, base: float, gpu_pos: int, i: int) -> float:
    """The known value of `metric` on the gpu_pos-th GPU at scrape i: base x (1 + 2% x ((i+gpu_pos) % 5)),
    rounded as DCGM prints it (ratios to 3 decimals, the rest to 1)."""
    x = base * (1.0 + 0.02 * ((i + gpu_pos) % 5))
    if metric.startswith("DCGM_FI_PROF_") and "BYTES" not in metric:
        return round(min(x, 1.0), 3)
    return round(x, 1)


def samples(
    gpus: Iterable[DcgmGpu],
    start_utc_ns: int = UTC_BASE_NS,
    interval_ns: int = 1_000_000_000,
    count: int = 10,
    metrics: Mapping[str, float] | None = None,
) -> list[dict]:
    """Ground truth: every (scrape, GPU, metric) sample, scrape i at start_utc_ns + i x interval_ns."""
    metrics = dict(DEFAULT_METRICS if metrics is None else metrics)
    out = []
    gpus = list(gpus)
    for i in range(count):
        utc = start_utc_ns + i * interval_ns
        for pos, g in enumerate(gpus):
            for metric, base in metrics.items():
                out.append(
                    {
                        "sample": i,
                        "utc_ns": utc,
                        "host": g.host,
                        "gpu": g.gpu,
                        "uuid": g.uuid,
                        "model": g.model,
                        "pci_bus_id": g.pci_bus_id,
                        "metric": metric,
                        "value": value_at(metric, base, pos, i),
                    }
                )
    return out


def _labels(s: dict) -> str:
    pairs = [("gpu", str(s["gpu"])), ("UUID", s["uuid"])]
    if s.get("pci_bus_id"):
        pairs.append(("pci_bus_id", s["pci_bus_id"]))
    pairs += [("device", f"nvidia{s['gpu']}"), ("modelName", s["model"]), ("Hostname", s["host"])]
    pairs.append(("DCGM_FI_DRIVER_VERSION", "570.124.06"))
    return ",".join(f'{k}="{v}"' for k, v in pairs)


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def _iso(utc_ns: int) -> str:
    stamp = dt.datetime.fromtimestamp(utc_ns // 1_000_000_000, dt.timezone.utc)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S") + f".{(utc_ns // 1_000_000) % 1000:03d}Z"


def _scrapes(rows: list[dict]) -> list[list[dict]]:
    by: dict[int, list[dict]] = {}
    for s in rows:
        by.setdefault(s["sample"], []).append(s)
    return [by[k] for k in sorted(by)]


def write_prom(path: str | Path, rows: list[dict], timestamps: str = "comment") -> Path:
    """dcgm-exporter text, scrapes appended as a scraping loop would.

    timestamps: 'comment' (`# scrape <ISO time>` before each scrape), 'sample' (the exposition
    format's per-sample ms time stamps) or 'none' (untimed repeated scrapes).
    """
    if timestamps not in ("comment", "sample", "none"):
        raise ValueError(timestamps)
    out: list[str] = []
    for scrape in _scrapes(rows):
        if timestamps == "comment":
            out.append(f"# scrape {_iso(scrape[0]['utc_ns'])}")
        by_metric: dict[str, list[dict]] = {}
        for s in scrape:
            by_metric.setdefault(s["metric"], []).append(s)
        for metric, ss in by_metric.items():
            out.append(f"# HELP {metric} synthetic {metric} (nsight-analyze synth)")
            out.append(f"# TYPE {metric} {'counter' if metric in COUNTERS else 'gauge'}")
            for s in ss:
                ts = f" {s['utc_ns'] // 1_000_000}" if timestamps == "sample" else ""
                out.append(f"{metric}{{{_labels(s)}}} {_num(s['value'])}{ts}")
    path = Path(path)
    path.write_text("\n".join(out) + "\n")
    return path


def write_range_json(path: str | Path, rows: list[dict]) -> Path:
    """A Prometheus `/api/v1/query_range` answer (resultType matrix), one series per GPU and metric."""
    series: dict[tuple, dict] = {}
    for s in rows:
        key = (s["metric"], s["host"], s["gpu"], s["uuid"])
        if key not in series:
            metric = {"__name__": s["metric"], "gpu": str(s["gpu"]), "UUID": s["uuid"],
                      "modelName": s["model"], "Hostname": s["host"], "device": f"nvidia{s['gpu']}",
                      "instance": f"{s['host']}:9400", "job": "dcgm-exporter"}  # fmt: skip
            if s.get("pci_bus_id"):
                metric["pci_bus_id"] = s["pci_bus_id"]
            series[key] = {"metric": metric, "values": []}
        series[key]["values"].append([s["utc_ns"] / 1e9, _num(s["value"])])
    doc = {"status": "success", "data": {"resultType": "matrix", "result": list(series.values())}}
    path = Path(path)
    path.write_text(json.dumps(doc, indent=1))
    return path


def write_dmon(path: str | Path, rows: list[dict], timestamps: bool = False) -> Path:
    """`dcgmi dmon -e ...` output: one header, one row per GPU and interval (no host, no UUID, as
    dcgmi prints); timestamps=True prefixes each row with its ISO time (as `| ts` would)."""
    metrics = list(dict.fromkeys(s["metric"] for s in rows))
    names = [_DMON_NAMES[m] for m in metrics]
    lines = [
        "#Entity   " + "  ".join(f"{n:>8}" for n in names),
        "ID        " + "  ".join(" " * 8 for _ in names),
    ]
    for scrape in _scrapes(rows):
        by_gpu: dict[int, dict[str, float]] = {}
        for s in scrape:
            by_gpu.setdefault(s["gpu"], {})[s["metric"]] = s["value"]
        for gpu, values in by_gpu.items():
            prefix = f"{_iso(scrape[0]['utc_ns'])} " if timestamps else ""
            lines.append(f"{prefix}GPU {gpu:<5} " + "  ".join(f"{_num(values[m]):>8}" for m in metrics))
    path = Path(path)
    path.write_text("\n".join(lines) + "\n")
    return path


def write(path: str | Path, rows: list[dict], fmt: str) -> Path:
    """One of FORMATS: prom (comment time stamps), prom-ts (sample time stamps), prom-untimed, json,
    dmon."""
    if fmt == "prom":
        return write_prom(path, rows, "comment")
    if fmt == "prom-ts":
        return write_prom(path, rows, "sample")
    if fmt == "prom-untimed":
        return write_prom(path, rows, "none")
    if fmt == "json":
        return write_range_json(path, rows)
    if fmt == "dmon":
        return write_dmon(path, rows, timestamps=True)
    raise ValueError(f"unknown DCGM format {fmt!r}: choose one of {', '.join(FORMATS)}")


def _trace_gpus(
    sqlite_path: Path,
) -> tuple[str | None, list[tuple[int, str, str | None, str | None]], int, int]:
    """(host, [(gpu id, uuid, bus, name)], session start UTC ns, capture duration ns) of one nsys export."""
    con = sqlite3.connect(f"file:{sqlite_path}?mode=ro", uri=True)
    try:
        host = con.execute("SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'Hostname'").fetchone()
        gpus = con.execute("SELECT id, uuid, busLocation, name FROM TARGET_INFO_GPU ORDER BY id").fetchall()
        utc = con.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()[0]
        dur = con.execute("SELECT duration FROM ANALYSIS_DETAILS").fetchone()[0]
    finally:
        con.close()
    return (host[0] if host else None), gpus, int(utc), int(dur)


def for_traces(
    folder: str | Path,
    fmt: str = "prom",
    interval_ns: int = 100_000_000,
    metrics: Mapping[str, float] | None = None,
) -> dict:
    """Write `dcgm_<host>.<ext>` beside the nsys exports in `folder`: every GPU of every host they
    name (TARGET_INFO_GPU), scraped every interval_ns over the hosts' captures. Returns the truth:
    {"files": [...], "gpus": [{host, gpu, uuid}], "samples": samples()}.
    """
    folder = Path(folder)
    hosts: dict[str, dict] = {}
    for path in sorted(folder.glob("*.sqlite")):
        host, gpus, utc, dur = _trace_gpus(path)
        if host is None:
            continue
        h = hosts.setdefault(host, {"gpus": {}, "start": utc, "end": utc + dur})
        h["start"], h["end"] = min(h["start"], utc), max(h["end"], utc + dur)
        for gid, uuid, bus, name in gpus:
            dcgm_uuid = uuid if str(uuid).upper().startswith("GPU-") else f"GPU-{uuid}"
            h["gpus"][gid] = DcgmGpu(host, int(gid), dcgm_uuid, name or DcgmGpu.model, _dcgm_bus(bus))
    ext = {"json": "json", "dmon": "dmon"}.get(fmt, "prom")
    truth: dict = {"files": [], "gpus": [], "samples": []}
    for host, h in sorted(hosts.items()):
        gpus = [h["gpus"][k] for k in sorted(h["gpus"])]
        start = -(-h["start"] // 1_000_000) * 1_000_000  # whole ms: what every format keeps exactly
        count = max(1, (h["end"] - start) // interval_ns + 1)
        rows = samples(gpus, start, interval_ns, int(count), metrics)
        path = write(folder / f"dcgm_{host}.{ext}", rows, fmt)
        truth["files"].append(str(path))
        truth["gpus"] += [{"host": g.host, "gpu": g.gpu, "uuid": g.uuid} for g in gpus]
        truth["samples"] += rows
    return truth


def _dcgm_bus(bus: str | None) -> str | None:
    """nsys busLocation (0000:53:00.0) -> DCGM pci_bus_id (00000000:53:00.0)."""
    if not bus:
        return None
    parts = str(bus).split(":")
    return ":".join([parts[0].rjust(8, "0"), *parts[1:]]) if len(parts) == 3 else str(bus)
