"""The `synchronisation` finding: synchronising API calls and host-blocking copies (nsys
cuda-sync-api / -memcpy / -memset parity).

Why a module of its own: one finding, one home; it reads the synchronising calls and copies
themselves (diag_sync_api_calls, diag_sync_copies) besides the sync-stall idle cause it shares with
the other idle rules (rules/_idle.py).
"""

from __future__ import annotations

from ..store.query_layer import statements
from ._common import step_metrics
from ._idle import cause_totals, gap_evidence, per_step_evidence
from .base import Ctx, Finding, Fix, Signal
from .declare import Cause, Doc, Threshold, finding

SQL = statements("rules/synchronisation")


@finding(
    "excessive-sync",
    doc=Doc(
        what=(
            "synchronising calls, synchronous / pageable copies and memsets (not NCCL copy-engine "
            "collectives' copies)"
        ),
        source=(
            "`diag_sync_api_calls`, `diag_sync_copies()` (nsys cuda-sync-api, cuda-sync-memcpy, "
            "cuda-async-memcpy, cuda-sync-memset parity), sync_stall_ns"
        ),
        recoverable="worst rank's sync_stall_ns; always reported when nsys would list a call",
    ),
    thresholds={
        "sync_stall_min_pct": Threshold(
            0.0,
            (
                "report sync stalls when they are > this % of the mean step (nsys-flagged calls are always "
                "reported)"
            ),
        ),
        "sync_htod_min_bytes": Threshold(
            65536.0,
            "synchronous HtoD copies of at most this many bytes are not flagged (nsys cuda-sync-memcpy)",
        ),
    },
    reads=(
        "diag_step_causes",
        "diag_sync_api_calls",
        "diag_sync_copies",
        "gaps",
        "steps",
        "sync_calls",
        "time_partition",
    ),
    whatif="no-sync-stalls",
    causes=(
        Cause(
            "sync-stall",
            ("excessive-sync",),
            "GPU idle while the host is blocked in a synchronising call",
            "ns_per_step",
            threshold="sync_stall_min_pct",
            measure="sync_stall_ns",
        ),
    ),
)
def synchronisation(ctx: Ctx) -> list[Finding]:
    """Synchronising API calls and host-blocking copies (nsys cuda-sync-api / -memcpy / -memset parity)."""
    if not ctx.has("diag_sync_api_calls", "diag_sync_copies"):
        return []
    htod = int(ctx.th["sync_htod_min_bytes"])
    calls = ctx.evidence(
        "cuda-sync-api",
        "cudaDeviceSynchronize / cudaStreamSynchronize calls, longest first (nsys cuda-sync-api).",
        SQL["sync_api_calls"],
    )
    copies = {}
    for rule, text in (
        (
            "cuda-sync-memcpy",
            f"synchronous memcpy (not DtoD, not HtoD <= {htod} B), longest first (nsys cuda-sync-memcpy)",
        ),
        (
            "cuda-async-memcpy",
            "cudaMemcpy*Async on pageable memory: effectively synchronous (nsys cuda-async-memcpy)",
        ),
        ("cuda-sync-memset", "synchronous memset on pinned/managed memory (nsys cuda-sync-memset)"),
    ):
        copies[rule] = ctx.evidence(rule, text, SQL.sql("sync_copies", htod=htod, rule=rule))
    flagged = calls.total_rows + sum(e.total_rows for e in copies.values())
    total, steps, ranks = (0, [], [])
    if ctx.has("diag_step_causes"):
        total, steps, ranks = cause_totals(ctx, "sync_stall", 0.0)
    rec = ctx.per_step(total)
    if flagged == 0 and (ctx.pct(rec) or 0) <= ctx.th["sync_stall_min_pct"]:
        return []
    ev = []
    if ctx.has("diag_step_causes") and total:
        ev.append(per_step_evidence(ctx, "sync_stall", "sync stall"))
    ev += [e for e in [calls, *copies.values()] if e.total_rows]
    if ctx.has("gaps") and total:
        ev.append(gap_evidence(ctx, "'sync_stall'", "sync-stall"))
    flagged_ranks = ctx.column(SQL.sql("flagged_ranks", htod=htod))
    ranks = sorted(set(ranks) | {int(r) for r in flagged_ranks})
    # every synchronising call, CUDA or HIP, explicit or a synchronous copy (sync_calls,
    # docs/metrics.md): the nsys-parity lists above know only cuda* names, so on ROCm they are empty
    listed = "sync_calls" if ctx.has("sync_calls") else "diag_sync_api_calls"
    blocked = ctx.scalar(SQL.sql("blocked_ns", calls=listed)) or 0
    n_calls = ctx.scalar(SQL.sql("call_count", calls=listed)) if ctx.has("sync_calls") else calls.total_rows
    per_step_calls = (n_calls or 0) / max(ctx.n_steps, 1) / max(ctx.n_ranks, 1)
    signals = [
        Signal(
            "GPU idle caused by syncs",
            ctx.pct(rec),
            "% of step",
            "supports" if rec else "against",
            "idle time that a synchronising call explains (sync_stall): what removing the syncs can recover"
            if rec
            else "the syncs did not leave the GPU idle: the host waited for work that "
            "was already queued, so they cost host time, not GPU time",
        ),
        Signal(
            "host time blocked in sync calls",
            blocked,
            "ns",
            "neutral",
            "host waiting is not GPU idle: it matters only when the host then cannot launch ahead",
        ),
        Signal(
            "sync calls per rank and step",
            round(per_step_calls, 2),
            "calls",
            "supports" if per_step_calls > 1 else "neutral",
            "more than one blocking sync per step usually means .item()/.cpu()/print in the training loop",
        ),
        Signal(
            "host-blocking copies",
            sum(e.total_rows for e in copies.values()),
            "copies",
            "supports" if any(e.total_rows for e in copies.values()) else "neutral",
            "synchronous or pageable copies block the launching thread like a sync",
        ),
    ]
    names = ", ".join(
        f"{k}: {v.total_rows}" for k, v in [("cuda-sync-api", calls), *copies.items()] if v.total_rows
    )
    listed = f"Synchronising calls and host-blocking copies ({names or 'none flagged by nsys rules'})"
    # reported whenever nsys's rules list a call (parity), but said as it is when none stalled
    title, summary = (
        ("Synchronisation stalls the GPU", f"{listed} leave the GPU idle {rec / 1e6:.3f} ms per step "
         f"({ctx.pct(rec)} % of the mean step).")
        if rec
        else ("Synchronising calls that did not stall the GPU", f"{listed} left the GPU idle for no "
              "measured time: they cost host time only, and matter where the host then cannot launch ahead.")
    )  # fmt: skip
    return [
        ctx.finding(
            id="excessive-sync",
            title=title,
            kind="performance",
            summary=summary,
            ranks=ranks,
            steps=steps,
            recoverable_ns_per_step=rec,
            recoverable_method="sum over steps of the worst rank's sync_stall_ns (GPU idle while the "
            "host was "
            "blocked in a synchronising call, time_partition) / steps",
            metrics={
                "sync_stall_ns_total": total,
                "sync_api_calls": calls.total_rows,
                **{k.replace("-", "_"): v.total_rows for k, v in copies.items()},
                **step_metrics(ctx, steps, rec),
            },
            evidence=ev,
            signals=signals,
            fixes=[
                Fix(
                    "Remove .item(), .cpu(), print(tensor) and explicit synchronize() from the step; "
                    "log every N steps",
                    "metrics and loss values are seen less often / later",
                ),
                Fix(
                    "Copy with pinned host buffers and non_blocking=True",
                    "pinned memory is limited; the result must not be read before an event says it is ready",
                ),
                Fix(
                    "Replace device-wide syncs with CUDA events / stream waits",
                    "ordering has to be reasoned about explicitly; wrong placement gives races",
                ),
                Fix(
                    "Find hidden syncs with torch.cuda.set_sync_debug_mode('warn')",
                    "debug mode slows the run",
                ),
            ],
        )
    ]
