"""A batch-size sweep against its ground truth (issue 55): `runs --by batch` and the best run.

Oracle: the generator's sweep (synth/sweep.py, `synth OUT --sweep batch=...`): each run's step
time, samples/s and partition shares computed from its own exact partition of every rank and step
(ground_truth.json `partition`, synth/truth.py, independent of the SQL) into sweep_truth.json,
and the labels it writes in each run's run.json. Exact up to float rounding: the generator adds
no jitter the partition does not record.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from pathlib import Path

import duckdb
import numpy as np
import pytest
from test_runs import SMALL, cli, runs_json

from nsight_analyze import analysis
from nsight_analyze.synth import job as synth_job
from nsight_analyze.synth import memory as synth_memory
from nsight_analyze.synth.injections import parse
from nsight_analyze.synth.workload import Config

BATCHES = (8, 32, 128)  # work_scale 1/4, 1, 4 of the job as built (REF_BATCH 32)
RANKS = 2
SHARES = ("compute", "memory", "memory_kernels", "copies", "other", "exposed_comms", "idle")


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> tuple[Path, dict]:
    """A sweep of batch 8, 32, 128 per GPU on 2 GPUs, ingested together: (workspace, sweep_truth.json)."""
    root = tmp_path_factory.mktemp("sweep")
    spec = "batch=" + ",".join(map(str, BATCHES))
    code, out = cli("synth", root / "sw", "--sweep", spec, "--ranks", RANKS, *SMALL)
    assert code == 0, out
    truth = json.loads((root / "sw" / "sweep_truth.json").read_text())
    assert f"best {truth['best']['run']}" in out and "sweep_truth.json" in out  # the summary line
    code, out = cli("ingest", root / "sw", "--db", root / "sw.duckdb", "-q")
    assert code == 0, out
    con = duckdb.connect(str(root / "sw.duckdb"), read_only=True)
    try:  # several runs: the ingest's first answers hold what `runs` reads (issue 55: runs after ingest)
        assert analysis.targets(analysis.MANY_RUNS_ANSWERS) <= analysis.computed(con)
    finally:
        con.close()
    return root / "sw.duckdb", truth


def test_one_row_per_run_matches_the_truth(sweep):
    """Per run: the labels run.json holds, the steps every rank has, the median and mean job step,
    steps/s, samples/s (global_batch / median step), the step parts and the partition shares of
    the step windows, all as sweep_truth.json states them."""
    db, truth = sweep
    doc = runs_json(db, "--by", "batch")
    assert doc["by"] == "batch"
    assert [r["name"] for r in doc["runs"]] == [f"b{b}" for b in BATCHES]  # sorted as numbers
    for ours, t in zip(doc["runs"], truth["runs"], strict=True):
        assert ours["name"] == t["name"]
        assert ours["user_labels"] == {
            "name": t["name"],
            "sweep": "batch",
            "series": "sw",
            "model": truth["model"],
            "batch": str(t["batch"]),
            "world_size": str(RANKS),
            "global_batch": str(t["batch"] * RANKS),  # global_batch = batch x world_size
        }
        assert ours["ranks"] == RANKS and ours["labels"]["world_size"] == str(RANKS)  # the trace agrees
        assert ours["steps"] == t["steps"]
        assert ours["step_median_ns"] == pytest.approx(t["step_median_ns"], rel=1e-9)
        assert ours["step_mean_ns"] == pytest.approx(t["step_mean_ns"], rel=1e-9)
        assert ours["steps_per_s"] == pytest.approx(t["steps_per_s"], rel=1e-9)
        assert ours["samples_per_s"] == pytest.approx(t["samples_per_s"], rel=1e-9)
        for part, ns in t["step_parts_ns"].items():
            assert ours[f"{part}_step_ns"] == pytest.approx(ns, rel=1e-9, abs=1e-3), (t["name"], part)
        for share in SHARES:
            assert ours[f"{share}_share"] == pytest.approx(t["shares"][share], rel=1e-9, abs=1e-12), (
                t["name"],
                share,
            )


def test_best_run_is_the_highest_throughput(sweep):
    """`--over time --metric samples_per_s` marks the truth's best run (the highest samples/s);
    by the default metric (lowest median step) the smallest batch would be "best", which is why
    a sweep is read by throughput."""
    db, truth = sweep
    doc = runs_json(db, "--where", "sweep=batch", "--over", "time", "--metric", "samples_per_s")
    assert [r["name"] for r in doc["runs"] if r["best"]] == [truth["best"]["run"]]
    fastest = min(truth["runs"], key=lambda t: t["step_median_ns"])["name"]
    assert [r["name"] for r in runs_json(db, "--over", "time")["runs"] if r["best"]] == [fastest]
    code, out = cli("runs", "--db", db, "--over", "time", "--metric", "samples_per_s")
    assert code == 0 and "best" in out


def test_a_sweep_marks_its_best_run_by_throughput(sweep):
    """`runs --by batch` marks one best run: by samples/s when every run has it (the batch labels
    give it), which is the truth's best (the highest samples/s); `--metric` chooses another."""
    db, truth = sweep
    doc = runs_json(db, "--by", "batch")
    assert [r["name"] for r in doc["runs"] if r["best"]] == [truth["best"]["run"]]
    fastest = min(truth["runs"], key=lambda t: t["step_median_ns"])["name"]
    doc = runs_json(db, "--by", "batch", "--metric", "step_median_ns")
    assert [r["name"] for r in doc["runs"] if r["best"]] == [fastest]
    code, out = cli("runs", "--db", db, "--by", "batch")
    assert code == 0 and "best: samples_per_s" in out
    code, out = cli("runs", "--db", db, "--metric", "mfu")
    assert code == 2 and "--metric goes with --over time or --by KEY" in out


def test_the_truth_follows_the_sweep_model(sweep):
    """The truth itself (synth/sweep.py's model): per rank and step, compute, memory-bound kernel
    and copy time grow as the batch (work_scale = batch / 32, the same random draws in every run:
    1 ns of rounding per operation at most, hence rel 1e-4), the all-reduce bytes per step are the
    same; throughput rises and its gains shrink (it saturates), so the largest batch is best."""
    _, truth = sweep
    runs = truth["runs"]
    first = runs[0]
    for t in runs:
        ratio = t["batch"] / first["batch"]
        assert t["work_scale"] == t["batch"] / 32
        for col in ("compute_ns", "memory_kernels_ns", "copies_ns"):
            assert t["per_rank_step_ns"][col] == pytest.approx(
                ratio * first["per_rank_step_ns"][col], rel=1e-4
            )
        assert t["allreduce_bytes_per_step"] == first["allreduce_bytes_per_step"] > 0
    rates = [t["samples_per_s"] for t in runs]
    gains = [t["samples_per_s_gain"] for t in runs[1:]]
    assert rates == sorted(rates) and gains == sorted(gains, reverse=True) and gains[-1] > 0
    exposed = [t["shares"]["exposed_comms"] for t in runs]
    assert exposed == sorted(exposed, reverse=True)  # larger batches amortise the all-reduce
    assert truth["best"] == {"metric": "samples_per_s", "run": runs[-1]["name"]}


def test_a_sweep_is_not_a_scaling_series(sweep, tmp_path):
    """No `scaling` label: no series, no efficiency, in JSON or text. Labelled so (`--label
    scaling=weak`), two of its runs are one: weak efficiency T_base / T of the truth's mean steps."""
    db, truth = sweep
    doc = runs_json(db, "--by", "batch")
    assert doc["scaling"] is None
    assert not [k for r in doc["runs"] for k in r if "efficiency" in k]
    code, text = cli("runs", "--db", db, "--by", "batch")
    assert code == 0 and "scaling" not in text and "efficiency" not in text
    src = Path(db).parent / "sw"
    for name in ("b8", "b32"):
        shutil.copytree(src / name, tmp_path / "lab" / name)
    code, out = cli(
        "ingest", tmp_path / "lab", "--db", tmp_path / "l.duckdb", "-q", "--label", "scaling=weak"
    )
    assert code == 0, out
    series = runs_json(tmp_path / "l.duckdb", "--baseline", "b8")["scaling"]
    assert series["mode"] == "weak"
    mean = {t["name"]: t["step_mean_ns"] for t in truth["runs"]}
    by_name = {e["name"]: e for e in series["runs"]}
    assert by_name["b32"]["efficiency"] == pytest.approx(mean["b8"] / mean["b32"], rel=1e-9)


@pytest.mark.parametrize(
    "args, says",
    [
        (["--sweep", "batch=8,x"], "whole numbers"),
        (["--sweep", "batch=8"], "at least two increasing"),
        (["--sweep", "batch=16,8"], "at least two increasing"),
        (["--sweep", "batch=0,8"], "at least two increasing"),
        (["--sweep", "size=8,16"], "give batch=B1,B2"),
        (["--sweep", "batch=8,16", "--scaling", "2,4"], "cannot be combined with --scaling"),
        (["--sweep", "batch=8,16", "--weak"], "cannot be combined with --weak"),
        (["--sweep", "batch=8,16", "--parallel", "tp=2,pp=1,dp=1"], "cannot be combined with --parallel"),
        (["--sweep", "batch=8,16", "--no-truth"], "cannot be combined with --no-truth"),
    ],
)
def test_bad_sweep_is_one_line(tmp_path, args, says):
    """Bad --sweep values and options a sweep cannot take: one line, exit 2, nothing written."""
    code, out = cli("synth", tmp_path / "x", *args)
    assert code == 2 and says in out, out
    assert len(out.strip().splitlines()) == 1 and out.startswith("error:"), out
    assert not (tmp_path / "x").exists()


@pytest.fixture(scope="module")
def memory_sweep(tmp_path_factory) -> tuple[Path, Path, dict]:
    """The same sweep with `--inject memory-usage` (device-memory events on every rank of every
    run), ingested together: (its folder, workspace, sweep_truth.json)."""
    root = tmp_path_factory.mktemp("memsweep")
    spec = "batch=" + ",".join(map(str, BATCHES))
    code, out = cli(
        "synth", root / "sw", "--sweep", spec, "--ranks", RANKS, "--inject", "memory-usage", *SMALL
    )
    assert code == 0, out
    code, out = cli("ingest", root / "sw", "--db", root / "sw.duckdb", "-q")
    assert code == 0, out
    return root / "sw", root / "sw.duckdb", json.loads((root / "sw" / "sweep_truth.json").read_text())


def test_memory_peak_per_run_matches_the_truth(memory_sweep):
    """Per run, `runs`' device-memory peak is the largest of its ranks' peaks as synth/memory.py's
    own replay of the rows states them (sweep_truth.json `memory_peak`, exact bytes), on the rank
    whose truth peak is the largest; the activations grow with the batch, so the peak does, and
    stays above the model state (rank r: 6144 + 16 r MiB Device + 32 MiB Device Static,
    synth/memory.py), which does not scale."""
    _, db, truth = memory_sweep
    doc = runs_json(db, "--by", "batch")
    assert [r["name"] for r in doc["runs"]] == [t["name"] for t in truth["runs"]]
    con = duckdb.connect(str(db), read_only=True)
    try:
        job_rank = dict(con.execute("SELECT rank, job_rank FROM ranks").fetchall())
    finally:
        con.close()
    peaks = []
    for ours, t in zip(doc["runs"], truth["runs"], strict=True):
        want = t["memory_peak"]
        assert set(want["per_rank_bytes"]) == {str(r) for r in range(RANKS)}
        assert want["max_bytes"] == max(want["per_rank_bytes"].values())
        assert ours["memory_peak_bytes"] == want["max_bytes"], t["name"]
        assert ours["memory_peak_gib"] == want["max_bytes"] / 2**30
        assert ours["memory_peak_unknown"] is None
        top = max(want["per_rank_bytes"].items(), key=lambda kv: (kv[1], -int(kv[0])))[0]
        assert job_rank[ours["memory_peak_rank"]] == int(top)
        model_state = (6144 + 16 * int(top) + 32) * 2**20
        assert want["max_bytes"] > model_state
        peaks.append(want["max_bytes"])
    assert peaks == sorted(peaks) and len(set(peaks)) == len(peaks)  # grows with the batch
    assert not doc["notes"]  # every rank of every run has the events


def test_memory_peak_unknown_without_the_events(sweep):
    """A sweep generated without memory-usage holds no device-memory events: the peak is unknown
    (null, with the reason), never 0."""
    db, truth = sweep
    assert all(t["memory_peak"] is None for t in truth["runs"])
    for r in runs_json(db, "--by", "batch")["runs"]:
        assert r["memory_peak_bytes"] is None and r["memory_peak_gib"] is None
        assert r["memory_peak_rank"] is None
        assert "no device-memory events" in r["memory_peak_unknown"]


def test_the_input_copy_scales_with_the_batch(memory_sweep):
    """The input batch's HtoD copy (2 MiB at REF_BATCH 32: synth/programs.py) carries batch / 32
    of those bytes in every run, and its duration scales by the same factor (the same random draws
    in every run, 1 ns of rounding), so its apparent bandwidth is the same in every run."""
    folder, _, truth = memory_sweep
    bandwidth = {}
    for t in truth["runs"]:
        con = sqlite3.connect(folder / t["name"] / "report_rank0.sqlite")
        try:
            rows = con.execute(
                'SELECT bytes, "end" - start FROM CUPTI_ACTIVITY_KIND_MEMCPY'
                " WHERE copyKind = 1 ORDER BY start"
            ).fetchall()
        finally:
            con.close()
        assert rows and {b for b, _ in rows} == {2 * 2**20 * t["batch"] // 32}, t["name"]
        bandwidth[t["name"]] = np.array([b / d for b, d in rows])
    first, *others = bandwidth.values()
    for other in others:
        assert other == pytest.approx(first, rel=1e-3)


def _memory_job(work_scale: float) -> synth_job.Job:
    cfg = Config(
        ranks=2, steps=3, kernels_per_step=60, injections=parse(["memory-usage"]), work_scale=work_scale
    )
    return synth_job.build(cfg)


def test_work_scale_one_leaves_the_memory_events_as_they_were():
    """work_scale 1 (every job but a sweep's or a strong series' runs) writes the same device-memory
    rows as before the activations scaled. Oracle: the sha256 of synth/memory.py events() of this
    job (every rank's start, bytes, memKind, op, address as int64, in that order) computed with
    the generator before the change (synth/memory.py, workload.py and job.py as of commit
    08c8e06, before issue 55 scaled the activations and the input copy)."""
    job = _memory_job(1.0)
    digest = hashlib.sha256()
    for ev in job.ranks:
        e = synth_memory.events(job, ev)
        for key in ("start", "bytes", "memKind", "op", "address"):
            digest.update(np.ascontiguousarray(e[key], np.int64).tobytes())
    assert digest.hexdigest() == "f41d59dfc404475a734e9fb50c91327940f2d3a41d4489170cb690d46786152c"


def test_activation_blocks_scale_and_model_state_does_not():
    """At work_scale 1/4 (batch 8 of a sweep; 8 -> 32 GPUs of a strong series) every activation
    block is exactly a quarter of its size at 1 (whole MiB multiples, synth/memory.py), the same
    number of them; the model state, optimizer state and pinned staging buffer rows (the first
    three allocations) are unchanged."""
    full, quarter = _memory_job(1.0), _memory_job(0.25)
    for a, b in zip(full.ranks, quarter.ranks, strict=True):
        ea, eb = synth_memory.events(full, a), synth_memory.events(quarter, b)
        static_a = np.isin(ea["address"], 0x7F0000000000 + np.arange(3) * (1 << 32))
        static_b = np.isin(eb["address"], 0x7F0000000000 + np.arange(3) * (1 << 32))
        assert sorted(ea["bytes"][static_a]) == sorted(eb["bytes"][static_b])
        acts_a = ea["bytes"][~static_a][np.argsort(ea["address"][~static_a], kind="stable")]
        acts_b = eb["bytes"][~static_b][np.argsort(eb["address"][~static_b], kind="stable")]
        assert len(acts_a) == len(acts_b) > 0
        assert (acts_b * 4 == acts_a).all()
