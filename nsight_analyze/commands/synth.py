"""`nsight-analyze synth`: write synthetic per-rank nsys exports with exact ground truth.

For tests, demos and benchmarks without real traces: the injected anomalies (straggler, clock
skew, input stalls, exposed communication, launch-bound steps, sync stalls, CUDA graphs) have
known sizes, and ground_truth.json holds the values every analysis should reproduce.
"""

from __future__ import annotations

import time

import click

from ..errors import UserError
from ..synth import SCHEMAS, TRUTH_FILE, WORKLOADS, generate
from ..synth.injections import SPEC_HELP
from ..synth.parallel import parse_parallel


@click.command(name="synth")
@click.argument("out_dir", type=click.Path(file_okay=False))
@click.option(
    "--ranks",
    default=None,
    type=click.IntRange(1),
    help="Number of ranks (GPUs)  [default: 8, or T*P*D with --parallel].",
)
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
@click.option(
    "--seed",
    default=1,
    show_default=True,
    type=click.IntRange(min=0),
    help="Random seed (same seed, same bytes).",
)
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
@click.option(
    "--parallel",
    metavar="tp=T,pp=P,dp=D",
    default=None,
    help="3D-parallel transformer job: TP collectives inside a node, PP send/recv between stages, DP "
    "gradient all-reduce, communicators in NCCL's NVTX payload (truth: comms_by_dimension).",
)
@click.option(
    "--nccl-trace",
    is_flag=True,
    help="With --parallel: NCCL's ranges in the advanced NCCL trace form (nsys 2025.6.1+), with apiId.",
)
@click.option(
    "--ce-collectives",
    is_flag=True,
    help="With --nccl-trace: tensor-parallel copy-engine AllGathers (NCCL >= 2.28 ce-coll), whose transfer "
    "is a memcpy inside NCCL's CE Batch range, not a kernel.",
)
@click.option(
    "--nccl-payload",
    type=click.Choice(["json", "binary"]),
    default="json",
    show_default=True,
    help="With --parallel: the form of NCCL's NVTX payloads. json: as `nsys export --include-json true` "
    "writes them (NVTX_EVENTS.jsonText); binary: as an export without it (binaryData blobs laid out by "
    "NVTX_PAYLOAD_SCHEMAS / _SCHEMA_ENTRIES; truth: generator.nccl_payload). binary is an error without "
    "--parallel (no NCCL payload to write) and with --schema 2022.4 (no binaryData column).",
)
@click.option(
    "--dcgm",
    "dcgm_format",
    type=click.Choice(["prom", "prom-ts", "prom-untimed", "json", "dmon"]),
    default=None,
    help="Also write DCGM series of every node's GPUs over the capture (dcgm_<host>.*, known values: "
    "nsight_analyze.synth.dcgm): prom (scrapes with time comments), prom-ts (sample time stamps), "
    "prom-untimed, json (Prometheus query_range), dmon (dcgmi dmon).",
)
@click.option(
    "--dcgm-interval-ms",
    type=click.FloatRange(min=0.001),
    default=100.0,
    show_default=True,
    help="With --dcgm: scrape interval.",
)
@click.option(
    "--recipe-output",
    is_flag=True,
    help="Also write nvtx_gpu_proj_trace/: what `nsys recipe nvtx_gpu_proj_trace` writes for these "
    "reports (its Parquet layout; values computed from the files). `ingest` reads it beside them.",
)
@click.option(
    "--scaling",
    "scaling",
    metavar="N1,N2,...",
    default=None,
    help="A scaling series instead of one job: one run per GPU count in OUT_DIR/nN/ with a run.json label "
    "file, all-reduce growing as a ring's, and scaling_truth.json (each run's efficiency and loss split).",
)
@click.option(
    "--weak", is_flag=True, help="With --scaling: weak scaling (same work per GPU) [default: strong]."
)
@click.option(
    "--scaling-straggler",
    metavar="FROM:+PCT",
    default=None,
    help="With --scaling: rank 1 computes PCT % slower in the runs of at least FROM GPUs.",
)
@click.option(
    "--sweep",
    "sweep",
    metavar="batch=B1,B2,...",
    default=None,
    help="A batch-size sweep instead of one job: one run per batch size (samples per GPU) in OUT_DIR/bB/ "
    "with a run.json label file, compute and memory time growing with the batch, the same all-reduce, "
    "and sweep_truth.json (each run's step time, samples/s, partition shares, the best run).",
)
def command(
    out_dir, ranks, gpus_per_node, steps, seed, schema, kernels_per_step, workload, inject, no_truth,
    parallel, nccl_trace, ce_collectives, dcgm_format, dcgm_interval_ms, recipe_output,
    scaling=None, weak=False, scaling_straggler=None, sweep=None, nccl_payload="json",
):  # fmt: skip
    """Write report_rank{R}.sqlite per rank into OUT_DIR, plus ground_truth.json."""
    t0 = time.perf_counter()
    if sweep is not None:
        given = {
            "--scaling": scaling is not None, "--weak": weak,
            "--scaling-straggler": bool(scaling_straggler), "--parallel": parallel is not None,
            "--nccl-trace": nccl_trace, "--ce-collectives": ce_collectives, "--no-truth": no_truth,
            "--nccl-payload binary": nccl_payload != "json",
            "--dcgm": dcgm_format is not None, "--recipe-output": recipe_output,
            "--workload gemm": workload != "transformer",
        }  # fmt: skip
        clash = [name for name, on in given.items() if on]
        if clash:
            raise UserError(f"--sweep cannot be combined with {clash[0]}")
        _sweep(out_dir, sweep, ranks or 8, gpus_per_node, steps, seed, schema, kernels_per_step, list(inject))
        return
    if scaling is not None and nccl_payload != "json":
        raise UserError(
            "--scaling cannot be combined with --nccl-payload binary (its runs have no NCCL payload)"
        )
    if scaling is not None:
        _series(
            out_dir, scaling, weak, scaling_straggler, gpus_per_node, steps, seed, schema, kernels_per_step
        )
        return
    if weak or scaling_straggler:
        raise UserError("--weak and --scaling-straggler go with --scaling")
    par = parse_parallel(parallel)
    if ranks is None:
        ranks = par.ranks if par is not None else 8
    if nccl_payload == "binary":
        _check_binary(par is not None, schema)
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
        parallel=parallel,
        nccl_trace=nccl_trace,
        ce_collectives=ce_collectives,
    )
    blobs = ""
    if nccl_payload == "binary":
        from ..synth.nccl_payload import write_binary_job

        files = doc["files"].values() if no_truth else [r["file"] for r in doc["ranks"]]
        events = write_binary_job(out_dir, files, None if no_truth else TRUTH_FILE)
        blobs = f", {events:,} NCCL payloads as binary blobs"
    kernels = sum(doc["kernels_per_step"].values()) if isinstance(doc["kernels_per_step"], dict) else 0
    click.echo(
        f"wrote {ranks} rank file(s) ({schema}, {steps} steps, ~{kernels:,} kernels per rank in steps{blobs})"
        f"{'' if no_truth else ' and ' + TRUTH_FILE} to {out_dir} in {time.perf_counter() - t0:.1f} s"
    )
    if dcgm_format:
        from ..synth import dcgm as synth_dcgm

        series = synth_dcgm.for_traces(out_dir, dcgm_format, interval_ns=int(dcgm_interval_ms * 1e6))
        click.echo(
            f"wrote {len(series['samples']):,} DCGM samples of {len(series['gpus'])} GPUs ({dcgm_format}) to "
            + ", ".join(series["files"])
        )
    if recipe_output:
        from ..synth import recipe as synth_recipe

        rows = synth_recipe.for_traces(out_dir)
        click.echo(
            f"wrote {sum(r['rows'] for r in rows.values()):,} projected NVTX ranges of {len(rows)} report(s) "
            f"to {synth_recipe.FOLDER}/ (nsys recipe nvtx_gpu_proj_trace layout)"
        )


def _check_binary(parallel: bool, schema: str) -> None:
    """`--nccl-payload binary` before anything is written: a job with NCCL payloads (only --parallel
    writes them; binary payloads of nothing would be a silent json) in a schema with binaryData."""
    from ..synth.nccl_payload import binary_schemas

    if not parallel:
        raise UserError(
            "--nccl-payload binary needs --parallel (only the 3D-parallel job writes NCCL payloads)"
        )
    if schema not in binary_schemas():
        raise UserError(
            f"--nccl-payload binary needs an export schema with NVTX_EVENTS.binaryData "
            f"({', '.join(binary_schemas())}), not --schema {schema}"
        )


def _series(
    out_dir: str,
    sizes_text: str,
    weak: bool,
    straggler: str | None,
    gpus_per_node: int,
    steps: int,
    seed: int,
    schema: str,
    kernels_per_step: int | None,
) -> None:
    """`synth OUT --scaling 8,16,32`: the runs of a scaling series and its truth (synth/scaling.py)."""
    from ..synth.scaling import TRUTH_FILE as SERIES_TRUTH
    from ..synth.scaling import generate_series, parse_sizes

    t0 = time.perf_counter()
    sizes = parse_sizes(sizes_text)
    start, pct = None, 20.0
    if straggler:
        head, _, tail = straggler.partition(":")
        try:
            start, pct = int(head), float(tail.lstrip("+").rstrip("%"))
        except ValueError:
            raise UserError(f"--scaling-straggler {straggler!r}: give FROM:+PCT, e.g. 16:+20") from None
    truth = generate_series(
        out_dir, sizes, weak=weak, straggler_from=start, straggler_pct=pct,
        gpus_per_node=gpus_per_node, steps=steps, seed=seed, schema=schema, kernels_per_step=kernels_per_step,
    )  # fmt: skip
    effs = ", ".join(f"{r['name']} {100 * r['efficiency']:.1f} %" for r in truth["runs"])
    click.echo(
        f"wrote a {truth['mode']}-scaling series of {len(sizes)} runs ({effs}) and {SERIES_TRUTH} "
        f"to {out_dir} in {time.perf_counter() - t0:.1f} s"
    )


def _sweep(
    out_dir: str,
    text: str,
    ranks: int,
    gpus_per_node: int,
    steps: int,
    seed: int,
    schema: str,
    kernels_per_step: int | None,
    inject: list[str],
) -> None:
    """`synth OUT --sweep batch=8,16,32`: the runs of a batch-size sweep and its truth (synth/sweep.py)."""
    from ..synth.sweep import TRUTH_FILE as SWEEP_TRUTH
    from ..synth.sweep import generate_sweep, parse_sweep

    t0 = time.perf_counter()
    _, batches = parse_sweep(text)
    truth = generate_sweep(
        out_dir, batches, ranks=ranks, gpus_per_node=gpus_per_node, steps=steps, seed=seed, schema=schema,
        kernels_per_step=kernels_per_step, injections=inject,
    )  # fmt: skip
    rates = ", ".join(f"{r['name']} {r['samples_per_s']:,.0f}" for r in truth["runs"])
    click.echo(
        f"wrote a batch sweep of {len(batches)} runs on {ranks} GPUs (samples/s: {rates}; best "
        f"{truth['best']['run']}) and {SWEEP_TRUTH} to {out_dir} in {time.perf_counter() - t0:.1f} s"
    )
