"""`nsight-analyze synth`: write synthetic per-rank nsys exports with exact ground truth.

For tests, demos and benchmarks without real traces: the injected anomalies (straggler, clock
skew, input stalls, exposed communication, launch-bound steps, sync stalls, CUDA graphs) have
known sizes, and ground_truth.json holds the values every analysis should reproduce.
"""

from __future__ import annotations

import time

import click

from ..synth import SCHEMAS, TRUTH_FILE, WORKLOADS, generate
from ..synth.injections import SPEC_HELP


@click.command(name="synth")
@click.argument("out_dir", type=click.Path(file_okay=False))
@click.option("--ranks", default=8, show_default=True, type=click.IntRange(1), help="Number of ranks (GPUs).")
@click.option(
    "--gpus-per-node",
    default=4,
    show_default=True,
    type=click.IntRange(1, 8),
    help="Ranks per node; each node has its own clock.",
)
@click.option(
    "--steps", default=20, show_default=True, type=click.IntRange(1), help="Profiled training steps."
)
@click.option("--seed", default=1, show_default=True, type=int, help="Random seed (same seed, same bytes).")
@click.option(
    "--schema",
    default="2025.1",
    show_default=True,
    type=click.Choice(SCHEMAS),
    help="nsys version whose SQLite export schema the files use.",
)
@click.option(
    "--kernels-per-step",
    type=click.IntRange(1),
    default=None,
    help="Approximate kernels per step (sets the model depth; GEMMs per step for --workload gemm).",
)
@click.option(
    "--workload",
    default="transformer",
    show_default=True,
    type=click.Choice(WORKLOADS),
    help="transformer: data-parallel training; gemm: GEMM-only steps of known shapes (MFU tests).",
)
@click.option(
    "--inject", "inject", multiple=True, metavar="SPEC", help=f"Anomaly to inject (repeatable): {SPEC_HELP}."
)
@click.option("--no-truth", is_flag=True, help=f"Skip {TRUTH_FILE} (benchmark sizes).")
def command(out_dir, ranks, gpus_per_node, steps, seed, schema, kernels_per_step, workload, inject, no_truth):
    """Write report_rank{R}.sqlite per rank into OUT_DIR, plus ground_truth.json."""
    t0 = time.perf_counter()
    doc = generate(
        out_dir,
        ranks=ranks,
        gpus_per_node=gpus_per_node,
        steps=steps,
        seed=seed,
        schema=schema,
        kernels_per_step=kernels_per_step,
        injections=list(inject),
        workload=workload,
        truth=not no_truth,
    )
    kernels = sum(doc["kernels_per_step"].values()) if isinstance(doc["kernels_per_step"], dict) else 0
    click.echo(
        f"wrote {ranks} rank file(s) ({schema}, {steps} steps, ~{kernels:,} kernels per rank in steps)"
        f"{'' if no_truth else ' and ' + TRUTH_FILE} to {out_dir} in {time.perf_counter() - t0:.1f} s"
    )
