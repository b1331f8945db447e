"""`nsight-analyze diagnose`: ranked findings with evidence, recoverable time, fixes and trade-offs."""

from __future__ import annotations

import sys

import click
import pandas as pd

from ..clihelp import db_option, format_option
from ..diagnose import SEVERITIES, THRESHOLDS, Finding, diagnose, findings_json
from ..errors import UserError
from ..render import print_table, table_text, to_json
from ..workspace import open_workspace

PREVIEW_ROWS = 5


def _ms(ns: int | None) -> str:
    return "n/a" if ns is None else f"{ns / 1e6:,.3f}"


def _short_list(values: list[int], limit: int = 12) -> str:
    if not values:
        return ""
    text = ",".join(str(v) for v in values[:limit])
    return text + (f",... ({len(values)})" if len(values) > limit else "")


def _overview(findings: list[Finding]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "#": f.rank,
                "severity": f.severity,
                "id": f.id,
                "recoverable ms/step": _ms(f.recoverable_ns_per_step),
                "% of step": "" if f.recoverable_pct is None else f"{f.recoverable_pct:.2f}",
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


def _text(findings: list[Finding], evidence_rows: int) -> str:
    lines = []
    for f in findings:
        lines.append("")
        lines.append(f"[{f.rank}] {f.severity.upper()} {f.id}: {f.title}")
        lines.append(f"    {f.summary}")
        if f.ranks or f.steps:
            lines.append(
                f"    ranks: {_short_list(f.ranks, 32) or '-'}   steps: {_short_list(f.steps, 32) or '-'}"
            )
        lines.append(
            f"    recoverable: {_ms(f.recoverable_ns_per_step)} ms/step (upper bound; {f.recoverable_method})"
        )
        for s in f.signals:
            lines.append(f"    signal [{s.verdict}] {s.name}: {s.value} {s.unit} - {s.note}")
        for fix in f.fixes:
            lines.append(f"    fix: {fix.action} (trade-off: {fix.trade_off})")
        for ev in f.evidence:
            lines.append(f"    evidence: {ev.name} ({ev.total_rows} rows) - re-run: {ev.sql}")
            if ev.rows and evidence_rows:
                table = table_text(pd.DataFrame(ev.rows[:evidence_rows], columns=ev.columns))
                lines.extend("        " + line for line in table.splitlines())
    return "\n".join(lines)


def _markdown(findings: list[Finding], doc: dict, evidence_rows: int) -> str:
    out = ["# nsight-analyze diagnose", ""]
    job = doc["job"]
    out.append(
        f"{job.get('ranks')} rank(s), {job.get('steps')} step(s), "
        f"mean step {_ms(job.get('mean_step_ns'))} ms. "
        "Findings are ranked by recoverable time per step (an upper bound); capture notes come first."
    )
    out.append("")
    if not findings:
        out.append("No findings above the thresholds.")
        return "\n".join(out)
    out.append("| # | severity | finding | recoverable ms/step | % of step | ranks | steps |")
    out.append("|---|---|---|---|---|---|---|")
    for f in findings:
        pct = "" if f.recoverable_pct is None else f"{f.recoverable_pct:.2f}"
        out.append(
            f"| {f.rank} | {f.severity} | {f.title} (`{f.id}`) | {_ms(f.recoverable_ns_per_step)} | {pct} "
            f"| {_short_list(f.ranks)} | {_short_list(f.steps)} |"
        )
    for f in findings:
        out += ["", f"## {f.rank}. {f.title} (`{f.id}`, {f.severity})", "", f.summary, ""]
        out.append(f"**Recoverable:** {_ms(f.recoverable_ns_per_step)} ms/step. {f.recoverable_method}.")
        if f.signals:
            out += ["", "**Signals checked:**", ""]
            out += [f"- *{s.verdict}* {s.name}: {s.value} {s.unit} - {s.note}" for s in f.signals]
        if f.fixes:
            out += ["", "**Fixes (trade-off):**", ""]
            out += [f"- {x.action} (*{x.trade_off}*)" for x in f.fixes]
        for ev in f.evidence:
            out += [
                "",
                f"**Evidence: {ev.name}** ({ev.total_rows} rows). {ev.description}",
                "",
                "```sql",
                ev.sql,
                "```",
            ]
            if ev.rows and evidence_rows:
                df = pd.DataFrame(ev.rows[:evidence_rows], columns=ev.columns)
                out += ["", "| " + " | ".join(ev.columns) + " |", "|" + "---|" * len(ev.columns)]
                out += [
                    "| " + " | ".join("" if v is None else str(v) for v in row) + " |"
                    for row in df.astype(object).itertuples(index=False)
                ]
    return "\n".join(out)


@click.command("diagnose")
@db_option
@format_option("table", "json", "markdown")
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
    help="Exit with status 1 when a finding of this severity or worse exists (for CI).",
)
def command(
    db: str,
    fmt: str,
    thresholds: tuple[str, ...],
    list_thresholds: bool,
    evidence_rows: int,
    fail_on: str | None,
) -> None:
    """Ranked findings: evidence (with its SQL), recoverable time per step, fixes and their trade-offs."""
    if list_thresholds:
        df = pd.DataFrame(
            [{"name": k, "default": v.default, "meaning": v.doc} for k, v in THRESHOLDS.items()]
        )
        if fmt == "json":
            print(to_json({k: {"default": v.default, "meaning": v.doc} for k, v in THRESHOLDS.items()}))
        else:
            print_table(df, title="thresholds")
        return
    overrides = _parse_thresholds(thresholds)
    con = open_workspace(db, read_only=True, must_exist=True)
    try:
        findings = diagnose(con, overrides)
    finally:
        con.close()
    doc = findings_json(findings)
    if fmt == "json":
        print(to_json(doc))
    elif fmt == "markdown":
        print(_markdown(findings, doc, evidence_rows))
    else:
        job = doc["job"]
        print(
            f"{job.get('ranks')} rank(s), {job.get('steps')} step(s), "
            f"mean step {_ms(job.get('mean_step_ns'))} ms; "
            "ranked by recoverable time per step (upper bound), capture notes first"
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
