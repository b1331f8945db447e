"""Ground truth of a 3D-parallel job's NCCL operation instances, copy-engine collectives included.

Why: synth/parallel.py records which operations it simulated (apiId, op, communicator, members'
correlation ids) and the communication per dimension over NCCL *kernels* only; a copy-engine
collective (NCCL >= 2.28 `ce-coll`, `--ce-collectives`) is an operation too, one per rank, whose
transfer is a memcpy. This module derives, from the generator's own events (true time, before any
clock shift), what the analyses must find per instance (arrivals, skew, last rank, waits, transfer
time, bus bandwidth) and the communication per dimension counting kernels and copy-engine copies
alike, so tests compare the SQL with numbers it did not produce.
"""

from __future__ import annotations

from .job import RankEvents


def truth(ranks: list[RankEvents], session: list[int], kinds: list, doc: dict) -> dict:
    """Truth keys to add to parallel.build's truth document `doc` (its operations, communicators).

    ranks: the job's events (file clock; true time = file time + session[node]); kinds: the
    catalog's kernel kinds (category comms = communication)."""
    dim_of = {c["comm"]: c["dimension"] for c in doc["communicators"]}
    span: dict[tuple[int, int], tuple[int, int]] = {}
    busy: dict[int, list[tuple[int, int]]] = {}
    for ev in ranks:
        off = int(session[ev.node])
        cats = [kinds[int(k)].category for k in ev.gpu_ktype]
        busy[ev.rank] = [
            (int(s) + off, int(e) + off)
            for s, e, c in zip(ev.gpu_start, ev.gpu_end, cats, strict=True)
            if c != "comms"
        ]
        for s, e, c in zip(ev.gpu_start, ev.gpu_end, ev.gpu_corr, strict=True):
            span[(ev.rank, int(c))] = (int(s) + off, int(e) + off)
    instances = []
    by_dim: dict[str, dict[str, list]] = {}
    for o in doc["operations"]:
        members = sorted((int(r), int(c)) for r, c in o["members"])
        arrive = {r: span[(r, c)][0] for r, c in members}
        last = max(arrive.values())
        n = len(next(c for c in doc["communicators"] if c["comm"] == o["comm"])["ranks"])
        n = 2 if o["op"] in ("Send", "Recv") else n
        transfer = min(span[m][1] - span[m][0] for m in members)
        factor = {"AllReduce": 2 * (n - 1) / n, "AllGather": n * (n - 1) / n}.get(o["op"], 1.0)
        instances.append({
            "api_id": o["api_id"], "op": o["op"], "comm": o["comm"], "copy_engine": o["copy_engine"],
            "dimension": dim_of[o["comm"]], "members": [list(m) for m in members], "bytes": o["bytes"],
            "start_skew_ns": last - min(arrive.values()),
            "last_rank": min(r for r, a in arrive.items() if a == last),
            "waits_ns": {str(r): last - a for r, a in arrive.items()},
            "transfer_ns": transfer,
            "busbw_gbps": o["bytes"] * factor / transfer,
        })  # fmt: skip
        for r, c in members:
            by_dim.setdefault(dim_of[o["comm"]], {}).setdefault(r, []).append(span[(r, c)])
    comms = {
        dim: {
            "total_ns": sum(e - s for spans in per_rank.values() for s, e in spans),
            "exposed_ns": sum(uncovered(spans, busy[r]) for r, spans in per_rank.items()),
        }
        for dim, per_rank in sorted(by_dim.items())
    }
    return {
        "instances_definition": "every NCCL operation instance, copy-engine collectives included (one "
        "operation per member: a kernel, or the memcpy of a copy-engine collective), in true time: "
        "start_skew_ns = last arrival - first arrival (arrival = the member's GPU start), last_rank = "
        "the latest arrival (lowest rank on ties), waits_ns = last arrival - the member's arrival, "
        "transfer_ns = the shortest member's duration, busbw_gbps = bytes (the payload's per-rank "
        "message size) x nccl-tests' factor (AllReduce 2(n-1)/n, AllGather n(n-1)/n, else 1) / "
        "transfer_ns, n = the communicator's ranks (2 for send/recv)",
        "instances": instances,
        "comms_by_dimension_with_ce_definition": "as comms_by_dimension, over every operation's GPU "
        "span (NCCL kernels and copy-engine copies): total_ns = sum of durations; exposed_ns = length "
        "of each rank's union of the dimension's spans not covered by a compute, memory or other GPU "
        "operation, summed over ranks",
        "comms_by_dimension_with_ce": comms,
    }


def uncovered(spans: list[tuple[int, int]], cover: list[tuple[int, int]]) -> int:
    """Length of union(spans) minus union(cover)."""

    def union(iv: list[tuple[int, int]]) -> list[tuple[int, int]]:
        out: list[list[int]] = []
        for s, e in sorted(x for x in iv if x[1] > x[0]):
            if out and s <= out[-1][1]:
                out[-1][1] = max(out[-1][1], e)
            else:
                out.append([s, e])
        return [(s, e) for s, e in out]

    a, b = union(spans), union(cover)
    total, j = 0, 0
    for s, e in a:
        cur = s
        while j < len(b) and b[j][1] <= cur:
            j += 1
        k = j
        while k < len(b) and b[k][0] < e:
            if b[k][0] > cur:
                total += b[k][0] - cur
            cur = max(cur, b[k][1])
            k += 1
        if cur < e:
            total += e - cur
    return total
