"""The time partition's columns (docs/metrics.md "Time partition", "Idle causes"): the one list.

PARTS tile each window (their sum is window_ns exactly); IDLE_PARTS tile idle_ns, so PARTS with
idle_ns replaced by its causes (what a stacked bar draws) tile the window too. COMMS are
communication's total time and the part of it hidden under other work (they overlap the parts,
so they are not in the tiling). MEMORY_PARTS tile memory_ns: memory-bound kernels (softmax, norms,
elementwise) and copies (memcpy / memset operations no compute or memory kernel overlaps), so that
"memory" never reads as memcpy; COPIES_TOTAL is all copy time, hidden or not (it overlaps the
parts). TP_COLUMNS is every ns column of `time_partition` in its order.

No imports, so that the generator's ground truth (synth/), the library (summary, compare) and
the renderers can all name the columns from here without loading one another.
"""

from __future__ import annotations

PARTS = ("compute_ns", "memory_ns", "other_ns", "comms_exposed_ns", "idle_ns")
IDLE_PARTS = ("launch_gap_ns", "input_stall_ns", "sync_stall_ns", "host_bound_ns", "idle_other_ns")
COMMS = ("comms_total_ns", "comms_hidden_ns")
MEMORY_PARTS = ("memory_kernels_ns", "copies_ns")
COPIES_TOTAL = ("copies_total_ns",)
TP_COLUMNS = ("window_ns", *PARTS, *IDLE_PARTS, *COMMS, *MEMORY_PARTS, *COPIES_TOTAL)
