"""The report's sections, each rendered from the report document (report_doc.ReportDocument).

Why one function per section: each can say on its own why its data is missing, and the page's
section ids (`data-section`) are a stable contract the browser test checks. The headline, built
from several results at once, has its own module (headline_section.py), as have the sections
"Communication by parallelism dimension" (comms_section.py) and the what-if (whatif_section.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from .definitions import DEFINITIONS
from .figures import (
    collective_skew,
    collective_waits,
    idle_causes,
    overlap_bars,
    partition_bars,
    rank_step_heatmap,
    timeline_layout,
    top_kernels,
)
from .html import esc, fmt, kpi, missing, notes, section, table
from .timeline import escaped

if TYPE_CHECKING:
    from ...report_doc.document import Part, ReportDocument, StepRange
    from ...report_doc.timeline import Timeline

SECTIONS = (
    ("headline", "Headline"),
    ("partition", "Time partition"),
    ("timeline", "Timeline"),
    ("heatmap", "Rank × step"),
    ("overlap", "Overlap & collectives"),
    ("comms-dimension", "Communication by parallelism dimension"),
    ("whatif", "What fixing each cause would buy"),
    ("kernels", "Kernels, gaps, launches"),
    ("capture", "Capture quality"),
    ("definitions", "Definitions"),
)
# Headers that say what a column holds where its name alone does not: memory is memory-bound
# kernels plus copies (memcpy / memset), shown apart beside it.
PARTITION_LABELS = {
    "memory_ns": "memory (kernels + copies)",
    "copies_total_ns": "copies incl. hidden",
}


def partition_table(columns: list[str]) -> list[tuple[str, str, str]]:
    """The partition table's (column, header, kind): rank, then the document's partition columns."""
    return [("rank", "rank", "")] + [
        (
            c,
            PARTITION_LABELS.get(c, c.removesuffix("_ns").replace("_", " ")),
            "pct" if c.endswith("pct") else "ns",
        )
        for c in columns
    ]


def partition(part: Part, figs: dict, steps: StepRange | None, columns: list[str]) -> str:
    if not part.ok:
        return section("partition", "Time partition per rank", missing(part.missing or ""))
    figs["partition"] = partition_bars(part.value)
    scope = f"steps {steps} summed per rank" if steps else "whole capture, the numbers of `summary`"
    body = figures_div("partition") + table(
        part.value, partition_table(columns), "partition-table", row_key="rank"
    )
    return section(
        "partition",
        "Time partition per rank",
        body,
        f"Exclusive parts of each rank's window ({scope}; same definitions as `summary`); "
        "hover a bar for exact nanoseconds.",
    )


def figures_div(fid: str) -> str:
    return f'<div class="figure" id="fig-{esc(fid)}" data-figure="{esc(fid)}"></div>'


def timeline(tl: Timeline, figs: dict) -> str:
    intro = (
        "All ranks on the aligned job timeline; drag to zoom, double-click to reset. "
        "Rows per rank: compute (other kernels in grey), memory (memory-bound kernels; copies and "
        "memsets in their own colour), comms, idle by cause."
    )
    if tl.mode == "empty":
        return section(
            "timeline", "Aligned timeline", missing("; ".join(tl.notes) or "no GPU operations"), intro
        )
    t0, t1 = tl.window or (0, 0)
    what = f"steps {', '.join(map(str, tl.steps_shown))}" if tl.steps_shown else "whole capture"
    layout = timeline_layout(
        len(tl.payload["ranks"]),
        tuple(tl.payload["rows"]),
        (t1 - t0) / 1e6,
        f"Aligned timeline: {what} ({(t1 - t0) / 1e6:,.3f} ms)",
    )
    figs["timeline"] = {"timeline": escaped(tl.payload), "layout": layout, "data": []}
    info = (
        f'<p class="intro" id="timeline-info" data-mode="{esc(tl.mode)}" data-ops="{tl.ops_in_window}" '
        f'data-steps="{esc(",".join(map(str, tl.steps_shown)))}" data-window-start-ns="{t0}" '
        f'data-window-end-ns="{t1}">Window: {esc(what)}, {tl.ops_in_window:,} GPU operations and idle '
        f"pieces; mode: {esc(tl.mode)}.</p>"
    )
    return section("timeline", "Aligned timeline", info + notes(tl.notes) + figures_div("timeline"), intro)


def heatmap(doc: ReportDocument, figs: dict) -> str:
    rs = doc.rank_step
    if not rs.ok:
        return section("heatmap", "Rank × step", missing(rs.missing or ""))
    if rs.value.empty:
        return section("heatmap", "Rank × step", missing("no step windows (no NVTX steps, none detected)"))
    figs["heatmap"] = rank_step_heatmap(rs.value)
    return section(
        "heatmap",
        "Rank × step",
        figures_div("heatmap"),
        "Each cell is one rank's step window (or its compute time, with the button); a straggler "
        "is a row that stays bright.",
    )


def overlap(doc: ReportDocument, part: Part, figs: dict) -> str:
    body = ["<h3>Per rank</h3>"]
    if part.ok:
        figs["overlap"] = overlap_bars(part.value)
        body.append(figures_div("overlap"))
    else:
        body.append(missing(part.missing or ""))
    body.append("<h3>Per collective</h3>")
    if doc.comm_overlap.ok and len(doc.comm_overlap.value):
        body.append(
            table(
                doc.comm_overlap.value,
                [
                    ("op", "operation", "text"),
                    ("operations", "operations (all ranks)", ""),
                    ("comms_ns", "comms time", "ns"),
                    ("exposed_ns", "exposed", "ns"),
                    ("exposed_wait_ns", "exposed while waiting for the last rank", "ns"),
                    ("overlap_pct", "overlap", "pct"),
                ],
                "comm-overlap-table",
            )
        )
    else:
        body.append(missing(doc.comm_overlap.missing or "no communication operations"))
    if doc.collectives.ok and len(doc.collectives.value):
        c = doc.collectives.value
        per = (
            c.groupby(["op", "comm"], sort=True)
            .agg(
                instances=("coll_id", "count"),
                matched=("ranks", lambda r: int((r > 1).sum())),
                ranks=("expected_ranks", "max"),
                transfer_ns_median=("transfer_ns", "median"),
                start_skew_ns_median=("start_skew_ns", "median"),
                start_skew_ns_max=("start_skew_ns", "max"),
                busbw_gbps_median=("busbw_gbps", "median"),
                last_rank_mode=("last_rank", lambda r: r.mode().iloc[0] if len(r.dropna()) else None),
            )
            .reset_index()
        )
        body.append(
            table(
                per,
                [
                    ("op", "operation", "text"),
                    ("comm", "communicator", "text"),
                    ("instances", "instances", ""),
                    ("matched", "matched", ""),
                    ("ranks", "ranks", ""),
                    ("transfer_ns_median", "transfer (median)", "ns"),
                    ("start_skew_ns_median", "arrival skew (median)", "ns"),
                    ("start_skew_ns_max", "arrival skew (max)", "ns"),
                    ("busbw_gbps_median", "bus bw GB/s (median)", ""),
                    ("last_rank_mode", "most often last", ""),
                ],
                "collectives-table",
            )
        )
        if int((c["ranks"] > 1).sum()):
            figs["skew"] = collective_skew(c)
            body.append(figures_div("skew"))
    else:
        body.append(missing(doc.collectives.missing or "no NCCL collectives in the capture"))
    body.append("<h3>Collective waits per rank</h3>")
    if doc.rank_rollup.ok and len(doc.rank_rollup.value):
        r = doc.rank_rollup.value
        figs["waits"] = collective_waits(r)
        body.append(figures_div("waits"))
        body.append(
            table(
                r,
                [
                    ("rank", "rank", ""),
                    ("host", "host", "text"),
                    ("collectives", "collectives", ""),
                    ("unmatched", "unmatched", ""),
                    ("wait_suffered_ns", "wait suffered", "ns"),
                    ("wait_caused_ns", "wait caused", "ns"),
                    ("times_last", "times last", ""),
                    ("times_slowest", "steps slowest", ""),
                    ("straggler", "straggler", ""),
                ],
                "rank-rollup-table",
                row_key="rank",
            )
        )
    else:
        body.append(missing(doc.rank_rollup.missing or "no ranks"))
    return section("overlap", "Compute / communication overlap, collectives", "".join(body))


def kernels(doc: ReportDocument, figs: dict) -> str:
    body = ["<h3>Top kernels</h3>"]
    if doc.top_kernels.ok and doc.top_kernels.value:
        top = pd.DataFrame(doc.top_kernels.value)
        top["avg_ns"] = top["total_ns"] / top["instances"].where(top["instances"] > 0)
        figs["kernels"] = top_kernels(top.head(15))
        body.append(figures_div("kernels"))
        body.append(
            table(
                top,
                [
                    ("name", "kernel", "text"),
                    ("category", "category", "text"),
                    ("instances", "count", ""),
                    ("total_ns", "time", "ns"),
                    ("pct", "share of kernel time", "pct"),
                    ("avg_ns", "average", "ns"),
                ],
                "kernels-table",
            )
        )
    else:
        body.append(missing(doc.top_kernels.missing or "no kernels"))
    body.append("<h3>Idle gaps by cause</h3>")
    if doc.gaps.ok and len(doc.gaps.value):
        figs["gaps"] = idle_causes(doc.gaps.value)
        body.append(figures_div("gaps"))
    else:
        body.append(missing(doc.gaps.missing or "no idle gaps"))
    body.append("<h3>Longest idle pieces</h3>")
    if doc.longest_gaps.ok and len(doc.longest_gaps.value):
        body.append(
            table(
                doc.longest_gaps.value,
                [
                    ("rank", "rank", ""),
                    ("step", "step", ""),
                    ("cause", "cause", "text"),
                    ("duration_ns", "duration", "ns"),
                    ("host_activity", "what the host was doing", "text"),
                ],
                "longest-gaps-table",
            )
        )
    else:
        body.append(missing(doc.longest_gaps.missing or "no idle gaps"))
    body.append("<h3>Launch statistics</h3>")
    body.append(_generic(doc.launch_stats, "launch-table"))
    body.append("<h3>Synchronising calls (costliest)</h3>")
    if doc.sync_calls.ok and len(doc.sync_calls.value) and "gpu_idle_ns" in doc.sync_calls.value:
        sc = doc.sync_calls.value.sort_values("gpu_idle_ns", ascending=False)
        body.append(
            table(
                sc,
                [
                    ("rank", "rank", ""),
                    ("name", "call", "text"),
                    ("reason", "reason", "text"),
                    ("duration_ns", "duration", "ns"),
                    ("gpu_idle_ns", "GPU idle during", "ns"),
                    ("sync_stall_ns", "sync stall", "ns"),
                ],
                "sync-table",
                max_rows=15,
            )
        )
    else:
        body.append(_generic(doc.sync_calls, "sync-table", 15))
    body.append("<h3>Memory operations (copies and memsets)</h3>")
    body.append(_generic(doc.memop_summary, "memops-table", 30))
    return section("kernels", "Top kernels, idle gaps, launches", "".join(body))


def _generic(part: Part, tid: str, max_rows: int = 64) -> str:
    if not part.ok:
        return missing(part.missing or "")
    df = part.value
    if df.empty:
        return "<p>None.</p>"
    cols = [(c, c, "ns" if c.endswith("_ns") else "pct" if c.endswith("pct") else "") for c in df.columns]
    return table(df, cols, tid, max_rows=max_rows)


def capture(doc: ReportDocument) -> str:
    body = []
    if not doc.info.ok:
        return section("capture", "Capture quality", missing(doc.info.missing or ""))
    info = doc.info.value
    files = pd.DataFrame(info.get("files") or [])
    ranks = pd.DataFrame(info.get("ranks") or [])
    versions = sorted({str(v) for v in files.get("nsys_version", pd.Series(dtype=object)).dropna()})
    missing_ranks = [w for w in info.get("warnings", []) if "ranks missing" in w]
    cards = [
        kpi("files", "files", len(files), f"{len(files):,}"),
        kpi(
            "ranks found",
            "ranks_found",
            len(ranks),
            f"{len(ranks):,}",
            "missing: see warnings" if missing_ranks else "none missing",
        ),
        kpi("nsys versions", "nsys_versions", ", ".join(versions), ", ".join(versions) or "unknown"),
    ]
    if doc.alignment.ok and len(doc.alignment.value):
        worst = doc.alignment.value["residual_p95_ns"].max()
        cards.append(
            kpi("alignment residual p95", "alignment_residual_p95_ns", worst, fmt(worst, "ns"), "worst host")
        )
    body.append(f'<div class="kpis">{"".join(cards)}</div>')
    body.append("<h3>Warnings</h3>")
    warn = list(info.get("warnings") or [])
    body.append(notes(warn) if warn else "<p>None.</p>")
    if info.get("skipped"):
        body.append("<h3>Not loaded</h3>" + notes(list(info["skipped"])))
    body.append("<h3>Files</h3>")
    body.append(table(files, [(c, c, "text") for c in files.columns], "files-table"))
    body.append("<h3>Ranks</h3>")
    body.append(
        table(
            ranks,
            [(c, c, "ns" if c.endswith("_ns") else "") for c in ranks.columns],
            "ranks-table",
            row_key="rank",
        )
    )
    body.append("<h3>Clock alignment</h3>")
    body.append(_generic(doc.alignment, "alignment-table"))
    body.append("<h3>Captured environment (allow-listed)</h3>")
    if doc.env.ok and len(doc.env.value):
        env = (
            doc.env.value.groupby("name", sort=True)
            .agg(
                files=("file_id", "nunique"),
                values=("value", lambda v: ", ".join(sorted(set(map(str, v)))[:8])),
            )
            .reset_index()
        )
        body.append(
            table(
                env,
                [("name", "name", "text"), ("files", "files", ""), ("values", "values", "text")],
                "env-table",
            )
        )
    else:
        body.append(missing(doc.env.missing) if not doc.env.ok else "<p>None captured.</p>")
    return section(
        "capture",
        "Capture quality",
        "".join(body),
        "What the numbers rest on: which files and ranks were found, exporter versions, how well "
        "the ranks' clocks could be aligned, and what was missing.",
    )


def definitions() -> str:
    items = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in DEFINITIONS)
    return section(
        "definitions",
        "Definitions",
        f'<dl class="defs">{items}</dl>',
        "All times are integer nanoseconds in the data; the full contract is docs/metrics.md.",
    )
