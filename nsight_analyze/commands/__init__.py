"""One module per CLI subcommand; each defines a click command named `command`.

`SHORT_HELP` is what `nsight-analyze --help` lists: kept here so that listing the commands
imports none of them (nor duckdb, pandas or plotly); a test checks it names every module.
"""

SHORT_HELP = {
    "classify": "Re-classify every kernel with the rules; show kernel categories and coverage.",
    "comms": "Communication per parallelism dimension (dp, tp, pp, ...): exposed time, bandwidth, advice.",
    "compare": "Compare two runs (workspaces or trace folders): what got faster or slower, and why.",
    "demo": "Ingest sample_traces/, print the summary and write the HTML report.",
    "diagnose": "Ranked findings with evidence (and its SQL), recoverable time and fixes.",
    "export": "Write the workspace as Parquet files or the aligned timeline as a Chrome/Perfetto trace.",
    "gpus": "Per rank: GPU model, its peak-table row, and how the peak was found.",
    "info": "Files, versions, ranks, GPUs, event counts, time span and warnings.",
    "ingest": "Read every trace below DIR into the workspace and compute its analysis.",
    "mfu": "MFU (model FLOPs) and HFU (counted FLOPs) against the GPUs' dense peak.",
    "ranks": "Per rank: host, GPU, clock offset, compute time, waits and the straggler verdict.",
    "report": "Write the self-contained HTML report.",
    "runs": "One row per run (job): labels, step time, MFU, partition shares; sweeps and scaling efficiency.",
    "sql": "Run a SQL query against the workspace (read-only unless --write).",
    "summary": "Time partition per rank or step: compute, memory, exposed comms, idle and its causes.",
    "synth": "Write synthetic per-rank traces with their ground truth.",
    "whatif": "The step time if each cause went away: slow rank, exposed comms, input, launch, sync stalls.",
}
