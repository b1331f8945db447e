"""Per-version nsys SQLite DDL and the ENUM rows the generator writes.

The DDL files in `nsight_analyze/data/nsys_schema_<version>.sql` are copied verbatim
(comments included) from the `sqlite_master` of real exports of that version, so a
generated file is indistinguishable by schema from a real one. `extract()` regenerates
them from ../shared (run once; never at generation time).
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from functools import cache
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parents[1] / "data"


@dataclass(frozen=True)
class SchemaVersion:
    """An nsys release as the generator imitates it."""

    key: str  # CLI name: 2022.4 | 2025.1 | 2026.2
    product_version: str  # EXPORT_PRODUCT_VERSION
    schema_version: str  # EXPORT_SCHEMA_VERSION
    meta_table: str  # EXPORT_META_DATA (2022.x) or META_DATA_EXPORT (newer)
    has_capture_meta: bool
    launch_type_enum: str

    @property
    def newer_than_2022(self) -> bool:
        return self.meta_table == "META_DATA_EXPORT"


VERSIONS: dict[str, SchemaVersion] = {
    "2022.4": SchemaVersion(
        "2022.4", "2022.4.2.1", "3.0.0", "EXPORT_META_DATA", False, "ENUM_CUDA_KRENEL_LAUNCH_TYPE"
    ),
    "2025.1": SchemaVersion(
        "2025.1", "2025.1.1.110", "3.17.1", "META_DATA_EXPORT", True, "ENUM_CUDA_KERNEL_LAUNCH_TYPE"
    ),
    "2026.2": SchemaVersion(
        "2026.2", "2026.2.1.210", "3.25.0", "META_DATA_EXPORT", True, "ENUM_CUDA_KERNEL_LAUNCH_TYPE"
    ),
}

# Tables the generator writes, every version (version-specific ones are added below).
COMMON_TABLES = [
    "StringIds",
    "ThreadNames",
    "PROCESSES",
    "ANALYSIS_DETAILS",
    "TARGET_INFO_GPU",
    "TARGET_INFO_SESSION_START_TIME",
    "TARGET_INFO_SYSTEM_ENV",
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "NVTX_EVENTS",
    "ENUM_CUDA_MEMCPY_OPER",
    "ENUM_CUDA_MEM_KIND",
    "ENUM_NSYS_EVENT_TYPE",
    "ENUM_NSYS_EVENT_CLASS",
]


def tables_for(version: str) -> list[str]:
    v = VERSIONS[version]
    extra = [v.meta_table, v.launch_type_enum]
    if v.has_capture_meta:
        extra += ["META_DATA_CAPTURE", "TARGET_INFO_CUDA_DEVICE"]
    return COMMON_TABLES + extra


@cache
def ddl(version: str) -> str:
    """The CREATE TABLE statements for `version` (as real exports of it spell them)."""
    if version not in VERSIONS:
        raise KeyError(version)
    return (DATA_DIR / f"nsys_schema_{version}.sql").read_text()


@cache
def columns(version: str) -> dict[str, list[str]]:
    """Column names per table, in declared order, parsed by SQLite itself."""
    con = sqlite3.connect(":memory:")
    con.executescript(ddl(version))
    out = {}
    for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"):
        out[name] = [r[1] for r in con.execute(f'PRAGMA table_info("{name}")')]
    con.close()
    return out


# ---------------------------------------------------------------------------------------------
# Regeneration from real exports (developer tool; needs ../shared).

# Where each version's DDL is read from: real files first, then the 2022.4 documentation dump.
# 2026.2 captures (nsys-ai) lack the GPU tables; 2026.1 (3.24.14, same layouts per the schema
# notes) supplies them.
SOURCES = {
    "2022.4": ["docs/schemas/nsys-2022.4-all-tables.sql"],
    "2025.1": ["traces/nsys/fuser/report1.sqlite", "traces/nsys/icon/gpu.sqlite"],
    "2026.2": ["traces/nsys/nsys-ai/mfu_2gpu_before.sqlite", "traces/nsys/nsys-ai/mock.sqlite"],
}


def _statements_from(path: Path) -> dict[str, str]:
    if path.suffix == ".sqlite":
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        rows = con.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall()
        con.close()
        return dict(rows)
    text = path.read_text()
    out = {}
    for m in re.finditer(r"^CREATE TABLE (\w+) \(.*?^\);", text, flags=re.S | re.M):
        out[m.group(1)] = m.group(0)[:-1]
    return out


def extract(shared: Path, out_dir: Path) -> None:
    """Write nsys_schema_<version>.sql for every version from the real exports under `shared`."""
    for version, rels in SOURCES.items():
        found: dict[str, tuple[str, str]] = {}
        for rel in rels:
            for name, sql in _statements_from(shared / rel).items():
                found.setdefault(name, (sql, rel))
        parts = [
            f"-- Nsight Systems {VERSIONS[version].product_version} (export schema "
            f"{VERSIONS[version].schema_version}): CREATE TABLE statements of the tables the synthetic\n"
            "-- generator writes, copied verbatim from real exports (schema only, no data).\n"
            "-- Regenerate: python -c 'from nsight_analyze.synth.schemas import extract; "
            'from pathlib import Path; extract(Path("../shared"), Path("nsight_analyze/data"))\'\n'
        ]
        for name in tables_for(version):
            sql, rel = found[name]
            parts.append(f"-- from {rel}\n{sql};\n")
        (out_dir / f"nsys_schema_{version}.sql").write_text("\n".join(parts))
