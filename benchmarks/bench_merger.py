"""Rank merger speed at benchmark size (default 64 ranks x 200k kernels each = 12.8M kernels).

Why: the whole analysis of a job must fit in 20 s on a workstation; the merger (clock
alignment, collective matching, waits, alignment quality, imbalance and the per-rank
roll-up) is one part of that budget, so it gets its own number.

The workspace is built directly in DuckDB (vectorised SQL, no SQLite round trip): every rank
runs `steps` steps of `kernels_per_step` kernels, the last `buckets` of them NCCL AllReduce
kernels on their own stream whose ends coincide across ranks; nodes of `gpus_per_node` ranks
get UTC clock errors of several ms (both signs); one rank is a 20 % straggler. Each phase is
timed on its own; the recovered offsets are checked against the injected skew.

    .venv/bin/python benchmarks/bench_merger.py                       # 64 x 200k
    .venv/bin/python benchmarks/bench_merger.py --ranks 8 --kernels 20000
    .venv/bin/python benchmarks/bench_merger.py --workspace ws.duckdb  # time an ingested workspace
                                                                       # (uses its time_partition)
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

import duckdb

from nsight_analyze.analysis import refresh
from nsight_analyze.store.workspace import open_workspace

BUDGET_S = 20.0
NCCL_AR = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
GEMM = "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNT"


def build(
    con: duckdb.DuckDBPyConnection,
    ranks: int,
    kernels: int,
    per_step: int,
    buckets: int,
    gpus_per_node: int,
    straggler: int,
) -> None:
    """Fill ranks and kernels; also a per-step compute partition table `bench_tp`."""
    steps = kernels // per_step
    compute_per_step = per_step - buckets
    con.execute(
        f"""
        INSERT INTO ranks (rank, file_id, hostname, device_id, session_start_utc_ns)
        SELECT r, r, 'node' || (r // {gpus_per_node}), r % {gpus_per_node},
               1779782330000000000 + (hash(r) % 2000000)::BIGINT
               + (((r // {gpus_per_node}) * 7919) % 13 - 6) * 1000000   -- node UTC error: -6..+6 ms
        FROM range({ranks}) t(r)
        """
    )
    # True timeline: step s starts at s * period; compute kernel i of rank r lasts d_r ns;
    # bucket b's AllReduce arrives after fraction (b+1)/buckets of the step's compute and ends
    # when the straggler (the slowest) has arrived, plus a transfer, +-200 ns jitter.
    d, slow = 20_000, 1.2
    period = int(compute_per_step * d * slow * 1.05) + buckets * 200_000
    con.execute(
        f"""
        INSERT INTO kernels (rank, device_id, stream_id, start_ns, end_ns, duration_ns, name, short_name,
                             correlation_id, category)
        WITH base AS (
            SELECT r, s, i,
                   CASE WHEN r = {straggler} THEN {int(d * slow)} ELSE {d} END AS dur,
                   (hash(r) % 2000000)::BIGINT AS t0
            FROM range({ranks}) a(r), range({steps}) b(s), range({per_step}) c(i)
        ),
        timed AS (
            SELECT r, s, i, t0,
                CASE WHEN i < {compute_per_step}
                     THEN {period}::BIGINT * s + i * dur
                     ELSE {period}::BIGINT * s + ((i - {compute_per_step} + 1) * {compute_per_step}
                          // {buckets}) * dur + (hash(r, s, i) % 3000)::BIGINT
                END AS ts,
                CASE WHEN i < {compute_per_step}
                     THEN {period}::BIGINT * s + i * dur + dur
                     ELSE {period}::BIGINT * s + ((i - {compute_per_step} + 1) * {compute_per_step}
                          // {buckets}) * {int(d * slow)} + 150000 + (hash(s, i, r) % 400)::BIGINT - 200
                END AS te
            FROM base
        )
        SELECT r, r % {gpus_per_node}, CASE WHEN i < {compute_per_step} THEN 7 ELSE 13 END,
               ts - t0, te - t0, te - ts,
               CASE WHEN i < {compute_per_step} THEN '{GEMM}' ELSE '{NCCL_AR}' END,
               CASE WHEN i < {compute_per_step} THEN '{GEMM}' ELSE '{NCCL_AR.split("(")[0]}' END,
               s * {per_step} + i,
               CASE WHEN i < {compute_per_step} THEN 'compute' ELSE 'comms' END
        FROM timed
        """
    )
    con.execute(
        "CREATE OR REPLACE TABLE bench_tp AS "
        "SELECT rank, (correlation_id // ?)::BIGINT AS step, SUM(duration_ns)::BIGINT AS compute_ns "
        "FROM kernels WHERE category = 'compute' GROUP BY ALL "
        "UNION ALL SELECT rank, NULL, SUM(duration_ns)::BIGINT FROM kernels WHERE category = 'compute' "
        "GROUP BY rank",
        [per_step],
    )


def timed(label: str, fn, results: list) -> object:
    t = time.perf_counter()
    out = fn()
    results.append((label, time.perf_counter() - t))
    print(f"  {label:<34} {results[-1][1]:7.2f} s", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--kernels", type=int, default=200_000, help="kernels per rank")
    ap.add_argument("--kernels-per-step", type=int, default=1000)
    ap.add_argument("--buckets", type=int, default=10, help="AllReduce kernels per step")
    ap.add_argument("--gpus-per-node", type=int, default=8)
    ap.add_argument(
        "--workspace", type=Path, help="time this ingested workspace instead (uses its time_partition)"
    )
    args = ap.parse_args()

    results: list[tuple[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        if args.workspace:
            con = open_workspace(args.workspace)
            tp = "time_partition"
        else:
            con = open_workspace(Path(tmp) / "bench.duckdb")
            print(f"building {args.ranks} ranks x {args.kernels:,} kernels ...", flush=True)
            t = time.perf_counter()
            build(
                con,
                args.ranks,
                args.kernels,
                args.kernels_per_step,
                args.buckets,
                args.gpus_per_node,
                straggler=3,
            )
            print(f"  (built in {time.perf_counter() - t:.1f} s; not counted)")
            tp = "bench_tp"
        n = con.execute("SELECT COUNT(*) FROM kernels").fetchone()[0]
        print(f"merger phases on {n:,} kernels:")
        # the whole stored analysis: rank-local step, clock alignment, matching, job tables
        warnings = timed("analysis (refresh)", lambda: refresh(con, force=True), results)
        timed("collectives", lambda: con.execute("SELECT COUNT(*) FROM collectives").fetchall(), results)
        timed(
            "collective_waits",
            lambda: con.execute("SELECT SUM(wait_ns) FROM collective_waits").fetchall(),
            results,
        )
        timed("alignment_quality", lambda: con.sql("SELECT * FROM alignment_quality").df(), results)
        timed(
            f"partition ({tp}) + imbalance",
            lambda: con.execute(
                f"CREATE OR REPLACE TEMP TABLE b_tp AS SELECT rank, step, compute_ns FROM {tp}; "
                "CREATE OR REPLACE TEMP TABLE b_imb AS SELECT * FROM merge_imbalance_of('b_tp')"
            ),
            results,
        )
        roll = timed(
            "rank roll-up + verdict",
            lambda: con.sql("SELECT * FROM merge_rank_rollup_of('b_tp', 'b_imb')").df(),
            results,
        )
        total = sum(s for _, s in results)
        q = con.sql(
            "SELECT host, offset_ns, residual_p50_ns, residual_p95_ns, method FROM alignment_quality"
        ).df()
        print(q.to_string(index=False))
        if not args.workspace:
            # injected per-node UTC error relative to node 0, which the refinement must undo
            err = con.sql(
                f"""
                SELECT MAX(ABS(a.offset_ns + ((((n.i) * 7919) % 13 - 6) - (0 % 13 - 6)) * 1000000)) AS e
                FROM alignment_quality a JOIN (SELECT 'node' || i AS host, i FROM range({args.ranks}) t(i)) n
                USING (host)
                """
            ).fetchone()[0]
            print(f"max |recovered - injected| host offset: {err:,} ns")
        straggler = roll[roll.straggler]["rank"].tolist()
        print(f"verdict: {roll.verdict.iloc[0]}; straggler: {straggler}; warnings: {warnings}")
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"merger total: {total:.2f} s (budget for the whole analysis: {BUDGET_S:.0f} s); "
            f"peak RSS {rss:,.0f} MB"
        )
        con.close()


if __name__ == "__main__":
    main()
