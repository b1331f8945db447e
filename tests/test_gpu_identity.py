"""GPU identity: guess an architecture only from evidence exclusive to it, else leave the peak unknown.

Issue 16 item 5: the nsys-ai capture `h100_2gpu_1s.sqlite` records no GPU (no TARGET_INFO_GPU;
traces README: "H100 according to the upstream file name") and runs only sm80_xmma GEMMs, which
Hopper runs too. It used to be "assumed NVIDIA A100-SXM4-80GB" (312 TFLOP/s), so MFU came out
989.4 / 312 = 3.2x too high. Expected peaks are read from nsight_analyze/data/gpus.csv with the csv
module (not through nsight_analyze), and they equal the dense datasheet values of
../shared/docs/gpu-peaks.md §2.1: H100 SXM BF16 989.4, A100 312, B200 2250.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import TRACES, copy_workspace, requires_shared, shared_ingest

from nsight_analyze import gpus, mfu
from nsight_analyze.cli import main
from nsight_analyze.errors import UserError
from nsight_analyze.store.workspace import open_workspace

H100_FILE = TRACES / "nsys" / "nsys-ai" / "h100_2gpu_1s.sqlite"
TRACELENS = TRACES / "kineto" / "tracelens"
GPUS_CSV = Path(gpus.__file__).parents[1] / "data" / "gpus.csv"


def csv_bf16(model: str) -> float:
    """Dense BF16 TFLOP/s of one row of data/gpus.csv, read without nsight_analyze."""
    with open(GPUS_CSV, newline="") as fh:
        for row in csv.DictReader(fh):
            if row["model"] == model:
                return float(row["bf16"])
    raise AssertionError(f"{model!r} is not a row of {GPUS_CSV}")


def test_csv_peaks_are_the_datasheet_values() -> None:
    """The expected values below, pinned to gpu-peaks.md §2.1 (dense, no sparsity)."""
    assert csv_bf16("NVIDIA H100 SXM") == 989.4
    assert csv_bf16("NVIDIA A100-SXM4-80GB") == 312
    assert csv_bf16("NVIDIA B200") == 2250


# --- the real H100 capture -----------------------------------------------------------------


@pytest.fixture(scope="module")
def h100_db(tmp_path_factory) -> str:
    if not H100_FILE.exists():
        pytest.skip(f"{H100_FILE} is absent (real traces live beside the project)")
    return str(copy_workspace(shared_ingest([H100_FILE])[1], tmp_path_factory.mktemp("h100") / "ws.duckdb"))


def _gpus_json(db: str, *extra: str) -> list[dict]:
    res = CliRunner().invoke(main, ["gpus", "--db", db, "--format", "json", *extra])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)["ranks"]


@requires_shared
def test_h100_capture_is_not_guessed_as_an_a100(h100_db: str) -> None:
    ranks = _gpus_json(h100_db)
    assert len(ranks) == 2
    for r in ranks:
        assert r["source"] == "unknown" and r["model"] is None
        assert r["peak_tflops"] is None and r["peak_flops"] is None
        assert "A100" not in r["reason"] and "--gpu" in r["reason"]
        assert "ampere" in r["reason"]  # says which names were seen and why they settle nothing
    res = CliRunner().invoke(main, ["gpus", "--db", h100_db])
    assert res.exit_code == 0, res.output
    assert "A100" not in res.output and "unknown" in res.output


@requires_shared
def test_h100_capture_with_gpu_gets_the_h100_dense_peak(h100_db: str) -> None:
    want = csv_bf16("NVIDIA H100 SXM")  # 989.4, data/gpus.csv = gpu-peaks.md §2.1 H100 SXM5 16b
    for name in ("H100 SXM", "NVIDIA H100 80GB HBM3"):
        for r in _gpus_json(h100_db, "--gpu", name):
            assert r["source"] == "given" and r["model"] == "NVIDIA H100 SXM"
            assert r["peak_tflops"] == pytest.approx(want) and "--gpu" in r["reason"]


@requires_shared
def test_h100_capture_mfu_unknown_unless_the_gpu_is_stated(h100_db: str) -> None:
    """Windows of exactly 1 s per rank and 1 step each: MFU = M / (2 GPUs x 1 s x peak)."""
    windows = pd.DataFrame({"rank": [0, 1], "step": [None, None], "start_ns": [0, 0], "end_ns": [10**9] * 2})
    # FLOPs per step of the job: a quarter of the peak per GPU (an A100 peak then reads 0.79,
    # still possible; half the peak would read 1.58 there, which is above any GPU's possible)
    model = csv_bf16("NVIDIA H100 SXM") * 1e12 / 2
    con = open_workspace(h100_db, read_only=True)
    try:
        run = {"model_flops_per_step": model, "window_df": windows, "steps_in_window": 1}
        unknown = mfu.hfu_mfu_summary(con, **run)
        h100 = mfu.hfu_mfu_summary(con, gpu="H100 SXM", **run)
        a100 = mfu.hfu_mfu_summary(con, gpu="A100-SXM4-80GB", **run)
        above = mfu.hfu_mfu_summary(con, gpu="A100-SXM4-80GB", **{**run, "model_flops_per_step": 2 * model})
    finally:
        con.close()
    assert unknown["mfu"] is None and unknown["hfu"] is None
    assert any("MFU and HFU are unknown" in n for n in unknown["notes"])
    assert h100["mfu"] == pytest.approx(0.25, rel=1e-12)
    # the old A100 guess: MFU x 989.4/312 = 3.2 too high
    ratio = csv_bf16("NVIDIA H100 SXM") / csv_bf16("NVIDIA A100-SXM4-80GB")
    assert a100["mfu"] == pytest.approx(0.25 * ratio, rel=1e-12)
    # twice the model on the A100 peak is 1.58: above the hardware's possible, so unknown (issue 52)
    assert 0.5 * ratio > 1 and above["mfu"] is None


@requires_shared
def test_mfu_command_shows_unknown(h100_db: str) -> None:
    args = ["mfu", "--db", h100_db, "--model-flops-per-step", "1e15", "--steps", "1"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    assert "unknown" in res.output and "A100" not in res.output
    res = CliRunner().invoke(main, [*args, "--gpu", "H100 SXM", "--format", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["mfu"] is not None and {p["source"] for p in out["peaks"]} == {"given"}


@requires_shared
@pytest.mark.parametrize("command", ["gpus", "mfu", "report", "diagnose"])
def test_unknown_gpu_name_is_one_error_line(h100_db: str, tmp_path: Path, command: str) -> None:
    args = [command, "--db", h100_db, "--gpu", "RTX 9999 Ultra"]
    if command == "report":
        args += ["-o", str(tmp_path / "r.html")]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 2, res.output
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: unknown GPU 'RTX 9999 Ultra'"), res.output
    assert "--list-models" in lines[0] and "Traceback" not in res.output
    assert not (tmp_path / "r.html").exists()


def test_list_models_needs_no_workspace(tmp_path: Path) -> None:
    args = ["gpus", "--db", str(tmp_path / "none.duckdb"), "--list-models", "--format", "csv"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    assert "NVIDIA H100 SXM" in res.output and "a100-sxm4-80gb" in res.output


# --- exclusive evidence still identifies the architecture -----------------------------------


@pytest.mark.parametrize(
    ("families", "source", "model"),
    [
        (["hopper"], "assumed", "NVIDIA H100 SXM"),
        (["ampere", "nvjet", "hopper"], "assumed", "NVIDIA H100 SXM"),  # sm80 + sm90 -> Hopper
        (["blackwell", "nvjet"], "assumed", "NVIDIA B200"),
        (["nvjet"], "unknown", None),  # Hopper or Blackwell: 989.4 vs 2250
        (["ampere"], "unknown", None),
        (["volta", "turing", "ampere"], "unknown", None),
        (["hopper", "blackwell"], "unknown", None),  # contradictory names: no guess
    ],
)
def test_kernel_names_identify_only_what_one_architecture_runs(families, source, model) -> None:
    peak = gpus.resolve(None, families=families)
    assert (peak.source, peak.model) == (source, model)
    if model is not None:
        assert peak.peak_flops() == pytest.approx(csv_bf16(model) * 1e12)


def _erase_identity(db: Path) -> None:
    """What a trace without device properties looks like: no name, SM count or CC for any rank."""
    con = open_workspace(db)
    con.execute("DELETE FROM gpus")
    con.execute("UPDATE ranks SET gpu_name = NULL")
    con.close()


@requires_shared
@pytest.mark.parametrize(
    ("trace", "model"),
    [
        # sm90_xmma_gemm_* beside cutlass_80_* kernels (TraceLens H100 trace)
        ("h100/gaunernst_bert-small-uncased__1016001.json.gz", "NVIDIA H100 SXM"),
        # *_sm100f bmm and fmhaSm100aKernel beside nvjet_tst_* kernels (TraceLens B200 trace)
        ("b200/eager_trace.json.gz", "NVIDIA B200"),
    ],
)
def test_real_trace_with_exclusive_names_keeps_its_architecture(tmp_path: Path, trace: str, model: str):
    from nsight_analyze.ingest.run import ingest

    db = tmp_path / "ws.duckdb"
    ingest([TRACELENS / trace], db)
    _erase_identity(db)
    con = open_workspace(db, read_only=True)
    try:
        df = gpus.rank_peaks(con)
    finally:
        con.close()
    assert list(df["source"]) == ["assumed"] and list(df["model"]) == [model]
    assert df["peak_tflops"].iloc[0] == pytest.approx(csv_bf16(model))
    assert "run only on" in df["reason"].iloc[0]


def test_gpu_option_beats_a_recorded_name_and_says_so() -> None:
    peak = gpus.resolve("NVIDIA A100-SXM4-80GB", 108, 1.41e9, 8, 0, gpu="H100 SXM")
    assert peak.source == "given" and peak.model == "NVIDIA H100 SXM"
    assert "the trace names 'NVIDIA A100-SXM4-80GB'" in peak.reason
    same = gpus.resolve("NVIDIA H100 80GB HBM3", gpu="H100 SXM")
    assert "the trace names" not in same.reason
    over = gpus.resolve(None, gpu="H100 SXM", peak_tflops=500)
    assert over.source == "override" and over.peak_flops() == 500e12


def test_stated_gpu_reaches_code_that_does_not_take_it(tmp_path: Path) -> None:
    """diagnose's rules call hfu_mfu_summary(con) themselves; `stated_gpu` is how --gpu reaches them."""
    con = open_workspace(tmp_path / "ws.duckdb")
    con.execute("INSERT INTO ranks (rank, file_id, device_id) VALUES (0, 1, 0)")
    try:
        assert list(gpus.rank_peaks(con)["source"]) == ["unknown"]
        with gpus.stated_gpu("H100 SXM"):
            assert list(gpus.rank_peaks(con)["source"]) == ["given"]
        assert list(gpus.rank_peaks(con)["source"]) == ["unknown"]
        with pytest.raises(UserError, match="--list-models"), gpus.stated_gpu("no such gpu"):
            pass
    finally:
        con.close()
