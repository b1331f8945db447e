"""Each finding is one declared unit (rules/declare.py): the registries diagnose, compare and the docs
use are derived from the `@finding` declarations, and these tests keep the declarations honest.

Why (issue 54): RULES, THRESHOLDS, compare's CAUSES and the tables of docs/diagnose.md were four
hand-kept copies of one fact. The expected values here are the declarations themselves and the
rule modules' own source text (what ids they emit, what they read, which thresholds they use).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nsight_analyze import analysis, rules, whatif
from nsight_analyze.rules import doc_tables
from nsight_analyze.rules.declare import Doc, FindingSpec, Threshold, finding
from nsight_analyze.store import query_layer

RULES_DIR = Path(rules.__file__).parent
DECLARED_IDS = {i for s in rules.SPECS for i in s.ids}


def _module_path(spec: FindingSpec) -> Path:
    return RULES_DIR / f"{spec.rule.__module__.rsplit('.', 1)[1]}.py"


def _module_sql(path: Path) -> str:
    """A rule module's source and its statement file's (queries/rules/MODULE.sql), when it has one."""
    statements = query_layer.queries_dir() / "rules" / f"{path.stem}.sql"
    return path.read_text() + (statements.read_text() if statements.is_file() else "")


def test_docs_tables_are_generated_from_the_declarations():
    """docs/diagnose.md's Rules and Thresholds tables equal what doc_tables writes from the
    declarations (run `python -m nsight_analyze.rules.doc_tables` when this fails)."""
    text = doc_tables.DOC.read_text()
    assert doc_tables.updated(text) == text, (
        "docs/diagnose.md is stale: python -m nsight_analyze.rules.doc_tables"
    )
    for spec in rules.SPECS:
        assert f"| {spec.label} |" in text
    assert doc_tables.main(["--check"]) == 0


def test_every_id_a_rule_emits_is_declared_by_its_module():
    """Literal ids (`id="..."`) and id families (`id=f"prefix-{...}"`) in a rule module are among
    the ids that module declares: an undeclared finding would have no docs row, no cause, no
    threshold."""
    for path in sorted(RULES_DIR.glob("*.py")):
        text = path.read_text()
        own = {i for s in rules.SPECS if _module_path(s) == path for i in s.ids}
        for fid in re.findall(r'\bid="([a-z0-9-]+)"', text):
            assert fid in own, f"{path.name} emits {fid!r} without declaring it"
        for prefix in re.findall(r'\bid=f"([a-z0-9-]+)\{', text):
            assert any(i.startswith(prefix) for i in own), f"{path.name} emits {prefix}... undeclared"


def test_each_finding_module_declares_what_it_reads():
    """What a rule module's SQL names is in its findings' `reads` (or the shared helpers', or the
    what-if's when a finding is bounded by it): a module that reads a new table fails here, not on
    a user's workspace where the table was never computed."""
    by_module: dict[Path, list[FindingSpec]] = {}
    for spec in rules.SPECS:
        by_module.setdefault(_module_path(spec), []).append(spec)
    for path, specs in by_module.items():
        declared = {*rules.SHARED_READS, *(n for s in specs for n in s.reads)}
        if any(s.whatif for s in specs):
            declared |= set(whatif.READS)
        missing = analysis.targets(query_layer.names_in(_module_sql(path))) - analysis.targets(declared)
        assert not missing, f"{path.name} reads {sorted(missing)} without declaring them"


def test_the_whatif_bound_is_the_declared_one():
    """A rule runs bounded by the scenario its declaration names, and only then
    (rules/_whatif.bounded_by marks the wrapper with `whatif_scenario`)."""
    for rule in rules.RULES:
        specs = [s for s in rules.SPECS if s.rule is getattr(rule, "__wrapped__", rule)]
        assert specs, rule
        wanted = {s.whatif for s in specs if s.whatif}
        assert set(filter(None, [getattr(rule, "whatif_scenario", None)])) == wanted


def test_every_declared_threshold_is_read_and_every_cause_names_a_real_one():
    """A declared threshold is read by some rule (ctx.th["name"]); a cause's threshold and ids are
    ones the findings declare."""
    sources = "".join(p.read_text() for p in RULES_DIR.glob("*.py"))
    for name in rules.THRESHOLDS:
        assert re.search(rf"""th\[["']{name}["']\]""", sources), f"threshold {name} is declared, never read"
    for cause in rules.CAUSES:
        assert cause.threshold is None or cause.threshold in rules.THRESHOLDS
        assert set(cause.ids) <= DECLARED_IDS, cause


def test_a_threshold_declared_twice_is_an_error():
    """One home per threshold: a second declaration of a name is refused when the registry is built."""
    doc = Doc("w", "s", "r")
    spec = FindingSpec(("a",), doc, thresholds={"x_pct": Threshold(1.0, "x")})
    twice = FindingSpec(("b",), doc, thresholds={"x_pct": Threshold(2.0, "x again")})
    assert rules._thresholds((spec,))["x_pct"].default == 1.0
    with pytest.raises(RuntimeError, match="x_pct is declared twice"):
        rules._thresholds((spec, twice))


def test_declaring_stacks_on_one_rule():
    """A rule emitting two kinds of finding (graph-capture and compile-phase) carries two
    declarations, top one first, and is itself unchanged."""

    def rule(ctx):
        return []

    declared = finding("one", doc=Doc("w", "s", "r"))(finding("two", doc=Doc("w", "s", "r"))(rule))
    assert declared is rule
    assert [s.ids for s in rule.__findings__] == [("one",), ("two",)]
    assert {s.ids for s in rules.SPECS if s.rule.__name__ == "graph_capture"} == {
        ("graph-capture",),
        ("compile-phase",),
    }


def test_every_cause_is_in_compare_docs():
    """docs/compare.md's "Findings: matched by cause" table names every declared cause (a family
    of per-dimension causes by its `<dim>` row), so a new cause cannot go undocumented."""
    text = (doc_tables.DOC.parent / "compare.md").read_text()
    table = text[text.index("### Findings: matched by cause") : text.index("### The CI gate")]
    for cause in rules.CAUSES:
        shown = re.sub(r"^exposed-comm-[a-z]+$", "exposed-comm-<dim>", cause.key)
        assert f"`{shown}`" in table, f"cause {cause.key} missing from docs/compare.md"
