"""The optional hooks of the source interface (sources/base.py), reached through sources/registry.py.

Why (issue 54, point 4): the orchestration calls a reader's hooks for inputs read beside other
inputs' ranks (`attach`, `resolve`, `unmatched_hint`) through the registry, for the readers of
the inputs at hand that define them, never by a reader's name; these tests pin that dispatch
with stand-in readers, so a reader added later gets its hooks called the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

import duckdb

from nsight_analyze.sources import registry
from nsight_analyze.store import schema


@dataclass
class _Cand:
    source: ModuleType


def _reader(name: str, calls: list[str], hint: str | None = None) -> ModuleType:
    """A stand-in reader named like a registry module; it records each hook call as 'name.hook'."""
    mod = ModuleType(f"nsight_analyze.sources.{name}")
    mod.attach = lambda con, ready: calls.append(f"{name}.attach")
    mod.resolve = lambda ready: calls.append(f"{name}.resolve")
    if hint is not None:
        mod.unmatched_hint = lambda ready: calls.append(f"{name}.hint") or hint
    return mod


def test_hooks_run_once_per_reader_of_the_inputs_in_registry_order():
    """Expected by construction: two inputs of the 'kineto' stand-in and one of 'nsys_recipe'; the
    registry's ORDER puts nsys_recipe first; a reader without a hook (plain) is skipped."""
    calls: list[str] = []
    kin, rec = _reader("kineto", calls, hint=""), _reader("nsys_recipe", calls, hint="why not")
    plain = ModuleType("nsight_analyze.sources.ncu")
    ready = [_Cand(kin), _Cand(plain), _Cand(rec), _Cand(kin)]
    registry.attach(None, ready)
    registry.resolve(ready)
    assert calls == ["nsys_recipe.attach", "kineto.attach", "nsys_recipe.resolve", "kineto.resolve"]
    calls.clear()
    assert registry.unmatched_hint(ready) == "why not"  # the first reader with a hint answers
    assert calls == ["nsys_recipe.hint"]


def test_no_reader_of_the_inputs_has_a_hook():
    """An ingest of inputs whose readers define none of these hooks calls nothing and has no hint."""
    ready = [_Cand(ModuleType("nsight_analyze.sources.nsys_sqlite"))]
    registry.attach(None, ready)
    registry.resolve(ready)
    assert registry.unmatched_hint(ready) == ""


def test_tables_owned_by_file_have_both_owners():
    """A table whose rows stay their file's under other files' ranks must hold both columns
    (schema_recipe.sql declares recipe_nvtx_gpu_proj with rank and file_id)."""
    tables = registry.rank_tables_owned_by_file()
    assert tables == {"recipe_nvtx_gpu_proj"}  # the one reader read beside others: nsys_recipe
    con = duckdb.connect()
    for path in schema.schema_files():
        con.execute(path.read_text())
    assert tables <= set(schema.owned_by(con, "rank")) & set(schema.owned_by(con, "file_id"))
