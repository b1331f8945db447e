"""Reading Nsight Compute's exports into two frames: launches and metrics, values in base units.

Why a module of its own: ncu.py loads what this gives into the workspace (ncu_kernels,
ncu_metrics, the peaks and the missing-counter report); this is the part that copes with the
exports' shapes: the CSV header after program output, the long details page and the wide raw
page (with its units row), quoted values with locale-dependent separators and `n/a`, unit
prefixes (Kbyte, usecond), and `.ncu-rep` reports read through NVIDIA's optional `ncu_report`
module. Every metric is kept as it was measured; only its value and unit are normalised.

The layouts are described in ../shared/docs/nsys-sqlite-schema.md §10.5-10.6.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pandas as pd

from .base import BadInput

REP_MAGIC = b"NVR\x00"
HEADER_SCAN_BYTES = 1 << 20

# Identification columns of the CSV layouts; every other column of the raw page is a metric.
ID_COLUMNS = (
    "ID",
    "Process ID",
    "Process Name",
    "Host Name",
    "Kernel Name",
    "Kernel Time",
    "Context",
    "Stream",
    "Block Size",
    "Grid Size",
    "Device",
    "CC",
    "Function Name",
    "Demangled Name",
)
LONG_COLUMNS = ("Section Name", "Metric Name", "Metric Unit", "Metric Value")

_TIME_UNITS = {
    "nsecond": 1.0,
    "ns": 1.0,
    "usecond": 1e3,
    "us": 1e3,
    "msecond": 1e6,
    "ms": 1e6,
    "second": 1e9,
    "s": 1e9,
}
_PREFIX = {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_BASE_WORDS = r"(byte|inst|cycle|hz|thread|warp|sector|request|block|flop|op)"


def header_offset(head: bytes) -> int | None:
    """Byte offset of the `"ID","Process ID",...` header line (program output may precede it)."""
    match = re.search(rb'(?m)^(\xef\xbb\xbf)?"ID","Process ID",.*"Kernel Name"', head)
    return None if match is None else match.start()


def is_rep(path: Path) -> bool:
    """An .ncu-rep: by its suffix, else by its first four bytes (the magic NVR\\0)."""
    if path.suffix == ".ncu-rep":
        return True
    with open(path, "rb") as fh:
        return fh.read(4) == REP_MAGIC


# ---------------------------------------------------------------------------------------
# Values and units


def _decimal_comma(values: pd.Series) -> bool:
    """A European-locale capture (`3.769,74`, `0,75`) writes the decimal separator as a comma."""
    text = values.dropna().astype(str).str.strip()
    pattern = r"^-?\d{1,3}(\.\d{3})+(,\d+)?$|^-?\d+,(\d{1,2}|\d{4,})$"
    return bool(text.str.match(pattern).any()) and not bool(text.str.match(r"^-?\d+\.\d+$").any())


def parse_numbers(values: pd.Series, decimal_comma: bool | None = None) -> pd.Series:
    """Quoted ncu numbers -> float: thousands separators removed, `n/a` and text -> NaN."""
    if decimal_comma is None:
        decimal_comma = _decimal_comma(values)
    text = values.fillna("").astype(str).str.strip()
    if decimal_comma:
        text = text.str.replace(".", "", regex=False).str.replace(",", ".", regex=False)
    else:
        text = text.str.replace(",", "", regex=False)
    return pd.to_numeric(text, errors="coerce")


def normalise_units(units: pd.Series, values: pd.Series) -> tuple[pd.Series, pd.Series]:
    """Kbyte -> byte (x1e3), usecond -> ns (x1e3), ...: every stored value is in base units."""
    units = units.fillna("").astype(str).str.strip()
    factor = pd.Series(1.0, index=units.index)
    out_units = units.copy()
    time_mask = units.isin(list(_TIME_UNITS))
    factor[time_mask] = units[time_mask].map(_TIME_UNITS)
    out_units[time_mask] = "ns"
    prefixed = units.str.match(r"^[KMGT]" + _BASE_WORDS) & ~time_mask
    factor[prefixed] = units[prefixed].str[0].map(_PREFIX)
    out_units[prefixed] = units[prefixed].str[1:]
    return out_units, values * factor


# ---------------------------------------------------------------------------------------
# CSV layouts -> (launches, metrics)


def _read_csv(path: Path) -> pd.DataFrame:
    raw = Path(path).read_bytes()
    offset = header_offset(raw[:HEADER_SCAN_BYTES])
    if offset is None:
        raise BadInput(f"{Path(path).name}: no Nsight Compute CSV header")
    text = raw[offset:].decode("utf-8-sig", errors="replace")
    try:
        df = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, on_bad_lines="skip")
    except (pd.errors.ParserError, ValueError) as exc:
        raise BadInput(
            f"{Path(path).name}: unreadable Nsight Compute CSV: {str(exc).splitlines()[0]}"
        ) from None
    return df.fillna("")  # rows shorter than the header (rule rows) leave NaN


def _launch_columns(df: pd.DataFrame) -> pd.DataFrame:
    """First row per ID of the identification columns."""
    cols = [c for c in ID_COLUMNS if c in df.columns]
    return df[cols].drop_duplicates("ID").reset_index(drop=True)


def _long_metrics(df: pd.DataFrame) -> pd.DataFrame:
    rows = df[df["Metric Name"].astype(str).str.len() > 0]
    return pd.DataFrame(
        {
            "launch_id": rows["ID"],
            "section": rows["Section Name"],
            "metric": rows["Metric Name"],
            "unit": rows["Metric Unit"],
            "value_text": rows["Metric Value"],
        }
    )


def _wide_metrics(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Raw page: one row per launch, one column per metric, the first data row holds units."""
    units_row = None
    if len(df) and str(df.iloc[0]["ID"]).strip() == "":
        units_row = df.iloc[0]
        df = df.iloc[1:]
    metric_cols = [c for c in df.columns if c not in ID_COLUMNS]
    long = df.melt(id_vars=["ID"], value_vars=metric_cols, var_name="metric", value_name="value_text")
    units = {c: ("" if units_row is None else str(units_row[c])) for c in metric_cols}
    long["unit"] = long["metric"].map(units)
    long["section"] = None
    long = long.rename(columns={"ID": "launch_id"})
    return df, long[["launch_id", "section", "metric", "unit", "value_text"]]


def read_csv_export(path: Path) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """(launches, metrics, layout) of an `ncu --csv` file; layout is 'long' or 'wide'."""
    df = _read_csv(path)
    if "ID" not in df.columns or "Kernel Name" not in df.columns:
        raise BadInput(f"{Path(path).name}: Nsight Compute CSV without ID/Kernel Name columns")
    if all(c in df.columns for c in LONG_COLUMNS):
        df = df[df["ID"].astype(str).str.strip().str.match(r"^\d+$")]
        return _launch_columns(df), _long_metrics(df), "long"
    df, metrics = _wide_metrics(df)
    df = df[df["ID"].astype(str).str.strip().str.match(r"^\d+$")]
    metrics = metrics[metrics["launch_id"].astype(str).str.strip().str.match(r"^\d+$")]
    return _launch_columns(df), metrics, "wide"


# ---------------------------------------------------------------------------------------
# .ncu-rep through ncu_report


def _ncu_report():
    try:
        import ncu_report  # type: ignore[import-not-found]
    except ImportError:
        raise BadInput(
            "reading .ncu-rep needs NVIDIA's ncu_report module: pip install 'nsight-analyze[ncu]' "
            "(or pip install ncu-report), or export with `ncu --import X.ncu-rep --csv --page raw`"
        ) from None
    return ncu_report


def read_rep(path: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(launches, metrics) of an .ncu-rep. The loop is over profiled launches and their
    metrics through NVIDIA's object API; there is no columnar access."""
    ncu_report = _ncu_report()
    try:
        ctx = ncu_report.load_report(str(path))
    except Exception as exc:  # noqa: BLE001 - the module raises plain exceptions
        raise BadInput(f"{Path(path).name}: ncu_report cannot read it: {str(exc).splitlines()[0]}") from None
    launches: list[dict] = []
    ids: list[int] = []
    names: list[str] = []
    units: list[str] = []
    numbers: list[float | None] = []
    texts: list[str | None] = []
    launch_id = 0
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for a in range(rng.num_actions()):
            action = rng.action_by_idx(a)
            launches.append(
                {
                    "ID": str(launch_id),
                    "Kernel Name": action.name(ncu_report.IAction.NameBase_DEMANGLED),
                    "Function Name": action.name(ncu_report.IAction.NameBase_FUNCTION),
                }
            )
            for metric_name in action.metric_names():
                metric = action[metric_name]
                try:
                    value = metric.value()
                except Exception:  # noqa: BLE001 - instanced/unsupported kinds
                    value = None
                ids.append(launch_id)
                names.append(metric_name)
                units.append(metric.unit() or "")
                if isinstance(value, bool):
                    value = int(value)
                if isinstance(value, (int, float)):
                    numbers.append(float(value))
                    texts.append(None)
                else:
                    numbers.append(None)
                    texts.append(None if value is None else str(value))
            launch_id += 1
    metrics = pd.DataFrame(
        {
            "launch_id": ids,
            "section": None,
            "metric": names,
            "unit": units,
            "value": numbers,
            "value_text": texts,
        }
    )
    return pd.DataFrame(launches), metrics


# ---------------------------------------------------------------------------------------
# One file -> frames


def frames(path: Path) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """(launches, metrics, layout) of one file, every value and unit normalised; layout is
    'rep', 'long' or 'wide'."""
    if is_rep(path):
        launches, metrics = read_rep(path)
        metrics["unit"], metrics["value"] = normalise_units(metrics["unit"], metrics["value"])
        return launches, metrics, "rep"
    launches, metrics, layout = read_csv_export(path)
    numbers = parse_numbers(metrics["value_text"])
    metrics = metrics.assign(value=numbers)
    metrics["unit"], metrics["value"] = normalise_units(metrics["unit"], metrics["value"])
    metrics["value_text"] = metrics["value_text"].astype(str)
    return launches, metrics, layout
