"""`nsight-analyze info`: what is in a workspace, and what it cannot answer."""

from __future__ import annotations

import click

from ..clihelp import output_options
from ..render.data import to_json
from ..render.escape import clean
from ..render.markdown import markdown_table, markdown_text
from ..render.table import PlainTable
from ..render.terminal import echo, print_table


def _notes(info: dict) -> list[str]:
    """The warnings and not-loaded files, one line each (worded like ingest's own lines)."""
    lines = [f"warning: {line}" for line in info["warnings"]]
    lines += [f"not loaded: {line}" for line in info["skipped"]]
    lines += [
        f"{row['status']}: {row['path']}" + (f": {row['reason']}" if row["reason"] else "")
        for row in info["not_loaded"]
    ]
    return [clean(line) for line in lines]  # a path's newline split the line


def _markdown(info: dict) -> None:
    parts = [markdown_table(PlainTable.from_records(info["files"]), "files")]
    if info["jobs"]:
        parts.append(markdown_table(PlainTable.from_records(info["jobs"]), "jobs"))
    parts.append(markdown_table(PlainTable.from_records(info["ranks"]), "ranks"))
    parts.append(markdown_table(PlainTable.from_records([info["event_counts"]]), "events"))
    if info.get("recipe_outputs"):
        parts.append(markdown_table(PlainTable.from_records(info["recipe_outputs"]), "nsys recipe outputs"))
    if info.get("gpu_metric_files"):
        parts.append(markdown_table(PlainTable.from_records(info["gpu_metric_files"]), "sampled GPU metrics"))
    notes = _notes(info)
    if notes:
        parts.append("\n".join(f"- {markdown_text(line)}" for line in notes))
    print("\n\n".join(parts))


@click.command("info")
@output_options(unsupported={"csv": "the workspace info is several tables of different columns"})
def command(db: str, fmt: str) -> None:
    """Files, versions, ranks, GPUs, event counts, time span, warnings.

    Python: nsight_analyze.open(DB).info() (the JSON document)."""
    from ..api import Workspace

    info = Workspace(db).info()  # the tables only: no stored results needed
    if fmt == "json":
        print(to_json(info))
        return
    if fmt == "markdown":
        _markdown(info)
        return
    print_table(PlainTable.from_records(info["files"]), title="files")
    if len(info["jobs"]) > 1:
        echo(f"{len(info['jobs'])} jobs found: ranks of different jobs are never compared (docs/metrics.md)")
        print_table(PlainTable.from_records(info["jobs"]), title="jobs")
    elif info["jobs"]:
        echo(f"1 job: {info['jobs'][0]['label']}")
    print_table(PlainTable.from_records(info["ranks"]), title="ranks")
    print_table(PlainTable.from_records([info["event_counts"]]), title="events")
    if info["recipe_outputs"]:
        print_table(PlainTable.from_records(info["recipe_outputs"]), title="nsys recipe outputs")
    if info.get("gpu_metric_files"):
        gpu_files = PlainTable.from_records(info["gpu_metric_files"])
        print_table(gpu_files, title="sampled GPU metrics (nsys, DCGM)")
    for line in _notes(info):  # echo: wrapped to the terminal's width
        echo(line, hang="    ")
