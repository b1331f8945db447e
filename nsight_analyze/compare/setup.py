"""What each run ran on (its setup) and which ranks are compared with which (the rank pairs).

Why: a step time measured on an A100 in a job of 8 ranks and one measured on a V100 in a job of
2 differ for reasons no code change made. The comparison names every difference of setup the
workspaces record (GPU model, world size, NCCL version, the CUPTI / ROCm tracer version, CUDA /
HIP runtime and driver and PyTorch versions a PyTorch-profiler trace records, the dominant GEMM
precision) at the top of its verdict, so that
a slower step on other hardware is not read as a regression of the code (docs/compare.md
"Setup").

Ranks are matched by number, unless a mapping pairs them (`--ranks 3=1`: BEFORE's rank 3 with
AFTER's rank 1), or unless each run holds a single rank and their numbers differ (one rank's
capture from each job: compared with each other by default, with a note). A mapping is applied
by reading AFTER's stored results through views that show its ranks under BEFORE's numbers
(`relabel`): every comparison (partition, step times, kernels, collectives, work rate) is the
same SQL as without a mapping, and the ranks it names are BEFORE's.
"""

from __future__ import annotations

import re
from typing import Any

import duckdb

from ..errors import UserError
from ..store.query_layer import statements

SQL = statements("compare/setup")

# AFTER's stored results compare reads by name (its catalog prefix), with the columns holding a
# rank number: what `relabel` shows under BEFORE's numbers.
RELABELLED: dict[str, tuple[str, ...]] = {
    "time_partition": ("rank",),
    "steps": ("rank",),
    "imbalance": ("slowest_rank",),
    "rank_rollup": ("rank",),
    "kernel_kinds": ("rank",),
    "kernel_duration_counts": ("rank",),
    "kernel_duration_totals": (),
    "kernels": ("rank",),
    "merge_nccl_kernels": ("rank",),
    "collectives": ("last_rank",),
    "kernel_window_shares": ("rank",),
    "kernel_summary": ("rank",),
}
# Per-rank verdicts read without a rank filter (the straggler ranks): only the paired ranks'.
PAIRED_ONLY = {"rank_rollup"}
RELABEL_SCHEMA = "cmp_after_ranks"  # in the comparison's in-memory catalog

# The setup items, in the order the verdict names them: (key, label).
ITEMS = (
    ("gpu", "GPU"),
    ("world_size", "world size"),
    ("nccl_version", "NCCL"),
    ("tracer", "tracer"),
    ("runtime", "runtime"),
    ("driver", "driver"),
    ("pytorch", "PyTorch"),
    ("gemm_precision", "GEMM precision"),
)
# kineto_versions keys of each version item (schema_kineto.sql), in the order they are tried
VERSION_ITEMS = {
    "runtime": ("cuda_runtime_version", "hip_runtime_version"),
    "driver": ("cuda_driver_version", "hip_driver_version"),
    "pytorch": ("pytorch_version", "torch_version", "pytorch version"),
}
NOT_CODE = "a {metric} difference across different setups is not a regression of the code"

_PAIR = re.compile(r"^\s*(\d+)\s*=\s*(\d+)\s*$")


def parse_rank_map(text: str | dict[int, int] | None) -> dict[int, int] | None:
    """`--ranks 3=1,4=0` (BEFORE=AFTER, comma-separated) as {3: 1, 4: 0}; a dict is checked and
    returned. Each rank may be named once per side: a rank compared with two would count twice."""
    if text is None:
        return None
    if isinstance(text, dict):
        pairs = [(int(b), int(a)) for b, a in text.items()]
        shown = ",".join(f"{b}={a}" for b, a in pairs)
    else:
        shown = text
        pairs = []
        for part in text.split(","):
            m = _PAIR.match(part)
            if not m:
                raise UserError(
                    f"--ranks {text!r}: give BEFORE=AFTER rank pairs, comma-separated (e.g. --ranks 3=1)"
                )
            pairs.append((int(m.group(1)), int(m.group(2))))
    if not pairs:
        raise UserError(f"--ranks {shown!r}: give at least one BEFORE=AFTER rank pair (e.g. --ranks 3=1)")
    for i, side in ((0, "before"), (1, "after")):
        seen = [p[i] for p in pairs]
        twice = sorted({r for r in seen if seen.count(r) > 1})
        if twice:
            raise UserError(f"--ranks {shown}: {side} rank {twice[0]} is paired more than once")
    return dict(pairs)


def pair_ranks(
    ranks: dict[str, list[int]], rank_map: dict[int, int] | None
) -> tuple[dict[int, int] | None, str | None]:
    """(pairs BEFORE rank -> AFTER rank, note), or (None, None) to match ranks by number.

    A mapping naming a rank a run lacks is an error (one line). Without one, two runs of one rank
    each whose numbers differ (one rank's capture from each of two jobs) are paired, with a note:
    by number they have nothing in common."""
    b, a = ranks["before"], ranks["after"]
    if rank_map is not None:
        for side in ("before", "after"):
            check_side(side, ranks[side], rank_map)
        listed = ", ".join(f"{k}={v}" for k, v in sorted(rank_map.items()))
        return dict(rank_map), (
            f"ranks paired by --ranks (before=after): {listed}; compared on these pairs only, "
            f"ranks named by BEFORE's numbers ({_OWN})"
        )
    if len(b) == 1 and len(a) == 1 and b != a:
        return {b[0]: a[0]}, (
            f"each run holds one rank (before rank {b[0]}, after rank {a[0]}): compared with each other "
            f"(as --ranks {b[0]}={a[0]}); ranks are named by BEFORE's numbers ({_OWN})"
        )
    return None, None


_OWN = "each run's findings name its own"


def check_side(side: str, own: list[int], rank_map: dict[int, int] | None) -> None:
    """A mapping naming a rank this side lacks is an error, said as soon as the side's ranks are
    known (before its diagnose starts)."""
    if rank_map is None:
        return
    wanted = rank_map.keys() if side == "before" else rank_map.values()
    lacking = sorted(set(wanted) - set(own))
    if lacking:
        raise UserError(f"--ranks: {side} has no rank {lacking[0]} (its ranks: {_listed(own)})")


def _listed(ranks: list[int]) -> str:
    return ", ".join(map(str, ranks[:20])) + (f", ... ({len(ranks)} in all)" if len(ranks) > 20 else "")


def relabel(con: duckdb.DuckDBPyConnection, cat: str, pairs: dict[int, int]) -> str:
    """Views of `cat`'s stored results (RELABELLED) in which AFTER's paired ranks carry BEFORE's
    numbers and its other ranks none (NULL: outside every comparison); returns their prefix, which
    compare reads in place of `cat`. A table the workspace lacks gets no view, so its read fails
    as it would on `cat` (and falls back where compare falls back)."""
    got = {name: set(cols) for name, cols in con.execute(SQL.sql("catalog_tables", catalog=cat)).fetchall()}
    after = "[" + ", ".join(str(a) for _, a in sorted(pairs.items())) + "]"  # AFTER's paired ranks
    before = "[" + ", ".join(str(b) for b, _ in sorted(pairs.items())) + "]"  # the BEFORE rank of each
    prefix = f"memory.{RELABEL_SCHEMA}"
    con.execute(SQL.sql("relabel_schema", schema=RELABEL_SCHEMA))
    for name, cols in RELABELLED.items():
        if name not in got:
            continue
        table = f"{cat}.main.{name}"
        sql = SQL.sql("relabel_unchanged", table=table)
        for c in (c for c in cols if c in got[name]):  # each rank column swapped in turn
            sql = SQL.sql(
                "relabel_rank_column", after_ranks=after, before_ranks=before, column=c, table=table
            )
            table = f"({sql})"
        if name in PAIRED_ONLY:
            sql = SQL.sql("relabel_paired_only", relabelled=sql)
        con.execute(SQL.sql("relabel_view", schema=RELABEL_SCHEMA, result=name, relabelled=sql))
    return prefix


def _one(values: list[Any]) -> Any:
    """The value of a setup item over the compared ranks: the one value, the distinct values
    joined when they differ (e.g. a job on two GPU models), None when nothing is recorded."""
    known = sorted({str(v) for v in values if v is not None and str(v) != ""})
    if not known:
        return None
    if len(known) == 1:
        v = next(v for v in values if v is not None)
        return int(v) if isinstance(v, int) else str(v)
    return ", ".join(known)


def _column(con: duckdb.DuckDBPyConnection, sql: str) -> list[Any]:
    try:
        return [r[0] for r in con.execute(sql).fetchall()]
    except duckdb.Error:  # a workspace made before the table or macro existed: unknown
        return []


def version_text(key: str, value: str) -> str:
    """A stored version as people write it: CUDA's runtime / driver encoding 1000 * major + 10 *
    minor (12040 -> 'CUDA 12.4'), HIP's 10^7 * major + 10^5 * minor + patch (70051831 -> 'HIP
    7.0.51831'); anything else as written."""
    if not value.isdigit():
        return value
    v = int(value)
    if key.startswith("cuda_"):
        return f"CUDA {v // 1000}.{v % 1000 // 10}"
    if key.startswith("hip_"):
        return f"HIP {v // 10_000_000}.{v // 100_000 % 100}.{v % 100_000}"
    return value


def _versions(con: duckdb.DuckDBPyConnection, ranks: str) -> dict[str, list[Any]]:
    """Per version item (VERSION_ITEMS, and NCCL), its value on each compared rank that records it:
    the first of the item's keys the rank has (kineto_versions; [] on a workspace made before it)."""
    try:
        rows = con.execute(SQL.sql("versions", ranks=ranks)).fetchall()
    except duckdb.Error:  # a workspace made before the table existed: unknown
        rows = []
    by_rank: dict[int, dict[str, str]] = {}
    for rank, key, value in rows:  # a few keys per rank
        by_rank.setdefault(int(rank), {})[str(key)] = str(value)
    out: dict[str, list[Any]] = {"nccl_version": [v.get("nccl_version") for v in by_rank.values()]}
    for item, keys in VERSION_ITEMS.items():
        out[item] = [next((version_text(k, v[k]) for k in keys if k in v), None) for v in by_rank.values()]
    return out


def side_setup(con: duckdb.DuckDBPyConnection, home: str, ranks: list[int]) -> dict[str, Any]:
    """The setup of one run, over the ranks compared, from what its workspace stores (read under
    `USE home`, its own catalog, where its macros resolve). None where the trace records nothing
    (an nsys export's CUDA / driver versions are not stored: docs/compare.md)."""
    con.execute(SQL.sql("use_catalog", catalog=home))
    listed = ", ".join(map(str, ranks)) or "NULL"
    precision = _column(con, SQL.sql("gemm_precision", ranks=listed))
    tracer = _column(con, SQL.sql("tracer", ranks=listed))
    versions = _versions(con, listed)
    return {
        "gpu": _one(_column(con, SQL.sql("gpu_names", ranks=listed))),
        "world_size": _one(_column(con, SQL.sql("world_sizes", ranks=listed))),
        # a workspace made before kineto_versions has it in kineto_process_groups only
        "nccl_version": _one(
            versions["nccl_version"] or _column(con, SQL.sql("process_group_nccl_versions", ranks=listed))
        ),
        "tracer": _one(tracer),
        "runtime": _one(versions["runtime"]),
        "driver": _one(versions["driver"]),
        "pytorch": _one(versions["pytorch"]),
        "gemm_precision": _one(precision),
    }


def setup_changes(before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, Any]]:
    """The items known on both sides whose values differ, in ITEMS order. An item unknown on a
    side is no difference: a value the data cannot support is not guessed."""
    return [
        {"item": key, "label": label, "before": before[key], "after": after[key]}
        for key, label in ITEMS
        if before.get(key) is not None and after.get(key) is not None and before[key] != after[key]
    ]


def setup_line(changes: list[dict[str, Any]], basis: str = "step_time") -> str:
    """'setup changed: GPU A -> B, world size 8 -> 2 (...not a regression of the code)'; the
    metric named is the verdict's basis (step time, or work per unit of time without steps)."""
    items = ", ".join(f"{c['label']} {c['before']} -> {c['after']}" for c in changes)
    metric = "work-rate" if basis == "work_rate" else "step-time"
    return f"setup changed: {items} ({NOT_CODE.format(metric=metric)})"
