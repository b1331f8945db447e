"""The versions a PyTorch-profiler trace names are stored and compared (issue 52).

`distributedInfo.nccl_version` was stored only beside `pg_config`'s process groups, and the CUDA /
HIP runtime and driver versions nowhere, so `compare` could not say that two runs differ in them.
They are in `kineto_versions` now (schema_kineto.sql), one row per key the trace has, and
compare's setup (compare/setup.py) reads them.

Oracle: each trace's own top-level metadata, read here with gzip/json alone; the pair is HTA's
trace_diff (control, test), whose metadata names no version (so nothing may be claimed), and the
same pair with versions written into its metadata (no `pg_config`), as an older PyTorch writes
`nccl_version`. Version encodings: CUDA's cudaRuntimeGetVersion (1000 * major + 10 * minor), HIP's
HIP_VERSION (10^7 * major + 10^5 * minor + patch).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import TRACES

from nsight_analyze.cli import main
from nsight_analyze.compare.setup import side_setup
from nsight_analyze.ingest.run import ingest
from nsight_analyze.sources.kineto.loader import VERSION_KEYS
from nsight_analyze.store.workspace import open_workspace

DIFF = TRACES / "kineto" / "hta" / "trace_diff"
TRACES_WITH_VERSIONS = {
    "b200": TRACES / "kineto" / "tracelens" / "b200" / "eager_trace.json.gz",
    "vllm": TRACES / "kineto" / "tracelens" / "inference" / "vllm_decode_full" / "graph_execution.json.gz",
}
# written into the pair's metadata: what an older PyTorch / a program's add_metadata_json records
ADDED = {
    "control": {"nccl_version": "2.10.3", "cuda_runtime_version": 11040, "pytorch_version": "1.13.0"},
    "test": {"nccl_version": "2.14.3", "cuda_runtime_version": 11060, "pytorch_version": "2.0.0"},
}


def _doc(path: Path) -> dict:
    with gzip.open(path, "rt") as fh:
        return json.load(fh)


def _expected(top: dict) -> set[tuple[str, str]]:
    """The (key, value) pairs the metadata names: distributedInfo.nccl_version and the version keys."""
    dist = top.get("distributedInfo") or {}
    found = {("nccl_version", str(dist["nccl_version"]))} if "nccl_version" in dist else set()
    return found | {(k, str(top[k])) for k in VERSION_KEYS if k in top}


def _stored(db: Path) -> tuple[set[tuple[str, str]], dict]:
    con = open_workspace(db, read_only=True)
    try:
        rows = {(k, v) for k, v in con.execute("SELECT key, value FROM kineto_versions").fetchall()}
        home = con.execute("SELECT current_database()").fetchone()[0]
        ranks = [r for (r,) in con.execute("SELECT rank FROM ranks ORDER BY rank").fetchall()]
        setup = side_setup(con, home, ranks)
    finally:
        con.close()
    return rows, setup


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    """side -> (workspace of the real trace, workspace of the same trace with ADDED versions)."""
    if not all((DIFF / n / f"{n}.json.gz").is_file() for n in ADDED):
        pytest.skip("../shared/traces/kineto/hta/trace_diff is absent (real traces live beside the project)")
    tmp = tmp_path_factory.mktemp("kineto_versions")
    out = {}
    for name, added in ADDED.items():
        real = DIFF / name / f"{name}.json.gz"
        doc = _doc(real)
        assert "pg_config" not in doc["distributedInfo"]  # the case: a version without process groups
        doc["distributedInfo"]["nccl_version"] = added["nccl_version"]
        doc.update({k: v for k, v in added.items() if k != "nccl_version"})
        written = tmp / f"{name}_versions.json.gz"
        with gzip.open(written, "wt") as fh:
            json.dump(doc, fh)
        dbs = (tmp / f"{name}.duckdb", tmp / f"{name}_versions.duckdb")
        ingest([real], dbs[0])
        ingest([written], dbs[1])
        out[name] = dbs
    return out


def test_the_real_pair_names_no_version(pair):
    for name, (real, _) in pair.items():
        assert _expected(_doc(DIFF / name / f"{name}.json.gz")) == set()  # the oracle: nothing named
        rows, setup = _stored(real)
        assert rows == set()
        assert [setup[k] for k in ("nccl_version", "runtime", "driver", "pytorch")] == [None] * 4


def test_versions_without_pg_config_are_stored_and_compared(pair):
    for name, (_, added) in pair.items():
        rows, setup = _stored(added)
        want = ADDED[name]
        assert rows == {(k, str(v)) for k, v in want.items()}
        v = want["cuda_runtime_version"]
        assert setup["nccl_version"] == want["nccl_version"]
        assert setup["runtime"] == f"CUDA {v // 1000}.{v % 1000 // 10}"  # 11040 -> CUDA 11.4
        assert setup["pytorch"] == want["pytorch_version"] and setup["driver"] is None
    res = CliRunner().invoke(
        main, ["compare", str(pair["control"][1]), str(pair["test"][1]), "--format", "json"]
    )
    assert res.exit_code in (0, 1), res.output
    doc = json.loads(res.output[res.output.index("{") :])
    changed = {c["item"]: (c["before"], c["after"]) for c in doc["setup"]["changed"]}
    assert changed["nccl_version"] == ("2.10.3", "2.14.3")
    assert changed["runtime"] == ("CUDA 11.4", "CUDA 11.6")
    assert changed["pytorch"] == ("1.13.0", "2.0.0")
    assert "NCCL 2.10.3 -> 2.14.3" in doc["verdict"]["setup_changed"]


@pytest.mark.parametrize("key", sorted(TRACES_WITH_VERSIONS))
def test_stored_versions_equal_the_trace_metadata(key, tmp_path):
    path = TRACES_WITH_VERSIONS[key]
    if not path.exists():
        pytest.skip(f"{path} (shared real traces) is absent")
    top = _doc(path)
    top.pop("traceEvents")
    db = tmp_path / "ws.duckdb"
    ingest([path], db)
    rows, setup = _stored(db)
    assert rows == _expected(top) and rows
    assert setup["nccl_version"] == top["distributedInfo"]["nccl_version"]
    if "cuda_runtime_version" in top:  # b200: 12090 / 13000
        v, d = top["cuda_runtime_version"], top["cuda_driver_version"]
        assert setup["runtime"] == f"CUDA {v // 1000}.{v % 1000 // 10}"
        assert setup["driver"] == f"CUDA {d // 1000}.{d % 1000 // 10}"
    else:  # vLLM on ROCm: HIP_VERSION 70051831 = 7.0.51831
        v = top["hip_runtime_version"]
        assert setup["runtime"] == f"HIP {v // 10**7}.{v // 10**5 % 100}.{v % 10**5}"


def test_the_ijson_path_stores_the_same_versions(pair, tmp_path, monkeypatch):
    """The fallback parser (ijson stream) reads the keys written after traceEvents too."""
    from nsight_analyze.sources import kineto

    written = pair["control"][1].parent / "control_versions.json.gz"
    monkeypatch.setattr(kineto, "FAST_PATH", False)
    ingest([written], tmp_path / "slow.duckdb")
    rows, _ = _stored(tmp_path / "slow.duckdb")
    assert rows == {(k, str(v)) for k, v in ADDED["control"].items()}
