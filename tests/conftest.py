"""Shared test fixtures: where the real traces and oracles live, and quick ingest helpers."""

from __future__ import annotations

import shutil
from collections.abc import Collection
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
TRACES = SHARED / "traces"
ORACLES = TRACES / "oracles" / "nsys-2022.4"

requires_shared = pytest.mark.skipif(
    not TRACES.is_dir(), reason="../shared/traces is absent (real traces live beside the project)"
)


def nsys_traces() -> list[Path]:
    """Every real nsys SQLite export in ../shared/traces/nsys, or [] when absent."""
    return sorted((TRACES / "nsys").rglob("*.sqlite")) if TRACES.is_dir() else []


def rounded_select(con, table: str, skip: Collection[str] = ()) -> str:
    """SELECT of a table's columns (all but `skip`), floating-point ones as text to 10 significant
    digits: a sum's last bits depend on the order DuckDB's threads add in, so two computations of
    the same table are "identical" only so rounded (test_scale, test_partition)."""
    cols = [c[:2] for c in con.execute(f'DESCRIBE "{table}"').fetchall() if c[0] not in skip]
    exprs = [f'printf(\'%.10g\', "{c}") AS "{c}"' if t in ("DOUBLE", "FLOAT") else f'"{c}"' for c, t in cols]
    return f'SELECT {", ".join(exprs)} FROM "{table}"'


def oracle_dir(trace: Path) -> Path:
    """traces/nsys/a/b.sqlite -> oracles/nsys-2022.4/a__b"""
    rel = trace.relative_to(TRACES / "nsys").with_suffix("")
    return ORACLES / "__".join(rel.parts)


@pytest.fixture(scope="session")
def sample_workspace(tmp_path_factory) -> Path:
    """sample_traces/ ingested once per test run (each ingest of it costs seconds of analysis):
    open it read-only, or `copy_workspace` it before writing."""
    from nsight_analyze.ingest import ingest

    db = tmp_path_factory.mktemp("sample_workspace") / "sample.duckdb"
    ingest([ROOT / "sample_traces"], db)
    return db


def copy_workspace(src: Path, dst: Path) -> Path:
    """A private copy of a closed workspace file (its .wal too, if one was left)."""
    shutil.copy(src, dst)
    wal = src.with_name(src.name + ".wal")
    if wal.exists():
        shutil.copy(wal, dst.with_name(dst.name + ".wal"))
    return dst


@pytest.fixture
def workspace_of(tmp_path):
    """Ingest the given paths into a fresh workspace and return an open connection."""
    from nsight_analyze.ingest import ingest
    from nsight_analyze.workspace import open_workspace

    def make(*paths: Path, name: str = "ws.duckdb"):
        db = tmp_path / name
        ingest(list(paths), db)
        return open_workspace(db)

    return make
