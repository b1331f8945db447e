"""`nsight-analyze comms`: communication per parallelism dimension, communicator or collective."""

from __future__ import annotations

import click

from ..clihelp import output_options
from ..comms import BY
from ..render.data import to_json
from ..render.escape import clean
from ..render.markdown import markdown_table, markdown_text
from ..render.output import emit
from ..render.table import PlainTable
from ..render.terminal import echo

_KEYS = {
    "dimension": ["dimension", "communicators"],
    "communicator": ["group_key", "dimension", "ops", "size", "ranks_present"],
    "collective": ["group_key", "dimension", "op"],
}
_METRICS = [
    "total_ns", "exposed_ns", "exposed_pct", "bytes", "busbw_gbps", "link", "link_peak_gbps",
    "busbw_peak_pct",
]  # fmt: skip


@click.command(name="comms")
@output_options()
@click.option(
    "--by",
    "by",
    type=click.Choice(list(BY)),
    default="dimension",
    show_default=True,
    help="Rows per parallelism dimension, per communicator, or per communicator and collective.",
)
def command(db: str, by: str, fmt: str) -> None:
    """Communication time per parallelism dimension (dp, fsdp, tp, pp, ep, unknown): total and
    exposed time, bytes, bus bandwidth against the link it runs on, and advice that fits the
    dimension. Each communicator's dimension comes from NCCL's NVTX payload or PyTorch's process
    groups, the collective type and the hosts its ranks span (docs/metrics.md).

    CSV: the rows of the JSON (raw values); Markdown: the table, then the notes and advice.
    Python: nsight_analyze.open(DB).comms(by)."""
    from ..api import Workspace

    data = Workspace(db).comms(by)
    if fmt == "json":
        print(to_json(data))
        return
    rows = PlainTable.from_records(data["rows"])
    if fmt == "csv":
        emit(rows, "csv")
        return
    if not data["rows"]:
        echo("no NCCL kernels in this workspace: nothing to attribute to a parallelism dimension")
        return
    cols = (["job"] if data["several_jobs"] else []) + _KEYS[by] + _METRICS
    table = rows.select([c for c in cols if c in rows.columns])
    lines = []
    if by == "communicator":
        lines += [f"{clean(str(r['group_key']))}: {r['dimension']} ({r['basis']})" for r in data["rows"]]
    lines += [clean(n) for n in data["notes"]]
    lines += [
        f"{a['dimension']} (exposed {a['exposed_ns'] / 1e6:.3g} ms): {a['advice']}" for a in data["advice"]
    ]
    if fmt == "markdown":
        print(markdown_table(table, f"Communication by {by}"))
        print()
        print("\n".join(f"- {markdown_text(line)}" for line in lines))
        return
    emit(table, fmt, title=f"Communication by {by}")
    for line in lines:
        echo(line, hang="    ")
