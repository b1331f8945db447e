"""`synth --nccl-payload json|binary` end to end, and NCCL's rank hint read from binary payloads.

Why: an nsys >= 2025.6.1 export without --include-json keeps NCCL's NVTX payloads as binaryData
blobs; the same job exported both ways must ingest to the same ranks, jobs, collectives and
summary / comms documents. Expected values come from the generator's ground truth
(ground_truth.json: `ranks`, `parallel.operations` and `.communicators`, `comms_by_dimension`,
`generator.nccl_payload_events`); the two exports' documents are compared with each other.
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner
from test_nccl_binary_payload import _groups  # collectives as sets of (rank, correlation id)

from nsight_analyze.cli import main
from nsight_analyze.sources import nsys_sqlite
from nsight_analyze.synth.nccl_payload import write_binary

JOB = ["--ranks", "4", "--gpus-per-node", "2", "--steps", "2", "--parallel", "tp=2,pp=2,dp=1"]


def _cli(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def _export(root: Path, form: str, advanced: bool) -> dict:
    """Generate (CLI), ingest (CLI) and read one export: its truth, ranks, collectives, documents."""
    out, db = root / form, str(root / f"{form}.duckdb")
    _cli("synth", str(out), *JOB, *(["--nccl-trace"] if advanced else []), "--nccl-payload", form)
    _cli("ingest", str(out), "--db", db, "-q")
    con = duckdb.connect(db, read_only=True)
    try:
        sql = "SELECT r.rank, r.job, r.rank_source, f.path FROM ranks r JOIN files f USING (file_id)"
        ranks = con.execute(sql + " ORDER BY r.rank").fetchall()
        members = con.execute("SELECT rank, correlation_id, op, comm, seq FROM merge_coll_members").fetchall()
        payloads = con.execute("SELECT count(*) FROM nvtx WHERE payload IS NOT NULL").fetchone()[0]
    finally:
        con.close()

    def doc(*args: str) -> dict:  # the folder's path is the only text that may differ
        return json.loads(_cli(*args, "--db", db, "--format", "json").replace(str(out), "OUT"))

    return {
        "truth": json.loads((out / "ground_truth.json").read_text()),
        "ranks": [(r, job, src, Path(p).name) for r, job, src, p in ranks],
        "members": members,
        "payloads": payloads,
        "summary": doc("summary"),
        "comms": doc("comms"),
    }


@pytest.mark.parametrize("advanced", [False, True], ids=["legacy", "advanced"])
def test_json_and_binary_exports_agree(tmp_path, advanced):
    """The same job through `synth --nccl-payload json` and `binary`: the binary files hold no JSON,
    every payload is decoded, and both ingest to the truth's ranks, one job, the truth's collectives
    and communication totals, with identical summary and comms JSON."""
    js, bi = _export(tmp_path, "json", advanced), _export(tmp_path, "binary", advanced)
    truth = bi["truth"]
    assert truth["generator"]["nccl_payload"] == "binary" and "nccl_payload" not in js["truth"]["generator"]
    for f in (tmp_path / "binary").glob("*.sqlite"):
        with sqlite3.connect(f) as con:
            assert con.execute("SELECT count(*) FROM NVTX_EVENTS WHERE jsonText IS NOT NULL").fetchone() == (
                0,
            )
    assert bi["payloads"] == js["payloads"] == truth["generator"]["nccl_payload_events"]
    want_ranks = [(r["rank"], 1, "env:RANK", r["file"]) for r in truth["ranks"]]  # one job, RANK in the env
    assert bi["ranks"] == js["ranks"] == want_ranks
    want_ops = {frozenset((r, c) for r, c in o["members"]) for o in truth["parallel"]["operations"]}
    assert _groups(bi["members"]) == _groups(js["members"]) == want_ops
    assert bi["summary"] == js["summary"]
    assert bi["summary"]["job"]["n_jobs"] == 1 and bi["summary"]["job"]["ranks"] == [0, 1, 2, 3]
    assert bi["comms"] == js["comms"]
    got = {row["dimension"]: row["total_ns"] for row in bi["comms"]["rows"]}
    assert got == {dim: t["total_ns"] for dim, t in truth["comms_by_dimension"].items()}


def _hide_rank(folder: Path, names: dict[str, str]) -> None:
    """Take RANK / WORLD_SIZE out of every file's captured environment (the DeviceEnvironment text
    and META_DATA_CAPTURE's variables, where synth/export_meta.py writes them) and rename the files
    so their names state no rank (discovery.NAME_RANK_PATTERNS) and sort in another order."""
    for old, new in names.items():
        path = folder / old
        with sqlite3.connect(path) as con:
            con.execute(
                "DELETE FROM META_DATA_CAPTURE WHERE value LIKE 'RANK=%' OR value LIKE 'WORLD_SIZE=%'"
            )
            sql = "SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'DeviceEnvironment'"
            (env,) = con.execute(sql).fetchone()
            con.execute(
                "UPDATE TARGET_INFO_SYSTEM_ENV SET value = ? WHERE name = 'DeviceEnvironment'",
                (re.sub(r";(RANK|WORLD_SIZE)=\d+", "", env),),
            )
        path.rename(folder / new)


def test_rank_hint_from_binary_payloads(tmp_path):
    """One tensor-parallel communicator of 4 ranks, no rank in the environment or the file names
    (named so that file order is the reverse of rank order): the ranks are NCCL's, read from
    ncclCommInitRank's binary payload as from its JSON twin. Expected: NCCL's rank is the position
    in the truth's communicator (synth/parallel.py), the world size its size."""
    _cli("synth", str(tmp_path / "json"), "--ranks", "4", "--gpus-per-node", "4", "--steps", "1",
         "--parallel", "tp=4")  # fmt: skip
    _cli("synth", str(tmp_path / "binary"), "--ranks", "4", "--gpus-per-node", "4", "--steps", "1",
         "--parallel", "tp=4", "--nccl-payload", "binary")  # fmt: skip
    truth = json.loads((tmp_path / "binary" / "ground_truth.json").read_text())
    (comm,) = truth["parallel"]["communicators"]
    names = {r["file"]: f"gpu_{'dcba'[r['rank']]}.sqlite" for r in truth["ranks"]}
    want = sorted((names[r["file"]], comm["ranks"].index(r["rank"])) for r in truth["ranks"])
    got = {}
    for form in ("json", "binary"):
        _hide_rank(tmp_path / form, names)
        probes = {f.name: nsys_sqlite.probe(f).processes for f in sorted((tmp_path / form).glob("*.sqlite"))}
        assert {n: [(p.rank_source, p.world_size) for p in ps] for n, ps in probes.items()} == {
            n: [("nccl", len(comm["ranks"]))] for n in names.values()
        }
        db = tmp_path / f"{form}.duckdb"
        _cli("ingest", str(tmp_path / form), "--db", str(db), "-q")
        with duckdb.connect(str(db), read_only=True) as con:
            rows = con.execute(
                "SELECT f.path, r.rank, r.rank_source FROM ranks r JOIN files f USING (file_id)"
            ).fetchall()
        got[form] = sorted((Path(p).name, rank) for p, rank, src in rows if src == "nccl")
    assert got["binary"] == got["json"] == want


def test_rank_hint_twins_agree_with_several_communicators(tmp_path):
    """Every rank in two communicators (tp=2, pp=2), no rank in the environment: whatever the hint
    makes of them (the smallest rank a process initialised), the binary export's probe gives each
    process the JSON export's claimed rank and world size."""
    _cli("synth", str(tmp_path / "json"), *JOB[:6], "--parallel", "tp=2,pp=2")
    names = {f"report_rank{r}.sqlite": f"host_{r}x.sqlite" for r in range(4)}
    _hide_rank(tmp_path / "json", names)
    shutil.copytree(tmp_path / "json", tmp_path / "binary")
    assert all(write_binary(f) for f in (tmp_path / "binary").glob("*.sqlite"))

    def claims(form: str) -> dict:
        return {
            n: [
                (p.claimed_rank, p.rank_source, p.world_size)
                for p in nsys_sqlite.probe(tmp_path / form / n).processes
            ]
            for n in names.values()
        }

    assert claims("binary") == claims("json")
    assert {c[0][1] for c in claims("binary").values()} == {"nccl"}


@pytest.mark.parametrize(
    "args, message",
    [
        (["--steps", "1"], "--nccl-payload binary needs --parallel"),
        (["--parallel", "tp=2", "--ranks", "2", "--schema", "2022.4"], "NVTX_EVENTS.binaryData"),
        (["--scaling", "2,4"], "--scaling cannot be combined with --nccl-payload binary"),
        (["--sweep", "batch=2,4"], "--sweep cannot be combined with --nccl-payload binary"),
    ],
    ids=["no-parallel", "old-schema", "scaling", "sweep"],
)
def test_binary_payload_bad_combinations(tmp_path, args, message):
    """One line, exit 2, and nothing written."""
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["synth", str(out), *args, "--nccl-payload", "binary"])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [result.stderr.strip()] and message in result.stderr
    assert not out.exists() or not any(out.iterdir())


def test_unknown_payload_form_is_refused(tmp_path):
    result = CliRunner().invoke(main, ["synth", str(tmp_path / "o"), "--nccl-payload", "blob"])
    assert result.exit_code == 2 and "'blob' is not one of 'json', 'binary'" in result.stderr
