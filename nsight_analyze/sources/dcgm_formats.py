"""The three layouts DCGM samples come in, parsed into rows: which layout a file is, and its samples.

Why its own module: sources/dcgm.py is the source interface (sniff, probe, load into
`gpu_metrics`, match_ranks); what differs between a dcgm-exporter scrape (Prometheus text), a
Prometheus query answer (JSON) and a `dcgmi dmon` table is only how the samples are read, which is
this module's one job. Each reader returns `Rows`: the samples in the columns COLUMNS, and what
was not stored, by reason (nothing is dropped silently). See sources/dcgm.py's docstring for the
layouts and their time stamps.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from .base import BadInput

FORMAT_PROM = "dcgm-prom"
FORMAT_JSON = "dcgm-json"
FORMAT_DMON = "dcgm-dmon"
SNIFF_BYTES = 1 << 16

_DCGM_LINE = re.compile(r"^\s*(#\s*(HELP|TYPE)\s+)?DCGM_FI_\w+", re.M)
_DMON_HEADER = re.compile(r"^\s*#\s*Entity(Id)?\b(.*)$", re.I)
_DMON_ROW = re.compile(r"^\s*(?:(?P<ts>\S+?)\s+)??(?P<kind>GPU(?:-I|-CI)?)\s+(?P<id>\d+)\s+(?P<rest>.*)$")
_TIME_COMMENT = re.compile(
    r"^#\s*(?:(?:scrape(?:[_ ]?time)?|timestamp|time|ts|date)\s*[:=]?\s*)?"
    r"(?P<t>\S+(?:[ T]\d\d:\d\d\S*)?)\s*$",
    re.I,
)

# dcgmi dmon column headers -> DCGM field names (dcgmi dmon -l).
DMON_FIELDS = {
    "GPUTL": "DCGM_FI_DEV_GPU_UTIL",
    "MCUTL": "DCGM_FI_DEV_MEM_COPY_UTIL",
    "ECUTL": "DCGM_FI_DEV_ENC_UTIL",
    "DCUTL": "DCGM_FI_DEV_DEC_UTIL",
    "POWER": "DCGM_FI_DEV_POWER_USAGE",
    "TMPTR": "DCGM_FI_DEV_GPU_TEMP",
    "MMTMP": "DCGM_FI_DEV_MEMORY_TEMP",
    "SMCLK": "DCGM_FI_DEV_SM_CLOCK",
    "MMCLK": "DCGM_FI_DEV_MEM_CLOCK",
    "FBFRE": "DCGM_FI_DEV_FB_FREE",
    "FBUSD": "DCGM_FI_DEV_FB_USED",
    "GRACT": "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "SMACT": "DCGM_FI_PROF_SM_ACTIVE",
    "SMOCC": "DCGM_FI_PROF_SM_OCCUPANCY",
    "TENSO": "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "DRAMA": "DCGM_FI_PROF_DRAM_ACTIVE",
    "FP64A": "DCGM_FI_PROF_PIPE_FP64_ACTIVE",
    "FP32A": "DCGM_FI_PROF_PIPE_FP32_ACTIVE",
    "FP16A": "DCGM_FI_PROF_PIPE_FP16_ACTIVE",
    "PCITX": "DCGM_FI_PROF_PCIE_TX_BYTES",
    "PCIRX": "DCGM_FI_PROF_PCIE_RX_BYTES",
    "NVLTX": "DCGM_FI_PROF_NVLINK_TX_BYTES",
    "NVLRX": "DCGM_FI_PROF_NVLINK_RX_BYTES",
}
HOST_LABELS = ("Hostname", "kubernetes_node", "node", "nodename", "instance")
COLUMNS = [
    "metric_name",
    "value",
    "utc_ns",
    "sample",
    "gpu_id",
    "gpu_uuid",
    "host",
    "gpu_name",
    "gpu_instance",
    "labels",
]


@dataclass
class Rows:
    """Parsed samples (columns of COLUMNS) and what was not stored, by reason."""

    data: dict[str, list] = field(default_factory=lambda: {c: [] for c in COLUMNS})
    not_stored: dict[str, int] = field(default_factory=dict)
    other_metrics: set[str] = field(default_factory=set)
    warnings: list[str] = field(default_factory=list)

    def skip(self, why: str, n: int = 1) -> None:
        self.not_stored[why] = self.not_stored.get(why, 0) + n

    def add(self, name: str, value: float, utc_ns: int | None, sample: int | None, labels: dict) -> None:
        if not name.startswith("DCGM_FI_"):
            self.other_metrics.add(name)
            self.skip("samples of metrics that are not DCGM fields")
            return
        if value is None or not math.isfinite(value):
            self.skip("samples without a finite value (N/A, NaN, Inf)")
            return
        gpu = labels.get("gpu")
        uuid = labels.get("UUID") or labels.get("uuid")
        instance = labels.get("GPU_I_ID")
        if gpu is None and uuid is None and instance is None:
            self.skip("samples without a GPU label (gpu, UUID)")
            return
        host = next((labels[k] for k in HOST_LABELS if labels.get(k)), None)
        if host is not None and host == labels.get("instance"):
            host = host.rsplit(":", 1)[0] if re.search(r":\d+$", host) else host
        d = self.data
        d["metric_name"].append(name)
        d["value"].append(float(value))
        d["utc_ns"].append(utc_ns)
        d["sample"].append(sample)
        d["gpu_id"].append(int(gpu) if gpu is not None and str(gpu).isdigit() else None)
        d["gpu_uuid"].append(uuid or None)
        d["host"].append(host)
        d["gpu_name"].append(labels.get("modelName") or None)
        d["gpu_instance"].append(instance)
        d["labels"].append(json.dumps(labels, sort_keys=True) if labels else None)

    @property
    def n(self) -> int:
        return len(self.data["metric_name"])


# --------------------------------------------------------------------------- which layout


def read_head(path: Path) -> str:
    """The first SNIFF_BYTES of a file as text (undecodable bytes replaced): what sniffing reads."""
    with open(path, "rb") as fh:
        return fh.read(SNIFF_BYTES).decode("utf-8", errors="replace")


def layout(head: str) -> str | None:
    """The layout (FORMAT_*) a file's head is in; None when it is none of the three."""
    stripped = head.lstrip()
    if stripped.startswith(("{", "[")):
        return FORMAT_JSON if '"resultType"' in head and "DCGM_FI_" in head else None
    if any(_DMON_HEADER.match(line) for line in head.splitlines()[:50]):
        return FORMAT_DMON
    if _DCGM_LINE.search(head):
        return FORMAT_PROM
    return None


# --------------------------------------------------------------------------- time stamps


def parse_time(text: str) -> int | None:
    """Epoch seconds/ms/us/ns (by magnitude) or ISO-8601 -> UTC ns; None when it is neither."""
    t = text.strip()
    try:
        x = float(t)
    except ValueError:
        try:
            stamp = dt.datetime.fromisoformat(t.replace("Z", "+00:00").replace(",", "."))
        except ValueError:
            return None
        if stamp.tzinfo is None:
            stamp = stamp.replace(tzinfo=dt.timezone.utc)
        delta = stamp - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
        return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000
    if not math.isfinite(x) or x <= 0:
        return None
    if x < 1e11:  # seconds
        return int(round(x * 1e3)) * 1_000_000
    if x < 1e14:  # ms
        return int(round(x)) * 1_000_000
    if x < 1e17:  # us
        return int(round(x)) * 1_000
    return int(x)


# --------------------------------------------------------------------------- Prometheus text


def _families(text: str):
    from prometheus_client.parser import text_string_to_metric_families

    return text_string_to_metric_families(text)


def _bad_line(lines: list[str], first_line: int, exc: Exception) -> BadInput:
    """The first line of a chunk the parser refuses on its own, as one line."""
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            for _ in _families(line):
                pass
        except Exception as line_exc:  # noqa: BLE001 - the parser raises ValueError, IndexError, ...
            shown = line.strip()
            shown = shown if len(shown) <= 80 else shown[:77] + "..."
            why = str(line_exc).splitlines()[0][:80] if str(line_exc) else type(line_exc).__name__
            return BadInput(
                f"line {first_line + i}: not Prometheus text exposition format ({why}): {shown!r}"
            )
    why = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
    return BadInput(f"lines {first_line}-{first_line + len(lines) - 1}: not Prometheus text format ({why})")


def _sample_name(family, sample) -> str:
    """The name as written: the parser renames counter samples to NAME_total (OpenMetrics)."""
    if family.type == "counter" and sample.name == family.name + "_total" and family.name.startswith("DCGM_"):
        return family.name
    return sample.name


def read_prom(text: str) -> Rows:
    """Samples of one or more concatenated scrapes (see the module docstring for time stamps)."""
    rows = Rows()
    lines = text.splitlines()
    chunks: list[tuple[int, int | None, list[str]]] = []  # (first line number, scrape utc, lines)
    start, utc, current = 1, None, []
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if stripped.startswith("#") and not re.match(r"#\s*(HELP|TYPE)\s", stripped):
            m = _TIME_COMMENT.match(stripped)
            stamp = parse_time(m.group("t")) if m else None
            if stamp is not None:
                if current or chunks or utc is not None:
                    chunks.append((start, utc, current))
                start, utc, current = number + 1, stamp, []
                continue
        current.append(line)
    chunks.append((start, utc, current))
    sample = -1
    for first, scrape_utc, chunk in chunks:
        if scrape_utc is not None or sample < 0:
            sample += 1
        seen: set[tuple] = set()
        try:
            families = list(_families("\n".join(chunk) + "\n"))
        except Exception as exc:  # noqa: BLE001 - locate the line and say it in one line
            raise _bad_line(chunk, first, exc) from None
        for family in families:
            for s in family.samples:
                name = _sample_name(family, s)
                key = (name, tuple(sorted(s.labels.items())))
                if key in seen and scrape_utc is None and s.timestamp is None:
                    sample += 1  # the same series again: the next (untimed) scrape
                    seen = set()
                seen.add(key)
                if s.timestamp is None:
                    rows.add(name, s.value, scrape_utc, sample, dict(s.labels))
                else:  # its own time stamp (ms): the scrape ordinal follows the times (load())
                    ts = int(round(float(s.timestamp) * 1e3)) * 1_000_000
                    rows.add(name, s.value, ts, None, dict(s.labels))
    # ordinals from 0 without gaps (a chunk of comments only holds no scrape)
    order = {v: i for i, v in enumerate(sorted({v for v in rows.data["sample"] if v is not None}))}
    rows.data["sample"] = [None if v is None else order[v] for v in rows.data["sample"]]
    return rows


# --------------------------------------------------------------------------- Prometheus JSON


def read_json(text: str) -> Rows:
    """`/api/v1/query` (vector) or `/api/v1/query_range` (matrix) answers; several in a JSON list."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadInput(f"line {exc.lineno}: not valid JSON ({exc.msg})") from None
    docs = doc if isinstance(doc, list) else [doc]
    rows = Rows()
    for d in docs:
        if not isinstance(d, dict):
            raise BadInput("not a Prometheus query answer (expected an object with data.result)")
        if d.get("status") == "error":
            raise BadInput(f"the Prometheus answer is an error: {d.get('errorType')}: {d.get('error')}")
        data = d.get("data", d)
        kind, result = data.get("resultType"), data.get("result")
        if kind not in ("vector", "matrix") or not isinstance(result, list):
            raise BadInput(f"Prometheus resultType {kind!r}: only vector and matrix answers hold GPU series")
        for series in result:
            labels = {str(k): str(v) for k, v in (series.get("metric") or {}).items()}
            name = labels.pop("__name__", None)
            points = series.get("values") if kind == "matrix" else [series.get("value")]
            if name is None:
                rows.skip("samples of series without __name__", len(points or []))
                continue
            for point in points or []:
                try:
                    ts, value = float(point[0]), float(point[1])
                except (TypeError, ValueError, IndexError):
                    raise BadInput(f'{name}: a point is not [time, "value"]: {point!r}') from None
                rows.add(name, value, int(round(ts * 1e3)) * 1_000_000, None, labels)
    return rows


# --------------------------------------------------------------------------- dcgmi dmon


def read_dmon(text: str) -> Rows:
    """`dcgmi dmon` tables: a header per run, one row per entity and interval."""
    rows = Rows()
    fields: list[str] | None = None
    run = 0
    per_entity: dict[tuple[str, str], int] = {}
    unknown: set[str] = set()
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped:
            continue
        header = _DMON_HEADER.match(stripped)
        if header:
            fields = header.group(2).split()
            unknown |= {f for f in fields if f.upper() not in DMON_FIELDS}
            run += 1
            continue
        if fields is not None and re.match(r"^#?\s*ID\b", stripped):  # units line of newer dcgmi
            continue
        m = _DMON_ROW.match(stripped)
        if m is None or fields is None:
            shown = stripped if len(stripped) <= 80 else stripped[:77] + "..."
            what = "a row before any '# Entity' header" if m is not None else "not a dcgmi dmon row"
            raise BadInput(f"line {number}: {what}: {shown!r}")
        values = m.group("rest").split()
        if len(values) != len(fields):
            raise BadInput(
                f"line {number}: {len(values)} values for {len(fields)} columns ({' '.join(fields)})"
            )
        utc = None
        if m.group("ts"):
            utc = parse_time(m.group("ts"))
            if utc is None:
                raise BadInput(f"line {number}: {m.group('ts')!r} before the entity is not a time stamp")
        kind, ident = m.group("kind"), m.group("id")
        seq = per_entity.get((kind, ident), 0)
        per_entity[(kind, ident)] = seq + 1
        labels = {"entity": f"{kind} {ident}", "run": str(run)}
        if kind == "GPU":
            labels["gpu"] = ident
        else:
            labels["GPU_I_ID" if kind == "GPU-I" else "GPU_CI_ID"] = ident
        for column, raw in zip(fields, values):
            name = DMON_FIELDS.get(column.upper(), f"DCGM_FI_DMON_{column.upper()}")
            try:
                value = float(raw)
            except ValueError:
                value = None  # N/A
            rows.add(name, value, utc, seq, labels)
    if unknown:
        rows.warnings.append(
            f"dcgmi dmon column(s) {', '.join(sorted(unknown))} have no known DCGM field: stored as "
            "DCGM_FI_DMON_<column>"
        )
    if rows.n:
        rows.warnings.append(
            "dcgmi dmon tables name no host or GPU UUID: their samples are matched to ranks by GPU index "
            "only while the workspace's ranks run on one host"
        )
    return rows


# --------------------------------------------------------------------------- a file


def read(path: Path, kind: str) -> Rows:
    """The samples of a file in the layout `kind` (FORMAT_*); BadInput when it is not UTF-8."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        raise BadInput(f"not UTF-8 text (byte {exc.start})") from None
    if kind == FORMAT_JSON:
        return read_json(text)
    if kind == FORMAT_DMON:
        return read_dmon(text)
    return read_prom(text)
