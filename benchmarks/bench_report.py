"""HTML report at benchmark size (default 64 ranks x 200k kernels each = 12.8M kernels).

Why: the report must stay one file a colleague can open: under 15 MB and drawn in a couple of
seconds, whatever the job size, and `nsight-analyze report` must take at most 2 s once the
results are stored (issue 15). Its size is bounded by design (the timeline is windowed, then
aggregated past a budget; tables are top-N); this checks the bounds and times each phase:
building the workspace, writing the report in this process (the stored results read through
the library), the `nsight-analyze report` command itself (--cli-runs runs, imports included:
the median is held to the 2 s budget), and, with --browser, opening it in headless chromium
until every figure has drawn.

The workspace is built directly in DuckDB (vectorised SQL): per rank, `steps` NVTX steps
(ProfilerStep#N) of back-to-back kernels launched by cudaLaunchKernel (GEMMs, elementwise, ...),
a 30 us host gap every 25 kernels, and an NCCL AllReduce per step on its own stream; rank 1
computes 20 % slower.

    .venv/bin/python benchmarks/bench_report.py                      # 64 x 200k, no browser
    .venv/bin/python benchmarks/bench_report.py --ranks 8 --kernels 20000 --browser
    .venv/bin/python benchmarks/bench_report.py --workspace w64.duckdb --cli-runs 5
"""

from __future__ import annotations

import argparse
import atexit
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb

from nsight_analyze.analysis import refresh
from nsight_analyze.render.report import write_report
from nsight_analyze.store.workspace import open_workspace

SIZE_BUDGET_MB = 15.0
OPEN_BUDGET_S = 2.0
COMMAND_BUDGET_S = 2.0  # `nsight-analyze report` on stored results (issue 15)
NAMES = (
    "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNT",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>>"
    "(int, T2, T3)",
    "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>>(flash::Flash_fwd_params)",
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float>>>(T3)",
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
)


def build(con: duckdb.DuckDBPyConnection, ranks: int, kernels: int, steps: int) -> None:
    """Fill files, ranks, kernels, cuda_api and nvtx with a regular, slightly imbalanced job."""
    per_step = kernels // steps
    d = 20_000  # ns per compute kernel on a healthy rank
    period = int(per_step * d * 1.3) + (per_step // 25) * 30000
    con.execute(f"""INSERT INTO files (file_id, path, sha256, nsys_version, status, warnings, skipped)
                    SELECT r, 'bench/rank' || r || '.sqlite', md5(r::VARCHAR), '2025.1.1', 'ok', [], []
                    FROM range({ranks}) t(r)""")
    con.execute(f"""INSERT INTO ranks (rank, file_id, hostname, device_id, gpu_name, clock_offset_ns,
                                       alignment_method, rank_source)
                    SELECT r, r, 'node' || (r // 8), r % 8, 'NVIDIA H100 80GB HBM3', 0, 'session-start',
                           'bench'
                    FROM range({ranks}) t(r)""")
    con.execute(f"""
        INSERT INTO kernels (rank, device_id, stream_id, start_ns, end_ns, duration_ns, name, short_name,
                             correlation_id, category)
        WITH k AS (
            SELECT r AS rank, i, i // {per_step} AS step, i % {per_step} AS j,
                   CASE WHEN r = 1 THEN {int(d * 1.2)} ELSE {d} END AS dur
            FROM range({ranks}) a(r), range({steps * per_step}) b(i))
        SELECT rank, rank % 8,
               CASE WHEN j = {per_step} - 1 THEN 20 ELSE 7 END,
               1000000 + step * {period} + j * dur + (j // 25) * 30000,
               1000000 + step * {period} + j * dur + (j // 25) * 30000
                   + CASE WHEN j = {per_step} - 1 THEN {period} // 6 ELSE dur END,
               CASE WHEN j = {per_step} - 1 THEN {period} // 6 ELSE dur END,
               CASE WHEN j = {per_step} - 1 THEN '{NAMES[4]}' ELSE
                   ['{NAMES[0]}', '{NAMES[1]}', '{NAMES[2]}', '{NAMES[3]}'][1 + j % 4] END,
               NULL, i + 1,
               CASE WHEN j = {per_step} - 1 THEN 'comms' WHEN j % 4 IN (0, 2) THEN 'compute' ELSE 'memory' END
        FROM k""")
    con.execute("""INSERT INTO cuda_api (rank, tid, start_ns, end_ns, duration_ns, name, correlation_id,
                                         return_value, api_class)
                   SELECT rank, 100 + rank, start_ns - 6000, start_ns - 3000, 3000, 'cudaLaunchKernel',
                          correlation_id, 0, 'runtime' FROM kernels""")
    con.execute(f"""INSERT INTO nvtx (rank, tid, start_ns, end_ns, text, event_type)
                    SELECT r, 100 + r, 1000000 + s * {period} - 8000, 1000000 + (s + 1) * {period} - 8000,
                           'ProfilerStep#' || s, 'push_pop'
                    FROM range({ranks}) a(r), range({steps}) b(s)""")


def time_command(workspace: Path, out: Path, runs: int) -> list[float]:
    """Wall seconds of each `nsight-analyze report --db WORKSPACE -o OUT` run (a fresh process:
    imports, opening the workspace and writing the page included)."""
    code = "import sys; from nsight_analyze.cli import main; sys.argv[0] = 'nsight-analyze'; main()"
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-c", code, "report", "--db", str(workspace), "-o", str(out)],
            check=True,
            capture_output=True,
        )
        times.append(time.perf_counter() - t0)
    return times


def open_in_browser(path: Path) -> float:
    """Seconds from navigation until every figure of the page has drawn (headless chromium)."""
    from playwright.sync_api import sync_playwright

    args = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ]
    with sync_playwright() as p:
        with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
            ctx = p.chromium.launch_persistent_context(
                profile, executable_path="/usr/bin/chromium", headless=True, args=args
            )
            try:
                page = ctx.new_page()
                page.goto("about:blank")
                t0 = time.perf_counter()
                page.goto(path.as_uri())
                page.wait_for_function("document.body.dataset.figuresRendered", timeout=300_000)
                return time.perf_counter() - t0
            finally:
                ctx.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--kernels", type=int, default=200_000, help="kernels per rank")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--workspace", type=Path, default=None, help="report on this workspace instead")
    ap.add_argument("--out", type=Path, default=None, help="where to write the report")
    ap.add_argument("--browser", action="store_true", help="also time opening it in headless chromium")
    ap.add_argument("--cli-runs", type=int, default=3, help="runs of the `report` command to time (0: none)")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-report-"))
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)  # the built workspaces are gigabytes
    out = a.out or tmp / "report.html"
    workspace = a.workspace or tmp / "bench.duckdb"
    if a.workspace:
        con = open_workspace(a.workspace, read_only=True)
        print(f"workspace {a.workspace}")
    else:
        con = open_workspace(workspace)
        t0 = time.perf_counter()
        build(con, a.ranks, a.kernels, a.steps)
        refresh(con, force=True)  # the stored analysis of the built rows
        print(
            f"built {a.ranks} ranks x {a.kernels:,} kernels ({a.steps} steps) "
            f"in {time.perf_counter() - t0:.1f} s"
        )
    con.execute("SET enable_progress_bar = false")
    t0 = time.perf_counter()
    write_report(con, out)
    report_s = time.perf_counter() - t0
    con.close()
    size_mb = out.stat().st_size / 1e6
    html = out.read_text(encoding="utf-8")
    mode = (
        html.split('id="timeline-info" data-mode="', 1)[1].split('"', 1)[0]
        if "timeline-info" in html
        else "?"
    )
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"report {out}: {size_mb:.2f} MB (budget {SIZE_BUDGET_MB} MB), written in {report_s:.1f} s, "
        f"timeline mode {mode}, peak RSS {rss_mb:,.0f} MB"
    )
    ok = size_mb < SIZE_BUDGET_MB
    if a.cli_runs > 0:
        times = time_command(workspace, out, a.cli_runs)
        median = statistics.median(times)
        print(
            f"`nsight-analyze report`: median {median:.2f} s of {len(times)} runs "
            f"({', '.join(f'{t:.2f}' for t in times)}; budget {COMMAND_BUDGET_S} s)"
        )
        ok = ok and median <= COMMAND_BUDGET_S
    if a.browser:
        load_s = open_in_browser(out)
        print(f"opened in headless chromium, all figures drawn in {load_s:.2f} s (target {OPEN_BUDGET_S} s)")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
