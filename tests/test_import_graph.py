"""No import circle between the package's modules, counting every import the code holds:
module-level, inside functions (the lazy imports kept for start-up time) and under
`if TYPE_CHECKING:`.

Why (issue 54, "packages by stage"): a circle means two modules each need the other, so neither
can be read, tested or moved alone, and a lazy import that hides one only moves the failure to
run time. A lazy import is fine when it points down; this test finds the ones that point up.

An import of an ancestor package (`from .. import __version__` in a submodule) is not an edge:
Python runs the ancestors' `__init__` before the submodule anyway, so it closes no circle of
its own. Importing a package's submodule is an edge to that submodule, not to the package's
`__init__` (the names `__init__` re-exports are its own edges).
"""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT

PACKAGE = ROOT / "nsight_analyze"

# The circles allowed in the tree: none (issue 54). A new one fails below with its edges.
KNOWN: set[frozenset[str]] = set()


def import_graph(package: Path) -> dict[str, dict[str, int]]:
    """module -> {module it imports: line of the first such import}, over every `.py` file below
    `package` and every import statement anywhere in it (module level, functions, TYPE_CHECKING);
    imports of modules outside the package and of the importer's own ancestors are left out."""
    files = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path

    def known(name: str) -> str:
        """The module `name` is or lies in ('' when outside the package)."""
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name

    graph: dict[str, dict[str, int]] = {}
    for module, path in files.items():
        edges = graph.setdefault(module, {})
        here = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                up = here[: max(len(here) - node.level + 1, 0)] if node.level else []
                base = ".".join([*up, node.module or ""]).strip(".")
                # `from PKG import NAME`: the submodule PKG.NAME when there is one, else PKG
                names = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in files else base
                    for alias in node.names
                ]
            else:
                continue
            for name in names:
                target = known(name)
                if target and target != module and not module.startswith(target + "."):
                    edges.setdefault(target, node.lineno)
    return graph


def circles(graph: dict[str, dict[str, int]]) -> set[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative):
    every set of modules that import each other, directly or through the others."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(graph[target])))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.add(frozenset(component))
    return found


def _explain(graph: dict[str, dict[str, int]], found: set[frozenset[str]]) -> str:
    """Each circle's imports, `importer:line -> imported`, for the failure message."""
    lines = []
    for circle in sorted(found, key=sorted):
        lines.append("circle: " + ", ".join(sorted(circle)))
        for module in sorted(circle):
            for target, line in sorted(graph[module].items()):
                if target in circle:
                    lines.append(f"    {module}:{line} -> {target}")
    return "\n".join(lines)


def test_the_package_has_no_import_circle_but_the_known_ones():
    graph = import_graph(PACKAGE)
    assert len(graph) > 100  # the package was read (a wrong root finds nothing, hence no circle)
    found = circles(graph)
    assert found == KNOWN, (
        f"new circles:\n{_explain(graph, found - KNOWN)}\ngone (remove them from KNOWN): "
        f"{sorted(sorted(c) for c in KNOWN - found)}"
    )


# What the library (every module but the CLI's, commands/ and render/) may import of render/: the
# value helpers (human units, escaping, PlainTable, records); the printing is the renderers' own.
VALUE_HELPERS = {f"nsight_analyze.render.{name}" for name in ("units", "escape", "table", "data")}
FRONT = ("nsight_analyze.commands", "nsight_analyze.render", "nsight_analyze.cli", "nsight_analyze.clihelp")


def test_the_library_imports_only_value_helpers_of_render():
    """`summary` printed itself with render.terminal (now render/summary_tables.py). The one other
    import allowed: the API writes the HTML report, lazily (api/outputs -> render/report)."""
    wrong = [
        f"{module} -> {target}"
        for module, targets in import_graph(PACKAGE).items()
        if not module.startswith(FRONT) and module != "nsight_analyze.__main__"
        for target in targets
        if target.startswith("nsight_analyze.render")
        and target not in VALUE_HELPERS
        and not (module == "nsight_analyze.api.outputs" and target.startswith("nsight_analyze.render.report"))
    ]
    assert not wrong, wrong


def _package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "pkg"


# A package whose only circle is a <-> b through a lazy import: expected by construction below.
TINY = {
    "pkg/__init__.py": "__version__ = '1'\n",
    "pkg/a.py": "from . import b\nimport os\n",
    "pkg/b.py": "def f():\n    from .a import x  # lazy, and up: a imports b\n    return x\n",
    "pkg/sub/__init__.py": "from .leaf import y\n",
    "pkg/sub/leaf.py": "from .. import __version__\nfrom ... import nothing_outside\n",
    "pkg/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .sub import leaf\n",
}


def test_import_graph_reads_every_kind_of_import(tmp_path):
    """Expected, by hand from TINY: module-level, lazy (line 2 of b) and TYPE_CHECKING imports are
    edges; `from .. import __version__` (an ancestor) and imports from outside are not."""
    graph = import_graph(_package(tmp_path, TINY))
    assert graph == {
        "pkg": {},
        "pkg.a": {"pkg.b": 1},
        "pkg.b": {"pkg.a": 2},
        "pkg.c": {"pkg.sub.leaf": 3},
        "pkg.sub": {"pkg.sub.leaf": 1},
        "pkg.sub.leaf": {},
    }


def test_circles_finds_a_lazy_circle_and_one_a_change_introduces(tmp_path):
    """The test above fails on a new circle: a <-> b (lazy) is found; then leaf importing c, which
    imports leaf under TYPE_CHECKING, is a second one; a child importing its parent is none."""
    package = _package(tmp_path, TINY)
    assert circles(import_graph(package)) == {frozenset({"pkg.a", "pkg.b"})}
    (package / "sub" / "leaf.py").write_text("from .. import __version__\n\ndef g():\n    from .. import c\n")
    assert circles(import_graph(package)) == {
        frozenset({"pkg.a", "pkg.b"}),
        frozenset({"pkg.c", "pkg.sub.leaf"}),
    }


# Modules outside sources/ that still name a reader, each with who changes it; the set shrinks to
# empty. ingest/workers._batches sizes inputs with nsys_recipe.input_size: registry.input_size
# (same answer) is the lead's one-line change (the file was outside issue 54 point 4's helper).
NAMES_A_READER: set[str] = set()


def test_only_sources_name_the_recipe_reader():
    """Issue 54, point 4: the orchestration reaches the recipe reader's hooks (folder inputs, inputs
    read beside other inputs' ranks) through sources/registry.py, never by its name. Every module
    outside sources/ is read as text, so an import, a call, a string for importlib or a comment
    naming `nsys_recipe` (or its `nsys_recipe_bundle`) all count."""
    sources = PACKAGE / "sources"
    found = {
        path.relative_to(ROOT).as_posix()
        for path in sorted(PACKAGE.rglob("*.py"))
        if sources not in path.parents and "nsys_recipe" in path.read_text(encoding="utf-8")
    }
    assert len(list(sources.glob("nsys_recipe*.py"))) == 2  # the reader and its bundle exist where looked
    assert found == NAMES_A_READER, (
        f"name the recipe reader: {sorted(found - NAMES_A_READER)}; "
        f"no longer (remove them from NAMES_A_READER): {sorted(NAMES_A_READER - found)}"
    )
