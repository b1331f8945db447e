"""GPU identity without a name, and ranks only from recognised file-name patterns (issue 52, point 11).

1. ROCm's PyTorch profiler recorded TraceLens's vLLM MI300X traces with `deviceProperties.name` = ""
   (traces README, edge-case index: "GPU model only from CU count / CC"). The peak stayed unknown
   although only an MI300X has 304 CUs, CC 9.4 (gfx942) and 192 GiB. Now it is `identified`; models
   that the same properties fit with different peaks stay unknown with the reason.
2. A version number in a file name (`trace_ROCm6_2_x`) became rank 2, with a note that ranks 0-1 were
   missing. Ranks now come from a file name only by a recognised pattern (rank3, _r3_, worker3, ...).

Oracles: AMD's published hardware, stated here so the tests stand without the package:
ROCm's "AMD GPU specifications" table (rocm.docs.amd.com reference/gpu-specs: name, LLVM target,
VRAM GiB, compute units, GFXIP major.minor) and the AMD datasheets it matches (MI300X: 304 CUs,
192 GB HBM3; MI210: 104 CUs, 64 GB; MI250: 2 x 104 CUs, 128 GB). Expected peaks are read from
nsight_analyze/data/gpus.csv with the csv module (MI300X BF16 1307.4 = gpu-peaks.md §2.1).
"""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import TRACES, requires_shared
from test_kineto import kernel_event, write_trace

from nsight_analyze import gpus
from nsight_analyze.cli import main
from nsight_analyze.ingest.discovery import _file_number
from nsight_analyze.ingest.run import ingest
from nsight_analyze.store.workspace import open_workspace

VLLM = TRACES / "kineto" / "tracelens" / "inference" / "vllm_decode_full" / "graph_execution.json.gz"
GPUS_CSV = Path(gpus.__file__).parents[1] / "data" / "gpus.csv"
GIB = 2**30

# ROCm GPU specifications table: (compute units, GFXIP major, minor, VRAM GiB) per device ROCm shows
# (an MI250 / MI250X shows each of its two GCDs as a device: half the CUs and VRAM).
ROCM_SPECS = {
    "MI300X": (304, 9, 4, 192),
    "MI325X": (304, 9, 4, 256),
    "MI355X": (256, 9, 5, 288),
    "MI350X": (256, 9, 5, 288),
    "MI250X GCD": (110, 9, 0, 64),
    "MI250 GCD": (104, 9, 0, 64),
    "MI210": (104, 9, 0, 64),
}


def csv_row(model: str) -> dict[str, str]:
    """One row of data/gpus.csv, read without nsight_analyze."""
    with open(GPUS_CSV, newline="") as fh:
        for row in csv.DictReader(fh):
            if row["model"] == model:
                return row
    raise AssertionError(f"{model!r} is not a row of {GPUS_CSV}")


def reported(spec: str, ratio: float = 0.9999) -> dict:
    """What a device reports: ROCm's CUs and CC, and memory a hair under the nominal GiB (the shared
    MI300X trace records 206141652992 bytes = 0.99991 x 192 GiB)."""
    cus, major, minor, vram = ROCM_SPECS[spec]
    return {
        "sm_count": cus,
        "compute_major": major,
        "compute_minor": minor,
        "memory_bytes": int(vram * GIB * ratio),
    }


# --- the real MI300X trace ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def vllm_db(tmp_path_factory) -> str:
    if not VLLM.exists():
        pytest.skip(f"{VLLM} is absent (real traces live beside the project)")
    db = tmp_path_factory.mktemp("vllm") / "ws.duckdb"
    ingest([VLLM], db)
    return str(db)


@requires_shared
def test_vllm_mi300x_trace_is_identified_from_its_properties(vllm_db: str) -> None:
    # the trace itself, read with json: an empty name, and AMD's published MI300X hardware
    with gzip.open(VLLM, "rt") as fh:
        doc = json.load(fh)
    props = {p["id"]: p for p in doc["deviceProperties"]}
    kernel_devices = {e["args"]["device"] for e in doc["traceEvents"] if e.get("cat") == "kernel"}
    assert len(kernel_devices) == 1
    dev = props[kernel_devices.pop()]
    cus, major, minor, vram = ROCM_SPECS["MI300X"]
    assert dev["name"] == ""
    assert (dev["numSms"], dev["computeMajor"], dev["computeMinor"]) == (cus, major, minor)
    assert round(dev["totalGlobalMem"] / GIB) == vram
    assert "roctracer_version" in doc  # the file says it was traced on ROCm
    res = CliRunner().invoke(main, ["gpus", "--db", vllm_db, "--format", "json"])
    assert res.exit_code == 0, res.output
    (rank,) = json.loads(res.stdout)["ranks"]
    assert rank["source"] == "identified" and rank["model"] == "AMD Instinct MI300X"
    assert rank["peak_tflops"] == pytest.approx(float(csv_row("AMD Instinct MI300X")["bf16"]))
    assert rank["peak_tflops"] == pytest.approx(1307.4)  # gpu-peaks.md §2.1, dense
    assert "identified from 304 CUs, CC 9.4, 192 GiB" in rank["reason"]
    table = CliRunner().invoke(main, ["gpus", "--db", vllm_db])
    assert table.exit_code == 0 and "identified" in table.output and "MI300X" in table.output


def test_hfu_advice_on_an_amd_trace_is_no_nsight_compute_command(vllm_db: str) -> None:
    """ROCm traced it (roctracer_version, read above): ncu cannot profile an MI300X, so the HFU
    note says why HFU is unavailable instead of offering the ncu command (issue 52: no fix the
    hardware cannot take); an NVIDIA trace keeps the command (test_mfu.py)."""
    res = CliRunner().invoke(
        main, ["mfu", "--db", vllm_db, "--model-flops-per-step", "3e9", "--format", "json"]
    )
    assert res.exit_code == 0, res.output
    notes = " ".join(json.loads(res.stdout)["notes"])
    assert "HFU unavailable" in notes and "AMD GPU" in notes and "ncu --metrics" not in notes


# --- identification rules ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "vendor", "model"),
    [
        ("MI300X", "amd", "AMD Instinct MI300X"),
        ("MI300X", None, "AMD Instinct MI300X"),  # CC 9.4 is no NVIDIA GPU's: vendor not needed
        ("MI325X", "amd", "AMD Instinct MI325X"),  # same CUs and CC as MI300X, told apart by memory
        ("MI250X GCD", "amd", "AMD Instinct MI250X (per GCD)"),
    ],
)
def test_properties_that_fit_one_model_identify_it(spec: str, vendor: str | None, model: str) -> None:
    peak = gpus.resolve(name="", vendor=vendor, **reported(spec))
    assert (peak.source, peak.model) == ("identified", model)
    assert peak.peak_flops() == pytest.approx(float(csv_row(model)["bf16"]) * 1e12)


def test_mi210_and_mi250_gcd_are_one_answer_because_their_peaks_agree() -> None:
    """Both are 104 CUs of CDNA2 at 1700 MHz with 64 GiB (ROCm table): AMD's datasheets give the MI210
    181.0 TFLOPS FP16/BF16 and the MI250 362.1 for two GCDs, so either answer is the same peak."""
    peak = gpus.resolve(name="", vendor="amd", **reported("MI250 GCD"))
    assert peak.source == "identified"
    assert "MI250" in peak.model and "MI210" in peak.model
    assert peak.peak_flops() == pytest.approx(181.0e12, rel=0.01)
    assert peak.peak_flops() == pytest.approx(362.1e12 / 2, rel=0.01)


@pytest.mark.parametrize(
    ("props", "vendor", "why"),
    [
        # MI355X and MI350X: same silicon, 2400 vs 2200 MHz (ROCm table: both 256 CUs, 9.5, 288 GiB)
        (reported("MI355X"), "amd", "AMD Instinct MI355X and AMD Instinct MI350X, whose peaks differ"),
        # without the memory an MI300X and an MI325X (5.3 vs 6 TB/s) are alike
        ({**reported("MI300X"), "memory_bytes": None}, "amd", "MI300X and AMD Instinct MI325X, whose peaks"),
        # an H100 SXM and an H800 (FP64 33.5 vs 1 TFLOPS) share 132 SMs, CC 9.0 and 80 GB
        (
            {"sm_count": 132, "compute_major": 9, "compute_minor": 0, "memory_bytes": 85018279936},
            "nvidia",
            "NVIDIA H100 SXM and NVIDIA H800, whose peaks differ",
        ),
        # a CDNA2 GCD's properties on a CUDA trace fit no NVIDIA model
        (reported("MI250 GCD"), "nvidia", "no peak-table model has 104 SMs, CC 9.0, 64 GiB"),
        # an MI300X partition (CPX mode: one XCD, 38 CUs) is no table model
        (
            {"sm_count": 38, "compute_major": 9, "compute_minor": 4, "memory_bytes": 24 * GIB},
            "amd",
            "no peak",
        ),
    ],
)
def test_ambiguous_or_unknown_hardware_stays_unknown(props: dict, vendor: str, why: str) -> None:
    peak = gpus.resolve(name="", vendor=vendor, **props)
    assert peak.source == "unknown" and peak.model is None and peak.peak_flops() is None
    assert why in peak.reason and "--gpu" in peak.reason


def test_amd_gpu_is_never_derived_with_nvidia_rates() -> None:
    """ROCm reports gfx90a as CC 9.0, Hopper's: with a clock, NVIDIA's Hopper rates gave an MI250X GCD
    110 x 1.7 GHz x 4096 FLOP/clk/SM x 1830/1980 (tensor clock) = 708 TFLOPS; AMD's datasheet gives
    383 for two GCDs."""
    props = reported("MI250X GCD")
    hopper = gpus.resolve(name="", clock_hz=1.7e9, **props)
    assert hopper.source == "derived"  # what a file that does not say its vendor still gets
    assert hopper.peak_flops() == pytest.approx(110 * 1.7e9 * 4096 * 1830 / 1980)
    peak = gpus.resolve(name="", clock_hz=1.7e9, vendor="amd", **props)
    assert (peak.source, peak.model) == ("identified", "AMD Instinct MI250X (per GCD)")
    assert peak.peak_flops() == pytest.approx(383e12 / 2)


def test_a_recorded_name_still_wins() -> None:
    peak = gpus.resolve(name="AMD Instinct MI300X", vendor="amd", **reported("MI325X"))
    assert (peak.source, peak.model) == ("table", "AMD Instinct MI300X")


# --- ranks from file names ----------------------------------------------------------------------------


def _tiny_trace(path: Path, ts: int = 1000) -> Path:
    """A one-kernel Kineto trace with no distributedInfo: its rank can only come from its name or
    order (`ts` makes files differ: identical files are one file to the ingest)."""
    events = [json.loads(kernel_event(str(ts), "5"))]
    return write_trace(path, events, deviceProperties=[{"id": 0, "name": "GPU A", "numSms": 10}])


def test_a_version_in_the_file_name_is_not_a_rank(tmp_path: Path) -> None:
    trace = _tiny_trace(tmp_path / "trace_ROCm6_2_x.json.gz")
    report = ingest([trace], tmp_path / "ws.duckdb")
    con = open_workspace(tmp_path / "ws.duckdb", read_only=True)
    try:
        ranks = con.execute("SELECT rank, rank_source, job_rank FROM ranks").fetchall()
    finally:
        con.close()
    assert ranks == [(0, "order", 0)]  # one file, nothing names its rank: the first
    assert not any("missing" in n or "partial" in n for n in report.notes), report.notes


@pytest.mark.parametrize(
    ("name", "rank"),
    [
        ("rank0.json", 0),
        ("rank_3.json", 3),
        ("rank-3.pt.trace.json.gz", 3),
        ("rank.3.json", 3),
        ("RANK=3.json", 3),
        ("trace_r3_step5.json", 3),
        ("r003.json", 3),
        ("worker3.json", 3),
        ("proc3.json", 3),
        ("node1_rank3.json", 3),
        ("sampled_rank-1.json.gz", 1),  # HTA's trace_filter pair
        ("rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz", 0),  # HTA's ns_resolution_trace
        ("pax_fsdp4_4proc_proc2.zip", 2),  # JAX-Toolbox's recipe outputs: '4proc' is a count, not a rank
    ],
)
def test_each_recognised_pattern_gives_its_rank(name: str, rank: int) -> None:
    assert _file_number(Path(name)) == rank


@pytest.mark.parametrize(
    "name",
    [
        "trace_ROCm6_2_x.json.gz",  # a ROCm version
        "llama_cuda12_4.json",  # a CUDA version
        "model_v2.json",
        "Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",  # TraceLens: model version, size and a job id
        "benchmark_result_2869224_1695835535_trace.json.gz",  # HTA: a pid and a Unix time
        "host_12345.1700000000000.pt.trace.json",  # torch's tensorboard handler: pid and ms
        "trace_2024-01-03.json",  # a date
        "report1.sqlite",  # nsys's default output name counts reports, not ranks
        "local_rank3.json",  # a rank within its node
        "rank0_vs_rank1.json",  # two numbers: which?
    ],
)
def test_other_numbers_in_names_are_no_rank(name: str) -> None:
    assert _file_number(Path(name)) is None


def test_ranks_from_names_number_a_job(tmp_path: Path) -> None:
    """Three files named by worker, given in another order: ranks by the names, not by the order."""
    paths = [_tiny_trace(tmp_path / f"job_v2_worker{r}.json", ts=1000 + r) for r in (2, 0, 1)]
    ingest(paths, tmp_path / "ws.duckdb")
    con = open_workspace(tmp_path / "ws.duckdb", read_only=True)
    try:
        rows = con.execute(
            "SELECT f.path, r.rank, r.rank_source FROM ranks r JOIN files f USING (file_id)"
        ).fetchall()
    finally:
        con.close()
    assert sorted((Path(p).name, r, s) for p, r, s in rows) == [
        ("job_v2_worker0.json", 0, "filename"),
        ("job_v2_worker1.json", 1, "filename"),
        ("job_v2_worker2.json", 2, "filename"),
    ]
