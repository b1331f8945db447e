"""The one palette: every colour a renderer draws (figures in Python, the report's JavaScript, the
pages' CSS) comes from here, so compute is the same blue in the report, the timeline and the diff.

`js_object` and `css_rules` write the constants into the JavaScript and CSS the pages embed.
"""

from __future__ import annotations

import json

from .. import partition

# Time categories: the partition's parts and the timeline's series, in stacking order. "memory" is
# memory-bound kernels (the partition's memory_kernels_ns; the timeline's memory kernels) and
# "copies" memcpy / memset operations (copies_ns): two colours, so that memory never reads as copies.
CATEGORY = {
    "compute": "#1f77b4",
    "memory": "#ff9f1c",
    "copies": "#ffd166",
    "other": "#9e9e9e",
    "comms": "#d62728",
    "launch_gap": "#c5b0d5",
    "input_stall": "#8c564b",
    "sync_stall": "#e377c2",
    "host_bound": "#bcbd22",
    "idle_other": "#dddddd",
}
IDLE_CAUSES = tuple(c.removesuffix("_ns") for c in partition.IDLE_PARTS)
UNKNOWN = "#777777"  # a category this palette does not name


def _part(column: str) -> tuple[str, str, str]:
    name = column.removesuffix("_ns")
    if name in IDLE_CAUSES:
        return column, "idle: " + name.removeprefix("idle_").replace("_", " "), CATEGORY[name]
    if name == "comms_exposed":
        return column, "comms exposed", CATEGORY["comms"]
    if name == "memory_kernels":
        return column, "memory kernels", CATEGORY["memory"]
    return column, name, CATEGORY[name]


def _bar_parts() -> tuple[str, ...]:
    """The parts that tile a window, memory split into memory kernels and copies and idle into its
    causes (partition.py: MEMORY_PARTS tile memory_ns, IDLE_PARTS idle_ns)."""
    split = {"memory_ns": partition.MEMORY_PARTS, "idle_ns": partition.IDLE_PARTS}
    return tuple(c for p in partition.PARTS for c in split.get(p, (p,)))


# The partition's bars in stacking order, (column, label, colour): the parts that tile a window
# with memory split into memory kernels and copies and idle into its causes (partition.py names
# the columns).
PARTS = tuple(_part(c) for c in _bar_parts())
PART_COLOUR = {col: colour for col, _, colour in PARTS}

# Communication overlap and collective waits.
COMMS_HIDDEN = "#2ca02c"
COMMS_EXPOSED = CATEGORY["comms"]
WAIT_SUFFERED = "#ff7f0e"
WAIT_CAUSED = "#9467bd"

# Changes between two runs: time gained is better, time lost is worse.
WORSE = "#c62828"
BETTER = "#2e7d32"
VERDICT_BACKGROUND = {"regression": "#ffebee", "improvement": "#e8f5e9", "neutral": "#eceff1"}

# Finding severities.
SEVERITY = {"high": "#b00020", "medium": "#b35c00", "low": "#555555"}


def category(name: str) -> str:
    """The colour of a time category (or of an idle cause), UNKNOWN for any other name."""
    return CATEGORY.get(str(name), UNKNOWN)


def js_object(name: str, mapping: dict[str, str]) -> str:
    """`var NAME = {...};` for the page's JavaScript."""
    return f"var {name} = {json.dumps(mapping)};"


def css_rules(selector: str, prop: str, mapping: dict[str, str]) -> str:
    """One CSS rule per entry: `selector` with `{key}` replaced, setting `prop` to the colour."""
    return "".join(f"{selector.format(key=k)}{{{prop}:{v}}}" for k, v in mapping.items())
