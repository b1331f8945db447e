"""Time `nsight_analyze.synth.generate` at benchmark size (default 64 ranks x ~200k kernels each).

Usage: .venv/bin/python benchmarks/bench_synth.py [--ranks 64] [--steps 200] [--kernels-per-step 1000]
       [--truth] [--out DIR]
Prints one line per phase; the traces go to a temporary folder unless --out is given.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

from nsight_analyze.synth import generate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--gpus-per-node", type=int, default=8)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--kernels-per-step", type=int, default=1000)
    ap.add_argument("--truth", action="store_true", help="also compute ground_truth.json")
    ap.add_argument("--vacuum", action="store_true", help="VACUUM every file (byte-stable, slower)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_synth_") as tmp:
        out = args.out or Path(tmp)
        t0 = time.perf_counter()
        doc = generate(
            out,
            ranks=args.ranks,
            gpus_per_node=args.gpus_per_node,
            steps=args.steps,
            kernels_per_step=args.kernels_per_step,
            truth=args.truth,
            vacuum=args.vacuum,
            injections=["straggler=3:+10", "input-stall=10:20"],
        )
        dt = time.perf_counter() - t0
        cpu = sum(
            getattr(resource.getrusage(who), f)
            for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
            for f in ("ru_utime", "ru_stime")
        )
        per_rank = sum(doc["kernels_per_step"].values())
        size = sum(p.stat().st_size for p in out.glob("*.sqlite"))
        print(
            f"synth: {args.ranks} ranks x {per_rank:,} kernels ({args.ranks * per_rank:,} total), "
            f"truth={'yes' if args.truth else 'no'}: {dt:.1f} s wall, {cpu:.1f} s CPU, "
            f"{size / 2**20:,.0f} MiB"
        )


if __name__ == "__main__":
    main()
