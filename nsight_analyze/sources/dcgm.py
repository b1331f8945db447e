"""DCGM GPU metrics: dcgm-exporter scrapes (Prometheus text), Prometheus query JSON, `dcgmi dmon`.

Why: in production nobody runs nsys on every node, but dcgm-exporter scrapes every GPU every few
seconds (`DCGM_FI_PROF_PIPE_TENSOR_ACTIVE`, `..._SM_ACTIVE`, `..._DRAM_ACTIVE`,
`DCGM_FI_DEV_GPU_UTIL`, power, clocks). Those samples go into the same `gpu_metrics` table as
the nsys GPU-metrics samples (`source` = 'dcgm'), keyed by `host` and `gpu_uuid` so samples
without a trace still say which GPU they are; `match_ranks` sets `rank` (and the rank's file
time `timestamp_ns`) where a rank of the workspace ran on that GPU (schema.sql documents the
columns, docs/dcgm.md the formats and the matching).

Three layouts are read:

* Prometheus text exposition format, as `curl host:9400/metrics` prints it: one snapshot, or
  repeated scrapes appended to one file. A scrape's time comes from the samples' own timestamps
  (the format's optional third field, ms), else from a comment line before the scrape
  (`# scrape 2026-12-01T12:00:00Z`, `# timestamp 1764590400123`, or a bare epoch/ISO time); a
  series that repeats without either starts a new (untimed) scrape. Parsed with
  prometheus_client's parser, never by hand.
* Prometheus HTTP API JSON (`/api/v1/query` vector or `/api/v1/query_range` matrix).
* `dcgmi dmon` tables (`# Entity  GPUTL SMACT TENSO ...` headers, `GPU 0  ...` rows), with an
  optional time stamp before the entity (`dcgmi dmon | ts`). Columns are stored under their
  DCGM field names (SMACT -> DCGM_FI_PROF_SM_ACTIVE).

Nothing is dropped silently: samples that are not stored (not a DCGM field, no GPU identity,
N/A or non-finite values) are counted in the file's `skipped` list; a line that is not of the
format fails the file with one line naming it.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from .base import BadInput, LoadResult, Probe

FORMAT_PROM = "dcgm-prom"
FORMAT_JSON = "dcgm-json"
FORMAT_DMON = "dcgm-dmon"
SNIFF_BYTES = 1 << 16
SUFFIXES = (".prom", ".txt", ".log", ".metrics", ".json", ".dmon", "")

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
class _Rows:
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


# --------------------------------------------------------------------------- sniff / probe


def _head(path: Path) -> str:
    with open(path, "rb") as fh:
        return fh.read(SNIFF_BYTES).decode("utf-8", errors="replace")


def _kind(head: str) -> str | None:
    stripped = head.lstrip()
    if stripped.startswith(("{", "[")):
        return FORMAT_JSON if '"resultType"' in head and "DCGM_FI_" in head else None
    if any(_DMON_HEADER.match(line) for line in head.splitlines()[:50]):
        return FORMAT_DMON
    if _DCGM_LINE.search(head):
        return FORMAT_PROM
    return None


def sniff(path: Path) -> bool:
    """A file whose first 64 KiB hold DCGM field names in one of the three layouts."""
    path = Path(path)
    if path.name.lower().endswith(".gz"):
        return False
    try:
        return _kind(_head(path)) is not None
    except OSError:
        return False


def probe(path: Path) -> Probe:
    """DCGM data carries no ranks (processes=[]); ranks are matched by host and GPU after the ingest."""
    try:
        kind = _kind(_head(Path(path)))
    except OSError as exc:
        raise BadInput(f"unreadable ({exc.strerror or exc})") from exc
    if kind is None:
        raise BadInput("not a DCGM scrape, Prometheus query export or dcgmi dmon table")
    return Probe(format=kind, processes=[])


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


def read_prom(text: str) -> _Rows:
    """Samples of one or more concatenated scrapes (see the module docstring for time stamps)."""
    rows = _Rows()
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


def read_json(text: str) -> _Rows:
    """`/api/v1/query` (vector) or `/api/v1/query_range` (matrix) answers; several in a JSON list."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadInput(f"line {exc.lineno}: not valid JSON ({exc.msg})") from None
    docs = doc if isinstance(doc, list) else [doc]
    rows = _Rows()
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


def read_dmon(text: str) -> _Rows:
    """`dcgmi dmon` tables: a header per run, one row per entity and interval."""
    rows = _Rows()
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


# --------------------------------------------------------------------------- load


def read(path: Path, kind: str) -> _Rows:
    try:
        text = Path(path).read_text(encoding="utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        raise BadInput(f"not UTF-8 text (byte {exc.start})") from None
    if kind == FORMAT_JSON:
        return read_json(text)
    if kind == FORMAT_DMON:
        return read_dmon(text)
    return read_prom(text)


def load(con: duckdb.DuckDBPyConnection, path: Path, file_id: int, ranks: dict[int, int], probe: Probe):
    """Insert the samples into gpu_metrics (source 'dcgm', rank NULL until match_ranks)."""
    rows = read(Path(path), probe.format)
    if rows.n == 0:
        why = "; ".join(f"{n} {w}" for w, n in sorted(rows.not_stored.items())) or "no samples"
        raise BadInput(f"no DCGM GPU samples ({why})")
    result = LoadResult(warnings=list(rows.warnings))
    import pandas as pd  # here, not at the top: sniffing every .json/.txt of an ingest imports this module

    frame = pd.DataFrame(rows.data, columns=COLUMNS)
    frame["sample"] = frame["sample"].astype("Int64")
    frame["utc_ns"] = frame["utc_ns"].astype("Int64")
    frame["gpu_id"] = frame["gpu_id"].astype("Int64")
    con.register("_dcgm_rows", frame)
    try:
        n = con.execute(
            f"""INSERT INTO gpu_metrics (rank, gpu_id, timestamp_ns, metric_name, value, source, file_id,
                    host, gpu_uuid, gpu_name, gpu_instance, utc_ns, sample, labels)
                SELECT NULL, gpu_id, NULL, metric_name, value, 'dcgm', {int(file_id)}, host, gpu_uuid,
                       gpu_name, gpu_instance, utc_ns,
                       coalesce(sample, dense_rank() OVER (ORDER BY utc_ns) - 1)::INTEGER,
                       labels::JSON::MAP(VARCHAR, VARCHAR)
                FROM _dcgm_rows"""
        ).fetchone()[0]
    finally:
        con.unregister("_dcgm_rows")
    result.counts["gpu_metrics"] = int(n)
    for why, count in sorted(rows.not_stored.items()):
        what = why
        if why.startswith("samples of metrics that are not DCGM") and rows.other_metrics:
            names = sorted(rows.other_metrics)
            what += f": {', '.join(names[:5])}{' ...' if len(names) > 5 else ''}"
        result.skipped.append(f"{probe.format}: {count} {what}")
    return result


# --------------------------------------------------------------------------- ranks

_NORM_UUID = "lower(regexp_replace({0}, '^(GPU|MIG)-', '', 'i'))"
_NORM_BUS = "lower(regexp_extract({0}, '([0-9A-Fa-f]{{2}}:[0-9A-Fa-f]{{2}}\\.[0-9A-Fa-f])$', 1))"
_SHORT_HOST = "lower(split_part({0}, '.', 1))"

MATCH_SQL = f"""
WITH gpu AS (  -- the GPU each rank ran on
    SELECT r.rank, r.hostname, r.device_id, r.session_start_utc_ns,
           {_NORM_UUID.format("g.uuid")} AS uuid, {_NORM_BUS.format("g.bus_location")} AS bus
    FROM ranks r LEFT JOIN gpus g ON g.rank = r.rank AND g.device_id IS NOT DISTINCT FROM r.device_id
),
hosts AS (  -- the distinct hosts the ranks name (ranks without a host name count as none)
    SELECT count(DISTINCT {_SHORT_HOST.format("hostname")}) AS n FROM ranks
),
s AS (  -- the GPUs DCGM sampled (whole GPUs: MIG instance rows are not a rank's)
    SELECT DISTINCT file_id, host, gpu_id, gpu_uuid, labels['pci_bus_id'] AS pci
    FROM gpu_metrics WHERE source = 'dcgm' AND gpu_instance IS NULL
),
cand AS (
    SELECT s.*, gpu.rank, gpu.session_start_utc_ns,
           CASE WHEN gpu.uuid <> '' AND gpu.uuid = {_NORM_UUID.format("s.gpu_uuid")} THEN 1
                WHEN {_SHORT_HOST.format("s.host")} = {_SHORT_HOST.format("gpu.hostname")}
                     AND gpu.bus <> '' AND gpu.bus = {_NORM_BUS.format("s.pci")} THEN 2
                WHEN {_SHORT_HOST.format("s.host")} = {_SHORT_HOST.format("gpu.hostname")}
                     AND s.gpu_id = gpu.device_id AND (gpu.uuid IS NULL OR s.gpu_uuid IS NULL) THEN 3
                WHEN s.host IS NULL AND (SELECT n FROM hosts) <= 1
                     AND s.gpu_id = gpu.device_id AND (gpu.uuid IS NULL OR s.gpu_uuid IS NULL) THEN 4
           END AS how
    FROM s JOIN gpu ON true
),
best AS (  -- per sampled GPU, the ranks of its strongest evidence; taken only when it is one rank
    SELECT file_id, host, gpu_id, gpu_uuid, min(how) AS how
    FROM cand WHERE how IS NOT NULL GROUP BY ALL
)
SELECT c.file_id, c.host, c.gpu_id, c.gpu_uuid, any_value(c.rank) AS rank,
       any_value(c.session_start_utc_ns) AS session_start_utc_ns, count(*) AS ranks,
       CASE b.how WHEN 1 THEN 'uuid' WHEN 2 THEN 'host+pci_bus_id' WHEN 3 THEN 'host+gpu_index'
                  ELSE 'gpu_index (no host, one-host workspace)' END AS how
FROM cand c JOIN best b ON b.file_id = c.file_id AND b.how = c.how
    AND b.host IS NOT DISTINCT FROM c.host AND b.gpu_id IS NOT DISTINCT FROM c.gpu_id
    AND b.gpu_uuid IS NOT DISTINCT FROM c.gpu_uuid
GROUP BY ALL
"""


def match_ranks(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Set rank, rank_match and the rank's file time (timestamp_ns) on DCGM samples of a rank's GPU.

    Evidence, strongest first: the GPU UUID (DCGM's `UUID` label = the trace's GPU uuid); the host
    and PCI bus id; the host and GPU index (DCGM's `gpu` = NVML index, compared with the rank's CUDA
    ordinal: equal unless CUDA_VISIBLE_DEVICES reorders); for samples that name no host (`dcgmi
    dmon` tables, scrapes without host labels), the GPU index alone, and only while the
    workspace's ranks name at most one host: across hosts an index names one GPU per host. A GPU
    that several ranks claim with equal evidence is left unmatched and said. Recomputed from
    scratch on every ingest, so files may come in any order. Returns notes for the ingest report.
    """
    if not con.execute("SELECT count(*) FROM gpu_metrics WHERE source = 'dcgm'").fetchone()[0]:
        return []
    matches = con.execute(MATCH_SQL).df()
    con.execute(
        "UPDATE gpu_metrics SET rank = NULL, timestamp_ns = NULL, rank_match = NULL WHERE source = 'dcgm'"
    )
    unique = matches[matches["ranks"] == 1]
    con.register("_dcgm_match", unique)
    try:
        con.execute(
            """UPDATE gpu_metrics AS g SET rank = m.rank, rank_match = m.how,
                      timestamp_ns = g.utc_ns - m.session_start_utc_ns
               FROM _dcgm_match m
               WHERE g.source = 'dcgm' AND g.gpu_instance IS NULL AND g.file_id = m.file_id
                 AND g.host IS NOT DISTINCT FROM m.host AND g.gpu_id IS NOT DISTINCT FROM m.gpu_id
                 AND g.gpu_uuid IS NOT DISTINCT FROM m.gpu_uuid"""
        )
    finally:
        con.unregister("_dcgm_match")
    notes = []
    total = con.execute(
        "SELECT count(*) FROM (SELECT DISTINCT host, gpu_id, gpu_uuid FROM gpu_metrics WHERE source = 'dcgm' "
        "AND gpu_instance IS NULL)"
    ).fetchone()[0]
    ranked = con.execute("SELECT count(*) FROM ranks").fetchone()[0]
    if ranked:
        by = ", ".join(f"{n} by {how}" for how, n in unique.groupby("how").size().items()) or "none"
        notes.append(f"DCGM: {len(unique)} of {total} sampled GPUs matched to a rank ({by})")
    hostless = con.execute(
        "SELECT count(*) FROM (SELECT DISTINCT file_id, gpu_id, gpu_uuid FROM gpu_metrics "
        "WHERE source = 'dcgm' AND gpu_instance IS NULL AND host IS NULL AND rank IS NULL)"
    ).fetchone()[0]
    hosts = [
        h
        for (h,) in con.execute(
            "SELECT DISTINCT hostname FROM ranks WHERE hostname IS NOT NULL ORDER BY 1"
        ).fetchall()
    ]
    if ranked and hostless and len({h.split(".")[0].lower() for h in hosts}) > 1:
        shown = ", ".join(hosts[:4]) + (" ..." if len(hosts) > 4 else "")
        notes.append(
            f"DCGM: {hostless} sampled GPU(s) name no host (dcgmi dmon, or no Hostname label) and the "
            f"ranks run on {len(hosts)} hosts ({shown}): a GPU index is ambiguous across hosts, so their "
            "samples are not given a rank"
        )
    for row in matches[matches["ranks"] > 1].itertuples(index=False):
        notes.append(
            f"DCGM: GPU {row.gpu_id} ({row.gpu_uuid or 'no UUID'}) on {row.host or 'an unnamed host'} "
            f"matches {row.ranks} ranks "
            f"by {row.how}: its samples are not given a rank"
        )
    return notes
