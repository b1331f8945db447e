"""Where a workspace's analysis spends its time: recompute it and time every query of the layer.

Usage: .venv/bin/python benchmarks/profile_analysis.py WORKSPACE [--top N] [--set NAME=VALUE ...]

Recomputes the stored results of WORKSPACE (analysis.refresh(force=True): it writes them back, so
work on a copy) and prints the rank and job steps' times, the time inside the queries, and the
N slowest queries summed over the rank batches. The rest of the rank step is shadowing the
batch's rows and writing its results.

--set applies a DuckDB setting to the connection first, to time the layer under another one:
`--set asof_loop_join_threshold=64` is DuckDB's default, which our connections turn off (duck.py
says why; on the 2.5 MB nsys-ai mfu_2gpu_before capture it takes the analysis from 1.9 to 4.0 s on 2 cores).
"""

from __future__ import annotations

import argparse
import collections
import time

from nsight_analyze import analysis
from nsight_analyze.store.workspace import open_workspace


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workspace")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="a DuckDB setting")
    args = ap.parse_args()
    spent: dict[str, float] = collections.defaultdict(float)
    run = analysis.steps._run

    def timed(con, sql: str, name: str) -> None:
        started = time.perf_counter()
        run(con, sql, name)
        spent[name] += time.perf_counter() - started

    analysis.steps._run = timed  # every query of the layer is created through this one function
    con = open_workspace(args.workspace, analyse=False)
    for setting in args.set:
        name, _, value = setting.partition("=")
        con.execute(f"SET {name} = '{value}'")
    steps: dict[str, float] = {}
    started = time.perf_counter()
    analysis.refresh(con, force=True, seconds=steps)
    total = time.perf_counter() - started
    con.close()
    print(
        f"analysis {total:.1f} s: rank step {steps.get('rank', 0):.1f} s, "
        f"job step {steps.get('job', 0):.1f} s; inside the queries {sum(spent.values()):.1f} s"
    )
    for name, seconds in sorted(spent.items(), key=lambda kv: -kv[1])[: args.top]:
        print(f"{seconds:8.2f} s  {name}")


if __name__ == "__main__":
    main()
