"""`nsight-analyze diagnose`: ranked findings with evidence, recoverable time, fixes and trade-offs."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from ..api import Workspace
from ..api.tables import findings_table
from ..clihelp import gpu_option, job_option, output_options, step_pattern_option
from ..diagnose import SEVERITIES, THRESHOLDS, Finding
from ..errors import NO_DATA_EXIT, UserError
from ..render.data import to_json
from ..render.markdown import code_block, markdown_cell, markdown_text
from ..render.output import emit
from ..render.table import PlainTable
from ..render.terminal import print_table, table_text, terminal_width, wrap, wrap_sql
from ..render.units import UNKNOWN, format_duration, format_pct, format_quantity, format_value

PREVIEW_ROWS = 5


def _short_list(values: list[int], limit: int = 12) -> str:
    if not values:
        return ""
    text = ", ".join(str(v) for v in values[:limit])
    return text + (f", … ({len(values)} in all)" if len(values) > limit else "")


def _headline(job: dict) -> str:
    return (
        f"{format_value(job.get('ranks'))} rank(s), {format_value(job.get('steps'))} step(s), "
        f"mean step {format_duration(job.get('mean_step_ns'))}"
    )


def _overview(findings: Sequence[Finding]) -> PlainTable:
    return PlainTable.from_records(
        [
            {
                "#": f.rank,
                "severity": f.severity,
                "id": f.id,
                "recoverable per step": format_duration(f.recoverable_ns_per_step),
                "% of step": format_pct(f.recoverable_pct),
                "ranks": _short_list(f.ranks),
                "steps": _short_list(f.steps),
                "title": f.title,
            }
            for f in findings
        ]
    )


def _parse_thresholds(items: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise UserError(
                f"bad --threshold {item!r}: use NAME=VALUE, e.g. --threshold gpu_starv_gap_ms=100"
            )
        out[name.strip()] = value.strip()
    return out


def _text(findings: Sequence[Finding], evidence_rows: int, width: int | None = None) -> str:
    """The findings as text wrapped to the terminal; evidence tables indented and fitted."""
    width = width or terminal_width()

    def para(text: str, indent: str = "    ", hang: str = "      ") -> str:
        return wrap(text, width=width, indent=indent, hang=hang)

    lines = []
    for f in findings:
        lines.append("")
        lines.append(para(f"[{f.rank}] {f.severity.upper()} {f.id}: {f.title}", indent="", hang="    "))
        lines.append(para(f.summary, hang="    "))
        if f.ranks or f.steps:
            ranks, steps = _short_list(f.ranks, 32) or UNKNOWN, _short_list(f.steps, 32) or UNKNOWN
            lines.append(para(f"ranks: {ranks}   steps: {steps}"))
        lines.append(
            para(
                f"recoverable per step: {format_duration(f.recoverable_ns_per_step)} "
                f"(upper bound; {f.recoverable_method})"
            )
        )
        for s in f.signals:
            value = format_quantity(s.value, s.unit)
            lines.append(para(f"signal [{s.verdict}] {s.name}: {value} - {s.note}"))
        for fix in f.fixes:
            lines.append(para(f"fix: {fix.action} (trade-off: {fix.trade_off})"))
        for ev in f.evidence:
            lines.append(para(f"evidence: {ev.name} ({ev.total_rows:,} rows) - re-run:"))
            lines.append(wrap_sql(ev.sql, width=width, indent="      ", hang="        "))
            if ev.rows and evidence_rows:
                table = table_text(
                    PlainTable.from_records(ev.rows[:evidence_rows], ev.columns), width=width - 8
                )
                lines.extend(("        " + line).rstrip() for line in table.splitlines())
    return "\n".join(lines)


def _markdown(findings: Sequence[Finding], doc: dict, evidence_rows: int) -> str:
    """Markdown for CI: every text that can hold trace text (titles, summaries, signals, fixes,
    evidence) goes through `render.markdown`, so a kernel or NVTX name stays literal text."""
    md = markdown_text
    out = ["# nsight-analyze diagnose", ""]
    job = doc["job"]
    out.append(
        f"{md(_headline(job))}. "
        "Findings are ranked by recoverable time per step (an upper bound); capture notes come first."
    )
    out.append("")
    if not findings:
        out.append("No findings above the thresholds.")
        return "\n".join(out)
    out.append("| # | severity | finding | recoverable per step | % of step | ranks | steps |")
    out.append("|---|---|---|---|---|---|---|")
    for f in findings:
        out.append(
            f"| {f.rank} | {md(f.severity)} | {md(f.title)} (`{md(f.id)}`) "
            f"| {format_duration(f.recoverable_ns_per_step)} | {format_pct(f.recoverable_pct)} "
            f"| {_short_list(f.ranks)} | {_short_list(f.steps)} |"
        )
    for f in findings:
        out += ["", f"## {f.rank}. {md(f.title)} (`{md(f.id)}`, {md(f.severity)})", "", md(f.summary), ""]
        out.append(
            f"**Recoverable:** {format_duration(f.recoverable_ns_per_step)} per step. "
            f"{md(f.recoverable_method)}."
        )
        if f.signals:
            out += ["", "**Signals checked:**", ""]
            out += [
                f"- *{md(s.verdict)}* {md(s.name)}: {md(format_quantity(s.value, s.unit))} - {md(s.note)}"
                for s in f.signals
            ]
        if f.fixes:
            out += ["", "**Fixes (trade-off):**", ""]
            out += [f"- {md(x.action)} (*{md(x.trade_off)}*)" for x in f.fixes]
        for ev in f.evidence:
            out += [
                "",
                f"**Evidence: {md(ev.name)}** ({ev.total_rows} rows). {md(ev.description)}",
                "",
                code_block(ev.sql, "sql"),
            ]
            if ev.rows and evidence_rows:
                out += ["", "| " + " | ".join(markdown_cell(c) for c in ev.columns) + " |"]
                out.append("|" + "---|" * len(ev.columns))
                for row in PlainTable.from_records(ev.rows[:evidence_rows], ev.columns).rows:
                    cells = [markdown_cell(v, c) for v, c in zip(row, ev.columns, strict=True)]
                    out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


@click.command("diagnose")
@output_options()
@click.option(
    "--threshold",
    "thresholds",
    multiple=True,
    metavar="NAME=VALUE",
    help="Override a threshold (repeatable); see --list-thresholds and docs/diagnose.md.",
)
@click.option("--list-thresholds", is_flag=True, help="Print the thresholds, their defaults and meaning.")
@click.option(
    "--evidence-rows",
    type=click.IntRange(min=0),
    default=PREVIEW_ROWS,
    show_default=True,
    help="Evidence rows printed per table (table/markdown; JSON keeps evidence_rows rows).",
)
@click.option(
    "--fail-on",
    type=click.Choice(SEVERITIES[:3]),
    default=None,
    help="Exit with status 1 when a finding of this severity or worse exists (for CI). "
    f"A workspace without GPU data always exits {NO_DATA_EXIT}.",
)
@gpu_option
@job_option
@step_pattern_option
def command(
    db: str,
    fmt: str,
    thresholds: tuple[str, ...],
    list_thresholds: bool,
    evidence_rows: int,
    fail_on: str | None,
    gpu: str | None,
    job: int | None,
    step_pattern: str | None,
) -> None:
    """Ranked findings: evidence (with its SQL), recoverable time per step, fixes and their trade-offs.

    CSV: one row per finding (rank, severity, id, title, recoverable_ns_per_step, recoverable_pct,
    ranks, steps, summary). A workspace of several jobs is diagnosed one job at a time (--job N,
    else the one with the most ranks), said in a first line (JSON: job.scope).
    Python: nsight_analyze.open(DB).findings(), .diagnose(), .diagnosis().
    """
    if list_thresholds:
        df = PlainTable.from_records(
            [{"name": k, "default": v.default, "meaning": v.doc} for k, v in THRESHOLDS.items()]
        )
        if fmt == "json":
            print(to_json({k: {"default": v.default, "meaning": v.doc} for k, v in THRESHOLDS.items()}))
        else:
            emit(df, fmt, title="thresholds")
        return
    overrides = _parse_thresholds(thresholds)
    from .summary import apply_step_pattern

    apply_step_pattern(db, step_pattern)
    # Bad input (exit 2) is said before "no data"; no GPU operation: exit NO_DATA_EXIT with one
    # line, never "no findings" (a CI gate must not pass). --gpu states the model for the HFU rule.
    ws = Workspace(db, job=job)
    findings = ws.diagnose(overrides, gpu=gpu)
    doc = ws.diagnosis_of(findings)
    note = ws.scope.note() if ws.scope else None
    if note and fmt == "csv":  # the CSV stays one table
        print(note, file=sys.stderr)
    elif note and fmt == "table":
        print(wrap(note))
    if fmt == "json":
        print(to_json(doc))
    elif fmt == "csv":
        emit(findings_table(findings), "csv")
    elif fmt == "markdown":
        text = _markdown(findings, doc, evidence_rows)
        head = "# nsight-analyze diagnose\n"  # the job shown, right under the title
        print(text.replace(head, f"{head}\n{markdown_text(note)}\n", 1) if note else text)
    else:
        job = doc["job"]
        print(
            wrap(
                f"{_headline(job)}; ranked by recoverable time per step (upper bound), capture notes first",
                hang="    ",
            )
        )
        if findings:
            print_table(_overview(findings), title="findings")
            print(_text(findings, evidence_rows))
        else:
            print("no findings above the thresholds")
        for err in job.get("rule_errors", []):
            print(f"warning: rule failed: {err}", file=sys.stderr)
    if fail_on:
        worst = SEVERITIES.index(fail_on)
        if any(SEVERITIES.index(f.severity) <= worst for f in findings):
            sys.exit(1)
