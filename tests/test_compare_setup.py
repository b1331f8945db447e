"""compare across hardware, world sizes and ranks: the setup at the top of the verdict, rank pairs
(`--ranks`, and one rank each compared by default), and collectives judged by their time per step.

The real pair is HTA's trace_diff (kineto/hta/trace_diff/control: A100, rank 3 of 8; test: V100,
rank 1 of 2). Expected values come from the traces themselves (deviceProperties and
distributedInfo, read here from the JSON.gz independently of nsight-analyze) and from HTA 0.5's
per-kernel sums (oracles/hta-0.5/hta__trace_diff__*/derived_per_kernel_name.csv). Both traces
are ingested once per module; the error cases run without findings.
"""

from __future__ import annotations

import csv
import functools
import gzip
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import TRACES, copy_workspace, shared_ingest

from nsight_analyze.cli import main
from nsight_analyze.compare.setup import parse_rank_map, setup_changes
from nsight_analyze.errors import UserError

DIFF = TRACES / "kineto" / "hta" / "trace_diff"
HTA = TRACES / "oracles" / "hta-0.5"
SIDES = {"before": "control", "after": "test"}


@functools.cache
def trace_meta(name: str) -> dict:
    """The trace's own top-level metadata (everything but the events), read with json alone."""
    with gzip.open(DIFF / name / f"{name}.json.gz", "rt") as fh:
        doc = json.load(fh)
    doc.pop("traceEvents")
    return doc


def hta_sum_us(name: str, prefix: str) -> int:
    """HTA 0.5's summed duration (µs) of the kernels whose name starts with `prefix`, all events."""
    path = HTA / f"hta__trace_diff__{name}" / "derived_per_kernel_name.csv"
    with open(path, newline="") as fh:
        return sum(
            int(r["sum_us"])
            for r in csv.DictReader(fh)
            if r["view"] == "all_events" and r["name"].startswith(prefix)
        )


@pytest.fixture(scope="module")
def workspaces(tmp_path_factory) -> dict[str, Path]:
    if not all((DIFF / n / f"{n}.json.gz").is_file() for n in SIDES.values()):
        pytest.skip("../shared/traces/kineto/hta/trace_diff is absent (real traces live beside the project)")

    tmp = tmp_path_factory.mktemp("compare_setup")
    out = {}
    for side, name in SIDES.items():
        out[side] = copy_workspace(
            shared_ingest([DIFF / name / f"{name}.json.gz"])[1], tmp / f"{name}.duckdb"
        )
    return out


def run(*args: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `nsight-analyze compare ARGS`."""
    res = CliRunner().invoke(main, ["compare", *map(str, args)])
    return res.exit_code, res.stdout, res.stderr


@pytest.fixture(scope="module")
def default_json(workspaces) -> dict:
    code, out, err = run(workspaces["before"], workspaces["after"], "--format", "json")
    assert code == 0, err
    return json.loads(out)


def test_single_ranks_compared_by_default_with_a_note(workspaces, default_json):
    meta = {side: trace_meta(name) for side, name in SIDES.items()}
    rb, ra = (meta[s]["distributedInfo"]["rank"] for s in ("before", "after"))  # 3 and 1
    assert rb != ra  # by number the runs have no rank in common
    r = default_json
    assert r["ranks"]["common"] == [rb]
    assert r["ranks"]["pairs"] == [{"before": rb, "after": ra}]
    assert any(
        f"before rank {rb}, after rank {ra}" in n and "compared with each other" in n for n in r["notes"]
    )


def test_setup_differences_head_the_verdict(default_json):
    """GPU and world size as the traces record them: deviceProperties (one model per trace) and
    distributedInfo.world_size, read from the JSON.gz."""
    meta = {side: trace_meta(name) for side, name in SIDES.items()}
    gpu = {s: {p["name"] for p in meta[s]["deviceProperties"]} for s in meta}
    assert all(len(g) == 1 for g in gpu.values())  # every listed GPU alike in each trace
    changed = {c["item"]: c for c in default_json["setup"]["changed"]}
    assert changed["gpu"]["before"] == next(iter(gpu["before"]))  # NVIDIA A100-PG509-200
    assert changed["gpu"]["after"] == next(iter(gpu["after"]))  # Tesla V100-SXM2-16GB
    assert changed["world_size"]["before"] == meta["before"]["distributedInfo"]["world_size"] == 8
    assert changed["world_size"]["after"] == meta["after"]["distributedInfo"]["world_size"] == 2
    v = default_json["verdict"]
    head = f"setup changed: GPU {changed['gpu']['before']} -> {changed['gpu']['after']}, world size 8 -> 2"
    assert v["reason"].startswith(head) and v["setup_changed"].startswith(head)
    assert "not a regression of the code" in v["setup_changed"]


def test_setup_line_is_first_in_every_format(workspaces, tmp_path):
    html = tmp_path / "diff.html"
    for fmt in ("table", "markdown"):
        code, out, err = run(
            workspaces["before"], workspaces["after"], "--format", fmt, "--no-findings", "--html", html
        )
        assert code == 0, err
        first = next(line for line in out.splitlines() if line.strip() and not line.startswith("#"))
        assert first.startswith("setup changed: GPU"), first
    page = html.read_text()
    assert page.index("setup changed: GPU") < page.index("<h2>")  # in the verdict paragraph


def test_allreduce_status_follows_its_time_per_step(default_json):
    """AllReduce: HTA's summed kernel time per ProfilerStep (6 steps in each trace) grows by
    +9.87 ms, so it may not be `unchanged` (the issue) nor `faster`; every collective's status
    agrees in sign with its change of time per step."""
    steps = 6  # ProfilerStep#1009..#1014 in both traces (README; HTA trace_info.csv)
    per_step = {s: hta_sum_us(n, "ncclKernel_AllReduce") * 1000 / steps for s, n in SIDES.items()}
    rows = {c["op"]: c for c in default_json["collectives"]["rows"]}
    ar = rows["AllReduce"]
    assert ar["delta_per_step_ns"] == pytest.approx(per_step["after"] - per_step["before"], abs=1)
    assert ar["delta_per_step_ns"] == pytest.approx(9.87e6, abs=0.01e6)
    assert ar["status"] == "slower" and ar["status_basis"] == "time_per_step"
    assert ar["duration_delta_pct"] < 0  # its median instance got shorter: not what decides
    for c in rows.values():
        if c["status"] in ("faster", "slower"):
            assert (c["status"] == "slower") == (c["step_delta_pct"] > 0 and c["delta_per_step_ns"] > 0)


def test_ranks_option_pairs_ranks(workspaces):
    code, out, err = run(
        workspaces["before"], workspaces["after"], "--ranks", "3=1", "--no-findings", "--format", "json"
    )
    assert code == 0, err
    r = json.loads(out)
    assert r["ranks"]["pairs"] == [{"before": 3, "after": 1}]
    assert any("ranks paired by --ranks (before=after): 3=1" in n for n in r["notes"])
    assert [p["rank"] for p in r["step_time"]["per_rank"]] == [3]


@pytest.mark.parametrize(
    "pairs, says",
    [
        ("9=1", "before has no rank 9"),
        ("3=7", "after has no rank 7"),
        ("3:1", "give BEFORE=AFTER rank pairs"),
        ("3=1,3=1", "paired more than once"),
    ],
)
def test_ranks_option_bad_input_is_one_line_exit_2(workspaces, pairs, says):
    code, out, err = run(workspaces["before"], workspaces["after"], "--ranks", pairs, "--no-findings")
    assert code == 2 and not out
    assert len(err.strip().splitlines()) == 1 and says in err and err.startswith("error: "), err


def test_same_setup_adds_nothing(workspaces):
    """A run against itself: same setup, ranks by number, so no setup block, pairs or note."""
    from nsight_analyze.compare import compare

    r = compare(workspaces["before"], workspaces["before"], findings=False)
    assert "setup" not in r and "setup_changed" not in r["verdict"] and "pairs" not in r["ranks"]
    assert not r["verdict"]["reason"].startswith("setup changed")


def test_parse_rank_map():
    # hand-written inputs; the expected mappings are what the option's text says
    assert parse_rank_map("3=1") == {3: 1}
    assert parse_rank_map(" 0 = 4 , 1=5 ") == {0: 4, 1: 5}
    assert parse_rank_map(None) is None
    for bad in ("", "3", "3=", "a=1", "3=1,,4=2", "3=-1", "3=1,4=1"):
        with pytest.raises(UserError):
            parse_rank_map(bad)


def test_unknown_is_no_difference():
    # a value recorded on one side only is not claimed as a change (never guessed)
    b = {"gpu": "A", "world_size": 8, "nccl_version": None, "tracer": None, "gemm_precision": "bf16"}
    a = {"gpu": "A", "world_size": None, "nccl_version": "2.21", "tracer": None, "gemm_precision": "fp8"}
    assert [c["item"] for c in setup_changes(b, a)] == ["gemm_precision"]


def test_crossed_pairs_compare_the_named_ranks(tmp_path):
    """--ranks 0=1,1=0 on a synthetic pair: BEFORE's rank r is compared with AFTER's other rank.
    Oracle: the generator's ground-truth step windows (after: rank 1 made 30 % slower)."""
    import numpy as np

    from nsight_analyze.compare import compare
    from nsight_analyze.ingest.run import ingest
    from nsight_analyze.synth import generate

    truth = {}
    for name, inj in (("before", ()), ("after", ("straggler=1:+30",))):
        truth[name] = generate(tmp_path / name, ranks=2, gpus_per_node=2, steps=6, seed=1, injections=inj)
        ingest([tmp_path / name], tmp_path / f"{name}.duckdb")

    def median(side: str, rank: int) -> float:
        w = [p["window_ns"] for p in truth[side]["partition"] if p["rank"] == rank and p["step"] is not None]
        return float(np.median(w))

    r = compare(tmp_path / "before.duckdb", tmp_path / "after.duckdb", findings=False, ranks="0=1,1=0")
    assert r["ranks"]["pairs"] == [{"before": 0, "after": 1}, {"before": 1, "after": 0}]
    per = {p["rank"]: p for p in r["step_time"]["per_rank"]}
    for b, a in ((0, 1), (1, 0)):
        assert per[b]["before"]["median_ns"] == pytest.approx(median("before", b))
        assert per[b]["after"]["median_ns"] == pytest.approx(median("after", a))
    assert "setup" not in r  # same GPU, same world size: no setup difference
    # one pair of two: AFTER's straggler (rank 1) is left unpaired, and named nowhere
    r = compare(tmp_path / "before.duckdb", tmp_path / "after.duckdb", findings=False, ranks={1: 0})
    assert r["ranks"] == {
        "common": [1],
        "only_before": [0],
        "only_after": [1],
        "pairs": [{"before": 1, "after": 0}],
    }
    (only,) = r["step_time"]["per_rank"]
    assert only["rank"] == 1 and only["after"]["median_ns"] == pytest.approx(median("after", 0))
    assert r["imbalance"]["after"]["straggler_ranks"] == []
