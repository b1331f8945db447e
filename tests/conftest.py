"""Shared test fixtures: where the real traces and oracles live, and quick ingest helpers."""

from __future__ import annotations

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


def oracle_dir(trace: Path) -> Path:
    """traces/nsys/a/b.sqlite -> oracles/nsys-2022.4/a__b"""
    rel = trace.relative_to(TRACES / "nsys").with_suffix("")
    return ORACLES / "__".join(rel.parts)


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
