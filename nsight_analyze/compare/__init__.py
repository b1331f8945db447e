"""Compare two runs (before/after): what changed, whether it is real, and a CI gate.

Why one library function: the terminal, markdown, JSON (CI) and HTML outputs all render the
same `compare()` dict, so a verdict means one thing everywhere (docs/compare.md).

How: both workspaces are ATTACHed read-only to one in-memory DuckDB. Each side's stored analysis
results (time_partition, steps, imbalance, rank rollup) are read in place through temp views of one
name per side (before_tp, after_tp, ...); every comparison (partition, kernels, collectives, work
rate) is SQL across the two catalogs. The per-instance work was done per rank at analysis time:
kernel durations counted per kind and distinct duration (kernel_kinds, kernel_duration_counts: the
rank tests' ranks and ties) and each kind's shares of the window and its cuts
(kernel_window_shares: the work rate), so a comparison reads a few rows per kind, not the kernels
(which it reads only for other trims, or a workspace without those tables). Python only does the
statistics on small inputs (numpy, scipy.stats' arithmetic): on the step-time samples (a few
hundred numbers) a seeded percentile bootstrap of the relative change of the median and a
Mann-Whitney U test, and the p-values of the per-kernel rank statistics SQL computed.

The verdict has a basis (docs/compare.md "Verdict"): step times when both runs have step
windows; otherwise work per unit of time (the kernels both runs launch, valued at BEFORE's mean
duration, per ns of capture window), because a fixed-length capture has no step time to compare.
Kernels are faster or slower by their per-instance durations, never by their count or total
time. Findings are matched by the cause they measure (CAUSES), not by their id.

One module per job; this one is the public API (`compare`, and `compare_prepared` for callers
that opened the workspaces themselves) and the order of the work (`_run`):

    settings.py   named defaults (DEFAULTS), resolve_settings, the JSON's vocabularies
    sides.py      inputs: workspaces or ingested traces; each side's views of its stored results
    setup.py      each run's setup (GPU, world size, versions, precision) and its differences;
                  rank pairs (--ranks, one rank each) and AFTER's results under BEFORE's numbers
    stats.py      the statistics (scipy.stats' in numpy): bootstrap, Mann-Whitney, rank p-values
    step_time.py  step times: the slowest rank's and every rank's, compared
    runs.py       partition per step window, step counts, imbalance, side by side
    kernels.py    kernels and collectives matched, faster/slower by per-instance durations
    work_rate.py  work per unit of time (the basis without steps)
    findings.py   findings matched by cause, magnitudes and change status
    verdict.py    verdict, its basis, the ranks it names, its reason, the CI gate

`import nsight_analyze as na; na.compare(...)` calls api.compare: nsight_analyze/__init__.py
makes this package callable (it is also a submodule named `compare`).
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import duckdb

from ..errors import NoData, UserError
from ..no_data import held_instead
from ..store.duck import bound_memory, offline, on_own_cursor, plain_records
from ..store.query_layer import statements
from .findings import CAUSES, CHANGES, Cause, _findings_diff, _measures, cause_of  # noqa: F401
from .kernels import _collectives, _kernels
from .runs import _imbalance, _n_steps, _partition
from .settings import (  # noqa: F401
    COMPANIONS,
    CONFIG,
    DEFAULTS,
    MEMORY,
    PARTS,
    SCHEMA,
    SIDES,
    STATUSES,
    TRIM_LEVELS,
    resolve_settings,
)
from .setup import check_side, pair_ranks, parse_rank_map, relabel, setup_changes, setup_line, side_setup
from .sides import _findings, _mfu, _side_views, is_workspace, workspaces
from .stats import compare_samples, mann_whitney_p  # noqa: F401
from .step_time import _step_windows, step_time_comparison
from .verdict import _basis, _reason, _suspects, gate, rate_verdict, verdict_of  # noqa: F401
from .work_rate import _work_rate

SQL = statements("compare/compare")


def compare(
    before: str | Path,
    after: str | Path,
    *,
    settings: dict[str, Any] | None = None,
    findings: bool = True,
    model_flops_per_step: float | None = None,
    fail_on_regression_pct: float | None = None,
    before_job: int | None = None,
    after_job: int | None = None,
    ranks: dict[int, int] | str | None = None,
) -> dict[str, Any]:
    """Compare two runs (workspaces or trace folders/files); the stable JSON of docs/compare.md.
    An input holding several jobs is compared as one: `before_job`/`after_job`, else its largest.
    `ranks`: BEFORE's rank -> AFTER's rank to compare ({3: 1} or "3=1,4=0"; setup.py), else
    ranks are matched by number (one rank each, of different numbers: those two)."""
    resolve_settings(settings)  # a bad setting fails before any trace is ingested
    parse_rank_map(ranks)  # so does a malformed --ranks
    with workspaces(before, after, (before_job, after_job)) as (db_b, db_a, notes):
        return compare_prepared(
            db_b,
            db_a,
            notes,
            settings=settings,
            findings=findings,
            model_flops_per_step=model_flops_per_step,
            fail_on_regression_pct=fail_on_regression_pct,
            paths=(before, after),
            ranks=ranks,
        )


def compare_prepared(
    db_b: Path,
    db_a: Path,
    notes: list[str],
    *,
    settings: dict[str, Any] | None = None,
    findings: bool = True,
    model_flops_per_step: float | None = None,
    fail_on_regression_pct: float | None = None,
    paths: tuple[str | Path, str | Path] | None = None,
    ranks: dict[int, int] | str | None = None,
) -> dict[str, Any]:
    """compare() of the two workspaces `workspaces()` yielded (with its notes): what the command
    calls inside its own `workspaces()`, so that a workspace is opened, and its stored results
    checked, once per comparison and not again by compare(). `paths`: the inputs as given (the
    runs' `input`; default the workspaces). `ranks`: as compare()'s."""
    cfg = resolve_settings(settings)
    rank_map = parse_rank_map(ranks)
    given = paths or (db_b, db_a)
    same = db_b.resolve() == db_a.resolve()
    cats = {"before": "cmp_b", "after": "cmp_b" if same else "cmp_a"}
    con = offline(duckdb.connect())
    try:
        bound_memory(con)  # the same cap as every analysis connection: spill, never take the machine
        con.execute(SQL["progress_bar_off"])
        con.execute(SQL.sql("attach_read_only", path=db_b.resolve(), catalog="cmp_b"))
        if not same:
            con.execute(SQL.sql("attach_read_only", path=db_a.resolve(), catalog="cmp_a"))
        with ThreadPoolExecutor(max_workers=1) as pool:  # each side's diagnose, beside the rest
            result = _run(
                con,
                cats,
                {"before": str(given[0]), "after": str(given[1])},
                cfg,
                findings,
                model_flops_per_step,
                pool,
                rank_map,
            )
    finally:
        con.close()
    result["notes"] = list(notes) + result["notes"]
    if fail_on_regression_pct is not None:
        result["gate"] = gate(result, fail_on_regression_pct)
    return result


def _run(
    con: duckdb.DuckDBPyConnection,
    cats: dict[str, str],
    paths: dict[str, str],
    cfg: dict[str, float],
    with_findings: bool,
    model_flops: float | None,
    pool: ThreadPoolExecutor,
    rank_map: dict[int, int] | None = None,
) -> dict[str, Any]:
    notes: list[str] = []
    home = dict(cats)  # each side's own catalog (its macros, diagnose); cats: where its results are read
    mfu: dict[str, dict] = {}
    ranks: dict[str, list[int]] = {}
    # Each side's diagnose runs on its own cursor in `pool` while this thread compares: its many
    # small queries leave a core idle, and nothing here reads its findings until the diff.
    diagnosed: dict[str, Future] = {}
    for side in SIDES:
        _side_views(con, cats[side], side)
        if side == "after" and cats["after"] == cats["before"]:  # the same workspace twice
            ranks[side], mfu[side] = ranks["before"], mfu["before"]
            if "before" in diagnosed:
                diagnosed[side] = diagnosed["before"]
            continue
        con.execute(SQL.sql("use_catalog", catalog=cats[side]))
        ranks[side] = [int(r[0]) for r in con.execute(SQL["side_ranks"]).fetchall()]
        if not ranks[side]:  # e.g. Nsight Compute or DCGM alone: say what it holds, not "no rank in common"
            why = held_instead(con) or "nothing was ingested: run `nsight-analyze ingest DIR` first"
            raise NoData(f"no data to compare in {paths[side]} ({side}): the workspace has no ranks ({why})")
        check_side(side, ranks[side], rank_map)  # a --ranks naming a rank it lacks: before its diagnose
        if with_findings:
            diagnosed[side] = pool.submit(on_own_cursor, con, _findings, cats[side])
        mfu[side] = _mfu(con, cats[side], model_flops)
    pairs, pair_note = pair_ranks(ranks, rank_map)
    if pairs is not None:  # AFTER read under BEFORE's rank numbers (setup.relabel)
        cats["after"] = relabel(con, home["after"], pairs)
        _side_views(con, cats["after"], "after")
        common = sorted(pairs)
        only_b = sorted(set(ranks["before"]) - set(pairs))
        only_a = sorted(set(ranks["after"]) - set(pairs.values()))
        whole = {"before": not only_b, "after": not only_a}
        notes.append(pair_note)
    else:
        common = sorted(set(ranks["before"]) & set(ranks["after"]))
        if not common:
            raise UserError(
                "the two runs have no rank in common: nothing to compare (pair ranks with --ranks "
                f"BEFORE=AFTER; before has ranks {_listed(ranks['before'])}, "
                f"after ranks {_listed(ranks['after'])})"
            )
        whole = {s: set(ranks[s]) <= set(common) for s in SIDES}  # no rank filter needed on that side
        only_b = sorted(set(ranks["before"]) - set(ranks["after"]))
        only_a = sorted(set(ranks["after"]) - set(ranks["before"]))
        if only_b or only_a:
            notes.append(
                f"rank counts differ ({len(ranks['before'])} before, {len(ranks['after'])} after): "
                f"compared on the {len(common)} ranks both have"
            )
    compared = {"before": common, "after": [pairs[r] for r in common] if pairs else common}
    setups = {"before": side_setup(con, home["before"], compared["before"])}
    setups["after"] = (  # a workspace against itself (no --ranks): the same reads, read once
        dict(setups["before"])
        if home["after"] == home["before"] and compared["after"] == compared["before"]
        else side_setup(con, home["after"], compared["after"])
    )
    changes = setup_changes(setups["before"], setups["after"])
    con.execute(SQL.sql("use_catalog", catalog="memory"))
    listed = ", ".join(map(str, common))  # inlined: a bound parameter imports pandas (duck.sql_string)
    con.execute(SQL.sql("common_ranks", ranks=listed))
    steps = {s: _n_steps(con, s) for s in SIDES}
    # Steps found only as a periodic kernel's runs do not make the step-time basis: in a window
    # cut from a longer run the two captures may repeat different kernels; work per unit of
    # time stays the judge, and the step times are reported alongside.
    has_steps = {
        s: bool(con.execute(SQL.sql("step_windows_counted", tp=f"{s}_tp", src=f"{s}_src")).fetchone()[0])
        for s in SIDES
    }
    runs = {}
    for side in SIDES:
        src = plain_records(con, SQL.sql("step_sources", src=f"{side}_src"))
        runs[side] = {
            "input": paths[side],
            "ranks": len(ranks[side]),
            "steps": steps[side],
            "step_source": ", ".join(str(r["source"]) for r in src) or "none",
            "has_steps": has_steps[side],
        }
    st = step_time_comparison(_step_windows(con, "before"), _step_windows(con, "after"), cfg)
    step_verdict = st.pop("verdict")
    wr = _work_rate(con, cats, cfg)
    basis, basis_why = _basis(has_steps, wr)
    if basis == "step_time":
        verdict, confidence, why = step_verdict["verdict"], step_verdict["confidence"], step_verdict["why"]
    else:
        verdict, confidence, why = rate_verdict(wr, cfg)
    measured: dict[str, dict[str, float | None]] = {}
    if with_findings:
        measured["before"] = _measures(con, "before", cats["before"])
        same_views = cats["after"] == cats["before"]  # {side}_tp are views of the same tables
        measured["after"] = dict(measured["before"]) if same_views else _measures(con, "after", cats["after"])
    kernels = _kernels(con, cats, steps, cfg, whole)
    collectives = _collectives(con, cats, steps, cfg, whole, by_step=basis == "step_time")
    found: dict[str, dict | None] = {}
    for side in reversed(SIDES):  # their notes first, before's ahead of after's
        found[side], note = diagnosed[side].result() if side in diagnosed else (None, None)
        if note and not (side == "after" and cats["after"] == cats["before"]):
            notes.insert(0, f"{side} {note}")
    result: dict[str, Any] = {
        "schema": SCHEMA,
        "settings": cfg,
        "runs": runs,
        "ranks": {"common": common, "only_before": only_b, "only_after": only_a},
        **({"setup": {**setups, "changed": changes}} if changes else {}),
        "verdict": {
            "verdict": verdict,
            "confidence": confidence,
            "why": why,
            "ranks": [],
            "reason": "",
            "basis": basis,
            "basis_why": basis_why,
            "comparable": basis != "none",
        },
        "step_time": st,
        "work_rate": wr,
        "partition": _partition(con),
        "imbalance": {s: _imbalance(con, s) for s in SIDES},
        "mfu": mfu,
        "kernels": kernels,
        "collectives": collectives,
        "findings": _findings_diff(found["before"], found["after"], measured, cfg),
        "notes": notes,
    }
    if basis != "step_time" and (has_steps["before"] or has_steps["after"]):
        notes.append(f"verdict on work per unit of time: {basis_why}")
    result["verdict"]["ranks"] = _suspects(result, cfg) if verdict != "neutral" else []
    result["verdict"]["reason"] = _reason(result)
    if pairs is not None:
        result["ranks"]["pairs"] = [{"before": b, "after": pairs[b]} for b in common]
    if changes:  # first in every format: the reason is the verdict's first line
        line = setup_line(changes, basis)
        result["verdict"]["setup_changed"] = line
        result["verdict"]["reason"] = f"{line}; {result['verdict']['reason']}"
    return result


def _listed(ranks: list[int]) -> str:
    return ", ".join(map(str, ranks[:8])) + (" ..." if len(ranks) > 8 else "")


__all__ = [
    "CAUSES",
    "DEFAULTS",
    "PARTS",
    "SCHEMA",
    "SIDES",
    "compare",
    "compare_prepared",
    "compare_samples",
    "gate",
    "is_workspace",
    "mann_whitney_p",
    "rate_verdict",
    "resolve_settings",
    "step_time_comparison",
    "verdict_of",
    "workspaces",
]
