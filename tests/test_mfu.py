"""MFU and HFU on a synthetic GEMM-only trace with known shapes, and the model-FLOP formulas.

Expected values are written out by hand: a GEMM of M x N x K is 2*M*N*K FLOPs, a rank's step
window follows docs/metrics.md "Windows", and the dense H100 SXM BF16 peak is 989.4 TFLOP/s
(../shared/docs/gpu-peaks.md §2.1).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from nsight_analyze import analysis, mfu
from nsight_analyze.cli import main
from nsight_analyze.mfu import flops
from nsight_analyze.sources import ncu
from nsight_analyze.store.workspace import open_workspace

PEAK = 989.4e12  # H100 SXM dense BF16, gpu-peaks.md §2.1
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_kernel"
A = (4096, 4096, 4096, (16, 32, 1))  # M, N, K, grid
B = (8192, 4096, 1024, (16, 64, 1))
FLOPS_A = 2 * 4096 * 4096 * 4096  # 137,438,953,472
FLOPS_B = 2 * 8192 * 4096 * 1024  # 68,719,476,736
PER_RANK_STEP = 2 * FLOPS_A + FLOPS_B  # two A GEMMs and one B GEMM per step
RANKS, STEPS = 2, 3
MODEL_PER_STEP = RANKS * PER_RANK_STEP
STEP_NS = 2_000_000
NCCL_NS = {0: 400_000, 1: 600_000}  # rank 1's collective ends later


def _layout(rank: int, step: int) -> list[tuple[int, int, str, tuple[int, int, int], str]]:
    """(start_ns, duration_ns, name, grid, category) of one rank's step."""
    t0 = 1_000_000 + step * STEP_NS
    return [
        (t0, 300_000, GEMM, A[3], "compute"),
        (t0 + 300_000, 200_000, GEMM, B[3], "compute"),
        (t0 + 500_000, 300_000, GEMM, A[3], "compute"),
        (t0 + 800_000, 100_000, "vectorized_elementwise_kernel", (80, 1, 1), "memory"),
        (t0 + 900_000, NCCL_NS[rank], "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", (8, 1, 1), "comms"),
    ]


def expected_windows() -> dict[tuple[int, int], int]:
    """(rank, step) -> window length in ns."""
    return {(int(r.rank), int(r.step)): int(r.end_ns - r.start_ns) for r in given_windows().itertuples()}


def given_windows() -> pd.DataFrame:
    """The step windows of docs/metrics.md as a DataFrame (what the `steps` view must produce)."""
    rows = []
    for rank in range(RANKS):
        prev_end = None
        for step in range(STEPS):
            ops = _layout(rank, step)
            start = ops[0][0] if prev_end is None else prev_end
            end = max(s + d for s, d, *_ in ops)
            rows.append((rank, step, start, end))
            prev_end = end
    return pd.DataFrame(rows, columns=["rank", "step", "start_ns", "end_ns"])


def build(tmp_path: Path, with_ncu: bool = True, with_metrics: bool = False):
    """A 2-rank H100 workspace with NVTX steps, launches and kernels; optionally ncu counters."""
    con = open_workspace(tmp_path / "ws.duckdb")
    kernels, api, nvtx = [], [], []
    corr = 0
    for rank in range(RANKS):
        con.execute(
            "INSERT INTO ranks (rank, file_id, device_id, gpu_name, world_size) VALUES (?, ?, 0, ?, ?)",
            [rank, rank + 1, "NVIDIA H100 80GB HBM3", RANKS],
        )
        con.execute(
            "INSERT INTO gpus (rank, device_id, name, sm_count, clock_hz, compute_major, compute_minor)"
            " VALUES (?, 0, 'NVIDIA H100 80GB HBM3', 132, 1980000000, 9, 0)",
            [rank],
        )
        for step in range(STEPS):
            t0 = 1_000_000 + step * STEP_NS
            nvtx.append((rank, 1, t0 - 600_000, t0 + 1_000_000, f"step {step}", None, "push_pop", None))
            for i, (start, dur, name, grid, cat) in enumerate(_layout(rank, step)):
                corr += 1
                api.append(
                    (
                        rank,
                        1,
                        t0 - 500_000 + i * 1_000,
                        t0 - 499_000 + i * 1_000,
                        1_000,
                        "cudaLaunchKernel",
                        corr,
                        0,
                        "runtime",
                    )
                )
                block = 384 if name == GEMM else 128
                kernels.append(
                    (rank, 0, 7, start, start + dur, dur, name, name, corr, *grid, block, 1, 1, cat)
                )
    con.executemany(
        "INSERT INTO kernels (rank, device_id, stream_id, start_ns, end_ns, duration_ns, name, short_name,"
        " correlation_id, grid_x, grid_y, grid_z, block_x, block_y, block_z, category)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        kernels,
    )
    con.executemany("INSERT INTO cuda_api VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", api)
    con.executemany("INSERT INTO nvtx VALUES (?, ?, ?, ?, ?, ?, ?, ?)", nvtx)
    if with_metrics:
        ts = list(range(1_000_000, 1_000_000 + STEPS * STEP_NS, 10_000))
        samples = pd.DataFrame(
            {
                "rank": [r for r in range(RANKS) for _ in ts] * 2,
                "gpu_id": 0,
                "timestamp_ns": ts * RANKS * 2,
                "metric_name": ["Tensor Active [Throughput %]"] * (len(ts) * RANKS)
                + ["GPC Clock Frequency [MHz]"] * (len(ts) * RANKS),
                "value": [40.0] * (len(ts) * RANKS) + [1830.0] * (len(ts) * RANKS),
            }
        )
        con.register("_samples", samples)
        con.execute(
            "INSERT INTO gpu_metrics (rank, gpu_id, timestamp_ns, metric_name, value) SELECT * FROM _samples"
        )
        con.unregister("_samples")
    if with_ncu:
        path = write_gemm_ncu_csv(tmp_path / "gemm_ncu.csv")
        con.execute("BEGIN")
        ncu.load(con, path, 99, {}, ncu.probe(path))
        con.execute("COMMIT")
    if hasattr(analysis, "refresh"):  # rows were inserted directly: compute the stored analysis (steps)
        analysis.refresh(con)
    return con


def write_gemm_ncu_csv(path: Path) -> Path:
    """`ncu --csv --page raw` for the GEMM kernels: two launches of shape A, one of B."""
    metrics = [
        "gpu__time_duration.sum",
        "sm__ops_path_tensor_src_bf16_dst_fp32.sum",
        "sm__sass_thread_inst_executed_op_ffma_pred_on.sum",
        "sm__sass_thread_inst_executed_op_fadd_pred_on.sum",
        "sm__sass_thread_inst_executed_op_fmul_pred_on.sum",
        "dram__bytes.sum",
    ]
    header = [
        "ID",
        "Process ID",
        "Process Name",
        "Host Name",
        "Kernel Name",
        "Context",
        "Stream",
        "Block Size",
        "Grid Size",
        "Device",
        "CC",
    ] + metrics
    units = [""] * 11 + ["nsecond", "", "inst", "inst", "inst", "byte"]
    launches = [(A, FLOPS_A), (A, FLOPS_A), (B, FLOPS_B)]
    with open(path, "w", newline="") as fh:
        fh.write("==PROF== Connected to process 4242 (/usr/bin/python3)\n")
        w = csv.writer(fh, quoting=csv.QUOTE_ALL)
        w.writerow(header)
        w.writerow(units)
        for i, (shape, f) in enumerate(launches):
            m, n, k, grid = shape
            dram = 2 * (m * k + k * n + m * n)
            w.writerow(
                [
                    str(i),
                    "4242",
                    "python3",
                    "host",
                    GEMM,
                    "1",
                    "7",
                    "(384, 1, 1)",
                    str(grid).replace(" ", " "),
                    "NVIDIA H100 80GB HBM3",
                    "9.0",
                    "350,000",
                    f"{f:,}",
                    "0",
                    "0",
                    "0",
                    f"{dram:,}",
                ]
            )
    return path


def test_windows_follow_the_steps_view(tmp_path: Path) -> None:
    con = build(tmp_path, with_ncu=False)
    wins, source = mfu.windows(con)
    assert source == "steps (nvtx)"
    got = {(int(r.rank), int(r.step)): int(r.end_ns - r.start_ns) for r in wins.itertuples()}
    assert got == expected_windows()


def test_mfu_equals_analytic_and_hfu_equals_mfu(tmp_path: Path) -> None:
    con = build(tmp_path)
    df = mfu.hfu_mfu_table(con, flops.model_flops(MODEL_PER_STEP), window_df=given_windows())
    windows = expected_windows()
    assert len(df) == RANKS * STEPS
    for row in df.itertuples():
        window = windows[(row.rank, row.step)]
        analytic = (MODEL_PER_STEP / RANKS) / (window * 1e-9 * PEAK)
        assert row.mfu == pytest.approx(analytic, rel=1e-12)
        assert row.counted_flops == PER_RANK_STEP  # exact integer FLOPs from the counters
        assert row.hfu == pytest.approx(analytic, rel=1e-12)
        assert row.coverage_pct == pytest.approx(100.0 * 800_000 / 900_000)  # elementwise not profiled
        assert row.kernels == 4 and row.kernels_counted == 3  # the NCCL kernel is not in the coverage
    summary = mfu.hfu_mfu_summary(con, model_flops_per_step=MODEL_PER_STEP, window_df=given_windows())
    total_gpu_s = sum(windows.values()) * 1e-9
    overall = MODEL_PER_STEP * STEPS / (total_gpu_s * PEAK)
    assert summary["mfu"] == pytest.approx(overall, rel=1e-12)
    assert summary["hfu"] == pytest.approx(overall, rel=1e-12)
    assert summary["hfu_over_mfu"] == pytest.approx(1.0, rel=1e-12)
    assert [s["step"] for s in summary["per_step"]] == [0, 1, 2]
    for r in summary["per_rank"]:
        rank_s = sum(w for (rk, _), w in windows.items() if rk == r["rank"]) * 1e-9
        assert r["mfu"] == pytest.approx(MODEL_PER_STEP / RANKS * STEPS / (rank_s * PEAK), rel=1e-12)
        assert r["hfu"] == pytest.approx(r["mfu"], rel=1e-12) and r["peak_source"] == "table"
    step1 = (MODEL_PER_STEP) / ((windows[(0, 1)] + windows[(1, 1)]) * 1e-9 * PEAK)
    assert summary["per_step"][1]["mfu"] == pytest.approx(step1, rel=1e-12)
    assert any("88.9% of kernel time" in g for g in summary["gap"])
    assert any("agree" in g for g in summary["gap"])
    json.dumps(summary)  # serialisable for the report


def test_kernel_matching_by_invocation_and_signature(tmp_path: Path) -> None:
    con = build(tmp_path)
    rows = con.execute(
        "SELECT grid_y, invocation, match, flops FROM hfu_timeline_flops k"
        " JOIN kernels USING (rank, start_ns) WHERE rank = 0 AND k.name = ? ORDER BY start_ns",
        [GEMM],
    ).fetchall()
    assert rows[0] == (32, 0, "invocation", FLOPS_A)
    assert rows[1] == (64, 0, "invocation", FLOPS_B)
    assert rows[2] == (32, 1, "invocation", FLOPS_A)  # the second profiled A launch
    assert rows[3] == (32, 2, "repeat", FLOPS_A)  # A invocation 2 -> profiled launch 2 mod 2 = 0
    assert rows[4] == (64, 1, "repeat", FLOPS_B)  # B invocation 1 -> profiled launch 1 mod 1 = 0
    other = con.execute(
        "SELECT count(*) FROM hfu_timeline_flops WHERE name <> ? AND flops IS NOT NULL", [GEMM]
    )
    assert other.fetchone()[0] == 0
    # a signature ncu never profiled is not numbered (the numbering is a window over what it numbers)
    unprofiled = con.execute(
        "SELECT count(*), count(invocation) FROM hfu_timeline_flops WHERE name <> ?", [GEMM]
    ).fetchone()
    assert unprofiled[0] > 0 and unprofiled[1] == 0


def test_given_windows_and_tensor_active_estimate(tmp_path: Path) -> None:
    con = build(tmp_path, with_metrics=True)
    given = pd.DataFrame({"rank": [0], "step": [7], "start_ns": [1_000_000], "end_ns": [3_000_000]})
    df = mfu.hfu_table(con, window_df=given)
    assert len(df) == 1
    row = df.iloc[0]
    # kernels starting in [1.0 ms, 3.0 ms) of rank 0: step 0's five kernels
    assert row["counted_flops"] == PER_RANK_STEP
    assert row["hfu"] == pytest.approx(PER_RANK_STEP / (2e-3 * PEAK))
    # 40 % tensor active at 1830 MHz = the tensor clock behind the H100 spec: estimate 0.40
    assert row["hfu_tensor_active"] == pytest.approx(0.40)


def test_without_ncu_hfu_is_unavailable_and_mfu_still_exact(tmp_path: Path) -> None:
    con = build(tmp_path, with_ncu=False)
    summary = mfu.hfu_mfu_summary(con, model_flops_per_step=MODEL_PER_STEP, window_df=given_windows())
    total = sum(expected_windows().values()) * 1e-9
    assert summary["mfu"] == pytest.approx(MODEL_PER_STEP * STEPS / (total * PEAK), rel=1e-12)
    assert summary["hfu"] is None and summary["hfu_over_mfu"] is None
    assert any("ncu --metrics" in n for n in summary["notes"])


def test_peak_override_and_recompute_explanation(tmp_path: Path) -> None:
    con = build(tmp_path)
    summary = mfu.hfu_mfu_summary(
        con,
        params=1e9,
        tokens_per_step=1000,
        layers=2,
        hidden=64,
        seq_len=100,
        recompute="full",
        peak_tflops=5000,
        window_df=given_windows(),
    )
    assert summary["peaks"][0]["source"] == "override"
    assert any("recomputation is expected" in g for g in summary["gap"])
    # one explicit per-rank value: model FLOPs per GPU over window x 5000 TFLOP/s (at 500 the
    # MFU would be 3.3, above the possible, and shown as unknown: test_graph_replay.py)
    per_step = (6 * 1e9 + 12 * 2 * 64 * 100) * 1000
    w = expected_windows()
    want = per_step * STEPS / (sum(w.values()) * 1e-9 * 5000e12)
    assert 0 < want < 1 and summary["mfu"] == pytest.approx(want, rel=1e-12)


def test_mfu_command(tmp_path: Path) -> None:
    build(tmp_path).close()
    db = str(tmp_path / "ws.duckdb")
    res = CliRunner().invoke(
        main, ["mfu", "--db", db, "--model-flops-per-step", str(MODEL_PER_STEP), "--format", "json"]
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["hfu_over_mfu"] == pytest.approx(1.0)
    res = CliRunner().invoke(main, ["mfu", "--db", db, "--model-flops-per-step", str(MODEL_PER_STEP)])
    assert res.exit_code == 0, res.output
    assert "HFU/MFU = 1.000" in res.output
    res = CliRunner().invoke(main, ["mfu", "--db", db, "--recompute", "bogus"])
    assert res.exit_code != 0
    # a number that is not positive and finite is refused in one line (a peak of 0 gave "inf%")
    for args in (
        ["mfu", "--model-flops-per-step", str(MODEL_PER_STEP), "--peak-tflops", "0"],
        ["mfu", "--model-flops-per-step", "nan"],
        ["mfu", "--model-flops-per-step", "inf"],
        ["mfu", "--params", "7e9", "--tokens-per-step", "1e6", "--layers", "-2"],
        ["gpus", "--peak-tflops", "-1"],
        ["report", "-o", str(tmp_path / "r.html"), "--peak-tflops", "nan"],
    ):
        res = CliRunner().invoke(main, [*args, "--db", db])
        assert res.exit_code == 2, (args, res.output)
        assert res.output.startswith("error: --") and "must be a positive finite number" in res.output, (
            res.output
        )
        assert "inf%" not in res.output
    assert not (tmp_path / "r.html").exists()


# --- model-FLOP formulas -------------------------------------------------------------------


def test_palm_formula_by_hand() -> None:
    # GPT-3 175B shapes: N = 175e9, L = 96, H = 12288, S = 2048 (PaLM App. B: 6N + 12LHS per token)
    per_token = flops.palm_per_token(175e9, 96, 12288, 2048)
    assert per_token == 1.05e12 + 28_991_029_248
    full = flops.palm_hardware_per_token(175e9, 96, 12288, 2048, "full")
    assert full == 8 * 175e9 + 16 * 96 * 12288 * 2048  # one extra forward: 8N + 16LHS
    sel = flops.palm_hardware_per_token(175e9, 96, 12288, 2048, "selective")
    assert sel == 6 * 175e9 + 16 * 96 * 12288 * 2048


def test_megatron_and_palm_agree_for_the_standard_shape() -> None:
    """With N = 12*L*h^2 and no logit term, Korthikanti eq. 7 equals 6N + 12LhS per token."""
    L, h, s, batch = 24, 2048, 1024, 8
    meg = flops.model_flops(tokens_per_step=batch * s, layers=L, hidden=h, seq_len=s, formula="megatron")
    palm = flops.model_flops(params=12 * L * h * h, tokens_per_step=batch * s, layers=L, hidden=h, seq_len=s)
    assert meg.model_flops_per_step == pytest.approx(palm.model_flops_per_step, rel=1e-12)
    # Narayanan eq. 3 (full recomputation) is 4/3 of eq. 7 when V = 0 and s/6h is shared
    full = flops.megatron_per_step(batch, s, L, h, 0, "full")
    assert full == pytest.approx(96 * batch * s * L * h * h * (1 + s / (6 * h)))


def test_model_flops_errors() -> None:
    from nsight_analyze.errors import UserError

    with pytest.raises(UserError, match="--model-flops-per-step"):
        flops.model_flops()
    with pytest.raises(UserError):
        flops.model_flops(tokens_per_step=10, formula="megatron")


def test_synth_gemm_workload_mfu_and_hfu(tmp_path: Path) -> None:
    """The synthetic generator's GEMM-only job: MFU equals its analytic truth per rank and step,
    and with an ncu CSV for one step's GEMMs attached, HFU equals it too."""
    from nsight_analyze import synth
    from nsight_analyze.ingest.run import ingest

    ranks = 2
    truth = synth.generate(tmp_path / "synth", ranks=ranks, gpus_per_node=2, steps=3, workload="gemm")
    per_rank = set(truth["model_flops_per_step"].values())
    assert len(per_rank) == 1  # every step does the same GEMMs
    per_rank_flops = per_rank.pop()
    (kernel,) = truth["flop_kernels"]
    shapes = [s["flops"] for s in kernel["shapes"]]
    # ncu profiled one step: 8 launches alternating the two shapes (the generator's GEMM order)
    n_per_step = truth["kernels_per_step"]["1"] if "kernels_per_step" in truth else 8
    step_flops = [shapes[i % len(shapes)] for i in range(8)]
    assert sum(step_flops) == per_rank_flops, (n_per_step, shapes)
    db = tmp_path / "s.duckdb"
    ingest(sorted((tmp_path / "synth").glob("*.sqlite")), db)
    con = open_workspace(db)
    grid, block = con.execute(
        "SELECT grid_x, block_x FROM kernels WHERE name = ? LIMIT 1", [kernel["name"]]
    ).fetchone()
    csv_path = tmp_path / "gemm_ncu.csv"
    with open(csv_path, "w", newline="") as fh:
        w = csv.writer(fh, quoting=csv.QUOTE_ALL)
        w.writerow(
            [
                "ID",
                "Process ID",
                "Process Name",
                "Host Name",
                "Kernel Name",
                "Context",
                "Stream",
                "Block Size",
                "Grid Size",
                "Device",
                "CC",
                "sm__ops_path_tensor_src_bf16_dst_fp32.sum",
            ]
        )
        w.writerow([""] * 12)
        for i, f in enumerate(step_flops):
            w.writerow(
                [
                    str(i),
                    "1",
                    "python",
                    "h",
                    kernel["name"],
                    "1",
                    "7",
                    f"({block}, 1, 1)",
                    f"({grid}, 1, 1)",
                    "NVIDIA H100 80GB HBM3",
                    "9.0",
                    f"{f:,}",
                ]
            )
    con.execute("BEGIN")
    ncu.load(con, csv_path, 1000, {}, ncu.probe(csv_path))
    con.execute("COMMIT")
    if hasattr(analysis, "refresh"):  # counters arrived after ingest: recompute the stored analysis
        analysis.refresh(con, force=True)
    df = mfu.hfu_mfu_table(con, flops.model_flops(per_rank_flops * ranks), n_gpus=ranks)
    want = {(r["rank"], r["step"]): r["mfu"] for r in truth["partition"] if r["step"] is not None}
    got = df[df["step"].notna()]
    assert len(got) == len(want)
    for row in got.itertuples():
        analytic = want[(row.rank, int(row.step))]
        assert row.mfu == pytest.approx(analytic, rel=1e-12)
        assert row.counted_flops == per_rank_flops
        assert row.hfu == pytest.approx(analytic, rel=1e-12)


def test_unknown_peak_leaves_mfu_and_hfu_unknown_until_the_gpu_is_stated(tmp_path: Path, monkeypatch) -> None:
    """A trace that records no GPU and runs only sm80-named GEMMs (Hopper runs those too, see
    tests/test_gpu_identity.py): no peak is guessed, so MFU and HFU are None even though model
    FLOPs and matched counters are there. Stating the GPU (--gpu) gives the exact H100 values."""
    monkeypatch.setitem(globals(), "GEMM", GEMM.replace("sm90_", "sm80_"))
    con = build(tmp_path)
    con.execute("DELETE FROM gpus")
    con.execute("UPDATE ranks SET gpu_name = NULL")
    run = {"model_flops_per_step": MODEL_PER_STEP, "window_df": given_windows()}
    summary = mfu.hfu_mfu_summary(con, **run)
    assert summary["mfu"] is None and summary["hfu"] is None and summary["hfu_over_mfu"] is None
    assert {p["source"] for p in summary["peaks"]} == {"unknown"}
    assert any("MFU and HFU are unknown" in n for n in summary["notes"])
    assert not any("ncu --metrics" in n for n in summary["notes"])  # counters matched; the peak is missing
    assert summary["coverage_pct"] > 0
    stated = mfu.hfu_mfu_summary(con, gpu="H100 SXM", **run)
    total = sum(expected_windows().values()) * 1e-9
    assert stated["mfu"] == pytest.approx(MODEL_PER_STEP * STEPS / (total * PEAK), rel=1e-12)
    assert stated["hfu_over_mfu"] == pytest.approx(1.0)
    assert {p["source"] for p in stated["peaks"]} == {"given"}


def test_one_option_list_for_the_cli_the_api_and_the_library(tmp_path: Path) -> None:
    """`nsight-analyze mfu`'s model options, the API's keywords and hfu_mfu_summary's are the
    fields of MfuOptions (one list); a MfuOptions and the same keywords give the same document."""
    import dataclasses

    import nsight_analyze as na
    from nsight_analyze.commands.mfu import command
    from nsight_analyze.mfu import MfuOptions

    fields = [f.name for f in dataclasses.fields(MfuOptions)]
    params = {p.name: p for p in command.params}
    assert [name for name in params if name in fields] == fields  # in the dataclass's order
    assert set(params) - set(fields) == {"job", "db", "fmt", "output"}  # the shared options
    # the flags users type, as commands/mfu.py declared them one by one before (git history)
    flags = {name: p.opts[0] for name, p in params.items() if name in fields}
    assert flags["model_flops_per_step"] == "--model-flops-per-step" and flags["gpu"] == "--gpu"
    assert flags["n_gpus"] == "--gpus" and flags["steps_in_window"] == "--steps"
    assert params["precision"].default == "bf16" and params["formula"].default == "palm"
    con = build(tmp_path)
    run = {"params": 1e9, "tokens_per_step": 1000, "layers": 2, "hidden": 64, "seq_len": 100}
    run |= {"recompute": "full", "peak_tflops": 500}
    by_keywords = mfu.hfu_mfu_summary(con, window_df=given_windows(), **run)
    assert by_keywords == mfu.hfu_mfu_summary(con, MfuOptions(**run), window_df=given_windows())
    with pytest.raises(TypeError):
        mfu.hfu_mfu_summary(con, no_such_option=1)
    con.close()
    ws = na.open(tmp_path / "ws.duckdb")
    frame = ws.mfu(MODEL_PER_STEP, precision=None)  # None: the default precision, as before
    same = ws.mfu(MfuOptions(model_flops_per_step=MODEL_PER_STEP))
    assert frame.equals(same) and frame.attrs == same.attrs
    assert ws.mfu_summary(model_flops_per_step=MODEL_PER_STEP)["mfu"] == frame.attrs["mfu"]


def test_per_step_and_per_rank_rows_sum_the_table(tmp_path: Path) -> None:
    """The summary's per-step and per-rank rows (SQL aggregates) are the GPU-time weighted sums of
    hfu_mfu_table's rows, recomputed here with pandas from that table."""
    con = build(tmp_path)
    model = flops.model_flops(MODEL_PER_STEP)
    table = mfu.hfu_mfu_table(con, model, window_df=given_windows())
    summary = mfu.hfu_mfu_summary(con, model_flops_per_step=MODEL_PER_STEP, window_df=given_windows())

    def total(g: pd.DataFrame, column: str) -> float:
        return g[column].sum() / (g["window_ns"] * 1e-9 * g["peak_flops"]).sum()

    for row, (step, g) in zip(summary["per_step"], table.groupby("step"), strict=True):
        assert row["step"] == step and row["ranks"] == len(g) == RANKS
        assert row["window_ns_max"] == g["window_ns"].max()
        assert row["mfu"] == pytest.approx(total(g, "model_flops"), rel=1e-12)
        assert row["hfu"] == pytest.approx(total(g, "counted_flops"), rel=1e-12)
        assert row["coverage_pct"] == pytest.approx(100.0 * g["counted_ns"].sum() / g["kernel_ns"].sum())
    for row, (rank, g) in zip(summary["per_rank"], table.groupby("rank"), strict=True):
        assert row["rank"] == rank and row["windows"] == len(g) == STEPS
        assert row["mfu"] == pytest.approx(total(g, "model_flops"), rel=1e-12)
        assert row["hfu"] == pytest.approx(total(g, "counted_flops"), rel=1e-12)
    con.close()


def test_runs_hfu_is_mfu_commands(tmp_path: Path) -> None:
    """`runs --hfu` gives each run the HFU `mfu --job N` computes (the same definition, per job);
    without --hfu it is unknown and says how to get it. Oracle: the mfu command's JSON, itself
    checked against the analytic counted FLOPs above."""
    import json

    from click.testing import CliRunner

    from nsight_analyze.cli import main

    build(tmp_path).close()
    db = str(tmp_path / "ws.duckdb")
    runner = CliRunner()
    got = runner.invoke(main, ["mfu", "--db", db, "--format", "json"])  # one job: the workspace's
    assert got.exit_code == 0, got.output
    want = json.loads(got.stdout)["hfu"]
    assert want is not None and want > 0  # ncu counters on every GEMM: HFU is known
    out = runner.invoke(main, ["runs", "--db", db, "--hfu", "--format", "json"])
    assert out.exit_code == 0, out.output
    (run,) = json.loads(out.stdout)["runs"]
    assert run["hfu"] == pytest.approx(want, rel=1e-12) and run["hfu_unknown"] is None
    plain = runner.invoke(main, ["runs", "--db", db, "--format", "json"])
    (run,) = json.loads(plain.stdout)["runs"]
    assert run["hfu"] is None and "runs --hfu" in run["hfu_unknown"]
