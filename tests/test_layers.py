"""The import structure of src/decent8: no import cycle, and no import from a lower layer into
a higher one (the layers of docs/architecture.md, written down in :data:`LAYERS`).

The imports are read from the source with :mod:`ast`, every ``import`` / ``from … import``
statement wherever it sits (function-level lazy imports included); only imports under
``if TYPE_CHECKING:`` are left out (they never run). A new package or top-level module
must be given a layer here.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

#: layer of each package and top-level module of src/decent8, from the bottom (0) up: a module
#: may import modules of its own layer or of lower ones. The longest matching name wins, so a
#: module can sit above its package (an entry point such as ``experiments.regenerate``).
LAYERS: dict[str, int] = {
    # 0 — plain building blocks: options, errors, files, names
    **{f"decent8.{m}": 0 for m in ("atomic", "config", "errors", "figstyle", "layout", "node_axis", "own_files",
                                   "plugins", "registry", "seeding", "signals", "state_spec", "streams", "text_table", "user_code", "validate",
                                   "version")},
    # 1 — compression (payload encode/decode), 8-bit quantization, the graph and its W
    "decent8.compression": 1, "decent8.quant": 1, "decent8.topology": 1,
    # 2 — data / model / algorithm / comm (and what they share: the task, the optimizer, the collectives)
    "decent8.algorithms": 2, "decent8.byzantine": 2, "decent8.collectives": 2, "decent8.comm": 2, "decent8.data": 2, "decent8.models": 2,
    "decent8.optim": 2, "decent8.task": 2,
    # 3 — models read by the cost model and the simulated clock
    "decent8.cost": 3, "decent8.timing": 3,
    # 4 — the training loop and its Python API
    "decent8.train": 4, "decent8.api": 4,
    # 5 — sweeps, reports and pricing of finished runs
    "decent8.experiments": 5, "decent8.timing.tta": 5,
    # 6 — the command line
    "decent8.cli": 6,
    # 7 — entry points: the package itself, `python -m decent8`, the documented tables' regeneration
    "decent8": 7, "decent8.__main__": 7, "decent8.experiments.regenerate": 7,
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {module_name(p): p for p in sorted((SRC / "decent8").rglob("*.py"))}


def layer(module: str) -> int | None:
    """The layer of ``module``: that of the longest name of :data:`LAYERS` it starts with (the
    root package ``decent8`` only for itself, so that a module left out has none)."""
    parts = module.split(".")
    for n in range(len(parts), 1, -1):
        if ".".join(parts[:n]) in LAYERS:
            return LAYERS[".".join(parts[:n])]
    return LAYERS.get(module)


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of the import nodes under ``if TYPE_CHECKING:``."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            out |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return out


def imports(module: str, path: Path) -> list[tuple[str, int]]:
    """(imported decent8 module, line) of every import statement of ``module``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_checking_only(tree)
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    out = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names if a.name.split(".")[0] == "decent8"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "decent8":
                continue
            for a in node.names:  # `from pkg import submodule` imports the submodule
                sub = f"{target}.{a.name}"
                out.append((sub if sub in MODULES else target, node.lineno))
    return out


GRAPH: dict[str, list[tuple[str, int]]] = {m: imports(m, p) for m, p in MODULES.items()}


def test_every_module_has_a_layer():
    assert [m for m in MODULES if layer(m) is None] == []
    assert layer("decent8.new_package.module") is None and layer("decent8") == 7


def test_every_import_names_an_existing_module():
    missing = [f"{m}:{line} imports {t}" for m, edges in GRAPH.items() for t, line in edges if t not in MODULES]
    assert missing == []


def test_no_import_goes_up_a_layer():
    up = [f"{m} (layer {layer(m)}):{line} imports {t} (layer {layer(t)})"
          for m, edges in GRAPH.items() for t, line in edges
          if t in MODULES and layer(t) is not None and layer(m) is not None and layer(t) > layer(m)]
    assert up == []


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_no_import_cycle():
    graph = {m: {t for t, _ in edges if t in MODULES and t != m} for m, edges in GRAPH.items()}
    assert cycles(graph) == []


@pytest.mark.parametrize("graph, expected", [
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
    ({"a": {"b"}, "b": set()}, []),
])
def test_the_cycle_finder_finds_cycles(graph, expected):
    assert cycles(graph) == expected


def test_the_layer_check_sees_lazy_and_relative_imports(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("def f():\n    from ..cli.main import main\n    from . import zoo\n"
                 "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..train import loop\n")
    assert imports("decent8.models.x", f) == [("decent8.cli.main", 2), ("decent8.models.zoo", 3)]
