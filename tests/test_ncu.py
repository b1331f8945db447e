"""Nsight Compute ingest: CSV layouts, .ncu-rep, FLOPs per launch and the roofline.

Expected FLOPs are computed here by hand from the same counters (read with the csv module
or ncu_report, not with nsight_analyze), following ../shared/docs/nsys-sqlite-schema.md §10.1:
FP32 = fadd + fmul + 2*ffma, FP64 = dadd + dmul + 2*dfma, and FP16 in ncu's own half-roofline
convention 2*hadd + 2*hmul + 4*hfma (the derived__*_hadd_pred_on_x2 / _hfma_pred_on_x4 metrics
in the GB200 report).
"""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

import pytest
from conftest import TRACES, requires_shared

from nsight_analyze.sources import ncu, ncu_read
from nsight_analyze.store.workspace import open_workspace

LELEUCAS = TRACES / "ncu" / "leleucas"
GB200_REP = TRACES / "ncu" / "jax-toolbox" / "ncu_report_cuda_graph_pdl_stream_capture.ncu-rep"
ICON_REP = TRACES / "ncu" / "icon" / "gpu.ncu-rep"
has_ncu_report = pytest.mark.skipif(
    importlib.util.find_spec("ncu_report") is None,
    reason="the optional ncu-report package is not installed (pip install ncu-report)",
)
OP = "sm__sass_thread_inst_executed_op_{}_pred_on.sum"


def load(tmp_path: Path, *paths: Path):
    con = open_workspace(tmp_path / "ws.duckdb")
    results = []
    for file_id, path in enumerate(paths, start=1):
        con.execute("BEGIN")
        results.append(ncu.load(con, path, file_id, {}, ncu.probe(path)))
        con.execute("COMMIT")
    return con, results


def hand_counters(path: Path) -> dict[int, dict[str, float]]:
    """ID -> {metric: value} from a long-layout ncu CSV, parsed with the csv module."""
    out: dict[int, dict[str, float]] = {}
    with open(path, newline="") as fh:
        rows = csv.reader(fh)
        header = next(rows)
        i_id, i_name, i_val = header.index("ID"), header.index("Metric Name"), header.index("Metric Value")
        for row in rows:
            if len(row) <= i_val or not row[i_name]:
                continue
            try:
                out.setdefault(int(row[i_id]), {})[row[i_name]] = float(row[i_val].replace(",", ""))
            except ValueError:
                pass
    return out


def hand_flops(c: dict[str, float]) -> dict[str, float]:
    g = lambda op: c[OP.format(op)]  # noqa: E731
    return {
        "fp64": g("dadd") + g("dmul") + 2 * g("dfma"),
        "fp32": g("fadd") + g("fmul") + 2 * g("ffma"),
        "fp16": 2 * g("hadd") + 2 * g("hmul") + 4 * g("hfma"),
    }


@requires_shared
@pytest.mark.parametrize("name", ["bert_torch_nsight.csv", "bert_flashattn_nsight.csv"])
def test_leleucas_flops_equal_hand_computation(tmp_path: Path, name: str) -> None:
    path = LELEUCAS / name
    assert ncu.sniff(path)
    con, (result,) = load(tmp_path, path)
    counters = hand_counters(path)
    got = con.execute(
        "SELECT launch_id, fp64_flops, fp32_flops, fp16_flops, tensor_flops, flops, dram_bytes, intensity"
        " FROM hfu_ncu_flops ORDER BY launch_id"
    ).fetchall()
    assert len(got) == len(counters) == result.counts["ncu_kernels"]
    for launch_id, fp64, fp32, fp16, tensor, flops, dram, intensity in got:
        c = counters[launch_id]
        want = hand_flops(c)
        assert (fp64, fp32, fp16) == (want["fp64"], want["fp32"], want["fp16"]), launch_id
        assert dram == c["dram__bytes.sum"]
        if c["sm__inst_executed_pipe_tensor.sum"] == 0:
            assert tensor == 0  # no tensor instruction ran: known zero
        else:
            assert tensor is None  # CC >= 8 instruction counts are not converted
        assert flops == want["fp64"] + want["fp32"] + want["fp16"]
        if dram:
            assert intensity == pytest.approx(flops / dram)
    # a concrete spot check: ampere_sgemm_128x128_tn (ID 18): ffma 8,388,608 and fmul 262,144
    row = con.execute("SELECT fp32_flops, name FROM hfu_ncu_flops WHERE launch_id = 18").fetchone()
    if name == "bert_torch_nsight.csv":
        assert row[1] == "ampere_sgemm_128x128_tn"
        assert row[0] == 2 * 8_388_608 + counters[18][OP.format("fmul")] + counters[18][OP.format("fadd")]
    # the GPU is not in the file, and ampere_* kernels run on Ampere and every newer GPU
    # (gpus.KERNEL_FAMILIES): the peak is unknown, never guessed
    assert con.execute("SELECT DISTINCT source FROM ncu_peaks").fetchall() == [("unknown",)]


@requires_shared
def test_leleucas_launch_attributes(tmp_path: Path) -> None:
    con, _ = load(tmp_path, LELEUCAS / "bert_torch_nsight.csv")
    row = con.execute(
        "SELECT name, short_name, grid_size, block_size, registers_per_thread, process_id FROM ncu_kernels"
        " WHERE launch_id = 6"
    ).fetchone()
    assert row == (
        "ampere_sgemm_32x32_sliced1x4_tn",
        "ampere_sgemm_32x32_sliced1x4_tn",
        64,
        128,
        row[4],
        35412,
    )
    metrics = con.execute("SELECT count(*) FROM ncu_metrics WHERE launch_id = 0").fetchone()[0]
    assert metrics == 60  # 41 command-line metrics + 10 launch statistics + 9 occupancy (no rule rows)


@requires_shared
@has_ncu_report
def test_gb200_rep_rates_times_cycles(tmp_path: Path) -> None:
    import ncu_report

    con, (result,) = load(tmp_path, GB200_REP)
    assert result.counts["ncu_kernels"] == 3
    ctx = ncu_report.load_report(str(GB200_REP))
    for launch_id, action in enumerate(ctx.range_by_idx(0)):
        cycles = action["smsp__cycles_elapsed.avg"].value()
        rate = "smsp__sass_thread_inst_executed_op_{}_pred_on.sum.per_cycle_elapsed"
        count = {op: round(action[rate.format(op)].value() * cycles) for op in ("fadd", "fmul", "ffma")}
        want = count["fadd"] + count["fmul"] + 2 * count["ffma"]
        row = con.execute(
            "SELECT fp32_flops, counts_from, dram_bytes, duration_ns FROM hfu_ncu_flops WHERE launch_id = ?",
            [launch_id],
        ).fetchone()
        assert row[0] == want and row[1] == "rate x cycles"
        assert row[2] == action["dram__bytes_read.sum"].value() + action["dram__bytes_write.sum"].value()
        assert row[3] == action["gpu__time_duration.sum"].value()
    assert con.execute("SELECT fp32_flops FROM hfu_ncu_flops WHERE launch_id = 0").fetchone()[0] == 1024
    gpu = con.execute("SELECT DISTINCT gpu_name, sm_count, compute_major FROM ncu_kernels").fetchall()
    assert gpu == [("NVIDIA GB200", 152, 10)]
    assert con.execute("SELECT peak_flops FROM ncu_peaks WHERE precision = 'bf16'").fetchone()[0] == 2500e12


@requires_shared
@has_ncu_report
def test_rep_and_csv_of_the_same_report_agree(tmp_path: Path) -> None:
    """Write the .ncu-rep's values as a `--page raw --csv` file (thousands separators, a units
    row, program output first), ingest both, and compare every FLOP/byte column."""
    import ncu_report

    ctx = ncu_report.load_report(str(GB200_REP))
    actions = list(ctx.range_by_idx(0))
    names = sorted(
        n
        for n in actions[0].metric_names()
        if isinstance(actions[0][n].value(), (int, float)) and not isinstance(actions[0][n].value(), bool)
    )
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
    ] + names
    out = tmp_path / "raw.csv"
    with open(out, "w", newline="") as fh:
        fh.write("==PROF== Connected to process 1234 (/usr/bin/python3)\nsome program output\n")
        w = csv.writer(fh, quoting=csv.QUOTE_ALL)
        w.writerow(header)
        w.writerow([""] * 11 + [actions[0][n].unit() for n in names])
        for i, a in enumerate(actions):
            values = []
            for n in names:
                v = a[n].value()
                values.append(f"{v:,}" if isinstance(v, int) else f"{v:,.12g}" if abs(v) >= 1000 else repr(v))
            w.writerow(
                [
                    str(i),
                    "1",
                    "python3",
                    "host",
                    a.name(ncu_report.IAction.NameBase_DEMANGLED),
                    "1",
                    "16",
                    f"({a['launch__block_dim_x'].value()}, 1, 1)",
                    f"({a['launch__grid_dim_x'].value()}, 1, 1)",
                    "NVIDIA GB200",
                    "10.0",
                ]
                + values
            )
    assert ncu.sniff(out)
    con, _ = load(tmp_path, GB200_REP, out)
    cols = "fp64_flops, fp32_flops, fp16_flops, tensor_flops, flops, dram_bytes, duration_ns, precision"
    rep = con.execute(f"SELECT launch_id, {cols} FROM hfu_ncu_flops WHERE file_id = 1 ORDER BY 1").fetchall()
    raw = con.execute(f"SELECT launch_id, {cols} FROM hfu_ncu_flops WHERE file_id = 2 ORDER BY 1").fetchall()
    assert rep == raw and len(rep) == 3
    dims = con.execute(
        "SELECT grid_x, block_x, grid_size, block_size FROM ncu_kernels ORDER BY file_id, launch_id"
    )
    rows = dims.fetchall()
    assert rows[:3] == rows[3:]


@requires_shared
@has_ncu_report
def test_rep_without_flop_counters_is_reported(tmp_path: Path) -> None:
    con, (result,) = load(tmp_path, ICON_REP)
    assert any("lack CUDA-core FLOP counters" in w for w in result.warnings)
    assert any("lack tensor FLOP counters" in w for w in result.warnings)
    assert con.execute("SELECT count(*), count(flops) FROM hfu_ncu_flops").fetchone() == (7, 0)
    missing = con.execute("SELECT DISTINCT missing FROM hfu_ncu_flops").fetchone()[0]
    assert "CUDA-core FLOP counters" in missing
    # the GPU comes from the report's device attributes, derived (RTX 4070 SUPER is not in the table)
    assert con.execute("SELECT DISTINCT source FROM ncu_peaks").fetchall() == [("derived",)]
    # 56 SMs x 2.505 GHz x 512 FLOP/clk/SM (Ada GeForce, FP32 accumulate) = 71.8 TF (gpu-peaks.md §2.2);
    # DRAM 2 x 10.501 GHz x 192 bit / 8 = 504.05 GB/s
    bf16, bw = con.execute("SELECT peak_flops, mem_bw_bps FROM ncu_peaks WHERE precision = 'bf16'").fetchone()
    assert bf16 == pytest.approx(56 * 2.505e9 * 512) and bw == pytest.approx(2 * 10.501e9 * 192 / 8)


def test_rep_without_module_is_one_clear_line(tmp_path: Path, monkeypatch) -> None:
    import builtins

    real = builtins.__import__

    def fake(name, *args, **kwargs):
        if name == "ncu_report":
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake)
    rep = tmp_path / "x.ncu-rep"
    rep.write_bytes(b"NVR\x00" + b"\x00" * 64)
    assert ncu.sniff(rep)
    with pytest.raises(ncu.BadInput, match="pip install"):
        ncu_read.read_rep(rep)


LONG_HEADER = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
    '"Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"'
)


def _long_row(
    i: int, name: str, metric: str, unit: str, value: str, section: str = "Command line profiler metrics"
):
    return (
        f'"{i}","77","train.py","host","{name}","1","7","(128, 1, 1)","(1024, 2, 1)",'
        f'"NVIDIA H100 80GB HBM3","9.0","{section}","{metric}","{unit}","{value}"'
    )


def test_long_layout_synthetic(tmp_path: Path) -> None:
    """Program output first, thousands separators, unit prefixes, n/a and a missing metric."""
    lines = ["==PROF== Connected to process 77", "loss 1.234", LONG_HEADER]
    gemm = "void gemm_kernel<(int)128>(float *, int)"
    lines += [
        _long_row(0, gemm, OP.format("ffma"), "inst", "1,048,576"),
        _long_row(0, gemm, OP.format("fadd"), "inst", "2,048"),
        _long_row(0, gemm, OP.format("fmul"), "inst", "0"),
        _long_row(0, gemm, "sm__ops_path_tensor_src_bf16_dst_fp32.sum", "", "68,719,476,736"),
        _long_row(0, gemm, "dram__bytes.sum", "Mbyte", "100.5"),
        _long_row(0, gemm, "Duration", "usecond", "12.5", section="GPU Speed Of Light Throughput"),
        _long_row(1, "other_kernel", "dram__bytes.sum", "Kbyte", "n/a"),
        _long_row(1, "other_kernel", OP.format("ffma"), "inst", "10"),
    ]
    path = tmp_path / "long.csv"
    path.write_text("\n".join(lines) + "\n")
    assert ncu.sniff(path)
    con, (result,) = load(tmp_path, path)
    row = con.execute(
        "SELECT fp32_flops, tensor_flops, tensor_precision, flops, dram_bytes, duration_ns, precision,"
        " missing FROM hfu_ncu_flops WHERE launch_id = 0"
    ).fetchone()
    assert row[0] == 2 * 1_048_576 + 2_048
    assert row[1] == 68_719_476_736 and row[2] == "bf16"
    assert row[3] == 2 * 1_048_576 + 2_048 + 68_719_476_736
    assert row[4] == 100_500_000 and row[5] == 12_500 and row[6] == "bf16" and row[7] == ""
    k = con.execute(
        "SELECT grid_x, grid_y, block_x, grid_size, block_size, compute_major, gpu_name"
        " FROM ncu_kernels WHERE launch_id = 0"
    ).fetchone()
    assert k == (1024, 2, 128, 2048, 128, 9, "NVIDIA H100 80GB HBM3")
    assert any("1 of 2 launches lack DRAM bytes" in w for w in result.warnings)
    assert any("1 of 2 launches lack tensor FLOP counters" in w for w in result.warnings)
    # roofline against the H100 SXM table row: ridge = 989.4e12 / 3350e9 FLOP/byte (gpu-peaks.md §2.1)
    roof = con.execute(
        "SELECT ridge_flop_per_byte, bound, peak_source FROM roofline WHERE launch_id = 0"
    ).fetchone()
    assert roof[0] == pytest.approx(989.4e12 / 3350e9) and roof[2] == "table"
    assert roof[1] == ("compute" if row[3] / 100_500_000 >= 989.4e12 / 3350e9 else "memory")


def test_wide_layout_european_locale(tmp_path: Path) -> None:
    header = (
        '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
        '"Grid Size","Device","CC","dram__bytes.sum","gpu__time_duration.sum",'
        f'"{OP.format("dfma")}","{OP.format("dadd")}"'
    )
    units = '"","","","","","","","","","","","Kbyte","usecond","inst",""'
    row0 = (
        '"0","1","a.out","h","dgemm(double*)","1","7","(256, 1, 1)","(80, 1, 1)",'
        '"NVIDIA A100-SXM4-80GB","8.0","1.234,5","3,25","2.000.000","10"'
    )
    path = tmp_path / "wide.csv"
    path.write_text("\n".join([header, units, row0]) + "\n")
    con, _ = load(tmp_path, path)
    row = con.execute("SELECT fp64_flops, dram_bytes, duration_ns, precision FROM hfu_ncu_flops").fetchone()
    assert row == (2 * 2_000_000 + 10, 1_234_500, 3_250, "fp64")
    assert con.execute("SELECT peak_flops FROM ncu_peaks WHERE precision = 'fp64'").fetchone()[0] == 9.7e12


def test_sniff_rejects_other_csv(tmp_path: Path) -> None:
    other = tmp_path / "x.csv"
    other.write_text('"a","b"\n"1","2"\n')
    assert not ncu.sniff(other)
    with pytest.raises(ncu.BadInput):
        ncu.probe(other)


@requires_shared
@has_ncu_report
def test_real_ncu_launches_match_the_nsys_kernels_of_the_same_app(tmp_path: Path) -> None:
    """icon/gpu.ncu-rep and nsys/icon/gpu.sqlite profile the same program (7 kernels, traces README):
    every timeline kernel finds its ncu launch by canonical name, grid and block size."""
    from nsight_analyze.ingest.run import ingest

    db = tmp_path / "ws.duckdb"
    ingest([TRACES / "nsys" / "icon" / "gpu.sqlite"], db)
    con = open_workspace(db)
    con.execute("BEGIN")
    ncu.load(con, ICON_REP, 100, {}, ncu.probe(ICON_REP))
    con.execute("COMMIT")
    rows = con.execute(
        """
        SELECT k.short_name, count(n.launch_id) AS launches
        FROM kernels k LEFT JOIN ncu_kernels n
          ON n.match_key = hfu_canon_name(k.name) AND n.grid_size = k.grid_x * k.grid_y * k.grid_z
         AND n.block_size = k.block_x * k.block_y * k.block_z
        GROUP BY k.start_ns, k.short_name ORDER BY k.start_ns
        """
    ).fetchall()
    assert len(rows) == 7 and all(n >= 1 for _, n in rows), rows
    # without FLOP counters nothing is counted on the timeline
    assert con.execute("SELECT count(flops) FROM hfu_timeline_flops").fetchone()[0] == 0


def test_roofline_section_rates_only(tmp_path: Path) -> None:
    """sm_89 exports only the sections' derived rates: ffma_x2 and hfma_x4 are per-cycle rates
    (x2 / x4 already applied); derived__sm__* are device peaks and must be ignored."""
    cols = [
        "derived__smsp__sass_thread_inst_executed_op_ffma_pred_on_x2",
        "derived__smsp__sass_thread_inst_executed_op_hfma_pred_on_x4",
        "derived__sm__sass_thread_inst_executed_op_ffma_pred_on_x2",
        "smsp__cycles_elapsed.avg",
    ]
    header = ",".join(
        f'"{c}"' for c in ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name"] + cols
    )
    row = '"0","1","p","h","k(float*)","0.5","0.25","28672","1,000"'
    path = tmp_path / "rates.csv"
    path.write_text(header + "\n" + row + "\n")
    con, _ = load(tmp_path, path)
    got = con.execute("SELECT fp32_flops, fp16_flops, counts_from FROM hfu_ncu_flops").fetchone()
    # ffma = 0.5 / 2 per cycle x 1000 cycles = 250 -> 500 FLOP; hfma = 0.25 / 4 x 1000 = 62.5 -> 63 -> 252
    assert got == (2 * 250, 4 * 63, "rate x cycles")


@requires_shared
def test_flop_weights_are_those_of_ncus_own_roofline_sections(tmp_path: Path) -> None:
    """The FLOP weight of each thread-instruction counter is the one Nsight Compute's own roofline
    sections use. Their definitions are embedded in the GB200 .ncu-rep (NVIDIA/JAX-Toolbox, "full"
    set), read here as bytes: `derived__smsp__..._OP_pred_on_xN` = `smsp__..._OP_pred_on.sum.
    per_cycle_elapsed * N` for hadd/hmul (x2, a packed half2 instruction is 2 lanes), hfma (x4) and
    ffma/dfma (x2); fadd, fmul, dadd, dmul enter the achieved work as they are (x1). Issue 20's
    "add + mul + 2*fma per precision" is that rule for FP32/FP64 only: for FP16 it would halve
    ncu's own count."""
    import re

    raw = GB200_REP.read_bytes()
    defs = re.findall(
        rb"smsp__sass_thread_inst_executed_op_([dfh](?:add|mul|fma))_pred_on\.sum\.per_cycle_elapsed \* (\d)",
        raw,
    )
    weight = {op.decode(): int(n) for op, n in defs}
    assert weight == {"hadd": 2, "hmul": 2, "hfma": 4, "ffma": 2, "dfma": 2}, weight
    ops = ("dadd", "dmul", "dfma", "fadd", "fmul", "ffma", "hadd", "hmul", "hfma")
    counts = {op: 1000 * (i + 1) + i for i, op in enumerate(ops)}  # distinct, so a swapped weight shows
    lines = [LONG_HEADER] + [
        _long_row(0, "k(half*)", OP.format(op), "inst", str(n)) for op, n in counts.items()
    ]
    path = tmp_path / "all_ops.csv"
    path.write_text("\n".join(lines) + "\n")
    con, _ = load(tmp_path, path)
    got = con.execute("SELECT fp64_flops, fp32_flops, fp16_flops FROM hfu_ncu_flops").fetchone()
    want = tuple(sum(weight.get(op, 1) * counts[op] for op in ops if op[0] == p) for p in "dfh")
    assert got == want
