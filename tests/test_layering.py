"""The import contract of src/decent8 (docs/architecture.md, "Layers"): the packages in a
written order from the top down, every import going down that order, no import cycle
between packages or modules, and imports inside functions only where :data:`LAZY` lists
them with the reason.

The imports are read from the source with :mod:`ast`: every ``import`` / ``from … import``
statement wherever it sits (inside functions too), relative and absolute; only imports
under ``if TYPE_CHECKING:`` are left out (they never run). A package is a subpackage of
``decent8`` (``decent8.train``: every module under it) or a top-level module
(``decent8.config``); the root package ``decent8`` is its own. A new package is given a
layer in :data:`LAYERS`, a new import inside a function a line in :data:`LAZY`.

``python tests/test_layering.py`` prints the contract: the layers, the package graph, the
function-level imports and any violation.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

#: the layers from the top down; a package imports only packages of lower layers (never one
#: of its own layer: the packages of a layer are independent of each other)
LAYERS: tuple[tuple[str, ...], ...] = (
    ("decent8", "decent8.__main__"),   # entry points: `import decent8` (decent8.train(...)), `python -m decent8`
    ("decent8.cli",),                  # the command line
    ("decent8.experiments",),          # sweeps, presets, reports, findings, time-to-accuracy, the documented results
    ("decent8.api",),                  # the Python API: decent8.train(model, data, ...)
    ("decent8.train",),                # resolve, build, the engine, the training loop, the run folder
    ("decent8.timing",),               # the simulated clock: device, network, faults
    ("decent8.cost",),                 # the hardware cost model: energy, memory, communication
    ("decent8.algorithms",),           # update rules
    ("decent8.collectives",),          # all-reduce collectives over a communicator
    ("decent8.comm",),                 # communicators: the simulator, node blocks over torch.distributed
    ("decent8.byzantine", "decent8.models", "decent8.optim"),   # attacks and robust rules; models and how they run; optimizers
    ("decent8.compression", "decent8.data", "decent8.quant", "decent8.task", "decent8.topology"),
    # wire payloads; data sets and partitions; 8-bit quantization; losses; graphs and W
    ("decent8.config", "decent8.figstyle", "decent8.layout"),  # options; the figures' house style; the flat parameter layout
    ("decent8.registry",),             # the one registry type of every component kind
    ("decent8.atomic", "decent8.own_files", "decent8.plugins", "decent8.signals", "decent8.streams",
     "decent8.user_code"),
    # atomic writes; files decent8 wrote; the import gate of user code; signals; per-node random streams
    ("decent8.dither_kernel",),        # the streams' dither codes as a C loop
    ("decent8.errors", "decent8.native", "decent8.node_axis", "decent8.seeding", "decent8.state_spec",
     "decent8.text_table", "decent8.version"),                 # no import of decent8 (native: the C libraries' loader)
)

_STARTUP = "start-up: the command's --help and option errors answer before this import (no torch)"
_STARTUP_OMEGACONF = "start-up: `decent8 --help` / `decent8 launch --help` import neither omegaconf nor torch"

#: the imports inside functions, (module, imported module) → why it is not at the top of the module.
#: Each one but those of :data:`ORDER_ONLY` defers a library (torch, omegaconf, …) that the module
#: itself does not import (checked by ``test_each_function_level_import_defers_a_library``).
LAZY: dict[tuple[str, str], str] = {
    ("decent8", "decent8.api"): "start-up: `import decent8` (and so every decent8 command) does not import torch; "
                                "decent8.train(...) imports the API when it is called",
    ("decent8.cli", "decent8.signals"): "order: the current folder leaves sys.path before anything is looked up "
                                        "there (a file in it must not shadow a library)",
    ("decent8.cli.main", "decent8.config"): _STARTUP_OMEGACONF,
    ("decent8.cli.launch_cmd", "decent8.config"): _STARTUP_OMEGACONF,
    ("decent8.cli.launch_cmd", "decent8.cli.train_cmd"): _STARTUP_OMEGACONF,
    ("decent8.cli.launch_cmd", "decent8.comm.placement"): _STARTUP,
    ("decent8.cli.launch_cmd", "decent8.train.build"): _STARTUP,
    ("decent8.cli.launch_cmd", "decent8.train.loop"): _STARTUP,
    ("decent8.cli.launch_cmd", "decent8.train.run_dir"): _STARTUP,
    ("decent8.cli.train_cmd", "decent8.train.loop"): _STARTUP,
    ("decent8.cli.train_cmd", "decent8.train.run_dir"): _STARTUP,
    ("decent8.train.eval_nodes", "decent8.seeding"): "start-up: `decent8 train` checks decent8.eval_nodes before "
                                                     "torch (train.validate); the seed is derived at evaluation",
}
#: function-level imports kept for the order of imports, not for a library
ORDER_ONLY = {("decent8.cli", "decent8.signals")}

#: third-party libraries whose import a function-level import may defer
LIBRARIES = ("torch", "numpy", "omegaconf", "yaml", "matplotlib", "sklearn", "transformers", "tensorboardX", "PIL")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {module_name(p): p for p in sorted((SRC / "decent8").rglob("*.py"))}


def package(module: str) -> str:
    """``decent8.train.loop`` → ``decent8.train``; a top-level module or the root is its own."""
    return ".".join(module.split(".")[:2])


def layer(pkg: str) -> int | None:
    """Index of ``pkg``'s layer in :data:`LAYERS` (0: the top), None when it has none."""
    return next((i for i, members in enumerate(LAYERS) if pkg in members), None)


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of the import nodes under ``if TYPE_CHECKING:``."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            out |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return out


def _in_functions(tree: ast.AST) -> set[int]:
    """ids of the import nodes inside a function (at any depth)."""
    return {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            for n in ast.walk(f) if isinstance(n, (ast.Import, ast.ImportFrom))}


def imports(module: str, path: Path) -> list[tuple[str, int, bool]]:
    """(imported decent8 module, line, inside a function) of every import statement of ``module``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip, lazy = _type_checking_only(tree), _in_functions(tree)
    pkg_parts = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    out = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno, id(node) in lazy) for a in node.names if a.name.split(".")[0] == "decent8"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg_parts[:len(pkg_parts) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "decent8":
                continue
            for a in node.names:  # `from pkg import submodule` imports the submodule
                sub = f"{target}.{a.name}"
                out.append((sub if sub in MODULES else target, node.lineno, id(node) in lazy))
    return sorted(set(out), key=lambda e: (e[1], e[0]))


GRAPH: dict[str, list[tuple[str, int, bool]]] = {m: imports(m, p) for m, p in MODULES.items()}


def package_graph() -> dict[str, dict[str, list[str]]]:
    """package → imported package → the ``module:line`` of each import (function-level ones included)."""
    out: dict[str, dict[str, list[str]]] = {package(m): {} for m in MODULES}
    for m, edges in GRAPH.items():
        for t, line, _ in edges:
            if package(t) != package(m):
                out[package(m)].setdefault(package(t), []).append(f"{m}:{line}")
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan, iterative)."""
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
                    work.append((w, iter(sorted(graph.get(w, ())))))
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
    return sorted(found)


def package_cycles() -> list[str]:
    """Each package cycle with the imports that close it."""
    pg = package_graph()
    out = []
    for comp in cycles({p: set(ts) for p, ts in pg.items()}):
        edges = [f"{a} -> {b} ({', '.join(pg[a][b][:3])})" for a in comp for b in comp if b in pg[a]]
        out.append("{" + ", ".join(comp) + "}: " + "; ".join(edges))
    return out


def upward_imports() -> list[str]:
    """Imports that do not go down the layers (up, or sideways within a layer)."""
    out = []
    for m, edges in GRAPH.items():
        for t, line, _ in edges:
            a, b = package(m), package(t)
            if a != b and layer(a) is not None and layer(b) is not None and layer(b) <= layer(a):
                out.append(f"{m}:{line} imports {t} ({a} is in layer {layer(a)}, {b} in layer {layer(b)})")
    return out


def function_level_imports() -> dict[tuple[str, str], list[int]]:
    """(module, imported module) → lines, of the imports inside functions."""
    out: dict[tuple[str, str], list[int]] = {}
    for m, edges in GRAPH.items():
        for t, line, lazy in edges:
            if lazy:
                out.setdefault((m, t), []).append(line)
    return out


def _graph_text() -> str:
    pg = package_graph()
    return "\n".join(f"  {p} -> {', '.join(sorted(pg[p])) or '-'}" for p in sorted(pg, key=lambda p: (layer(p) or 0, p)))


def test_every_package_has_a_layer():
    packages = {package(m) for m in MODULES}
    assert sorted(p for p in packages if layer(p) is None) == [], "give each new package a layer in LAYERS"
    listed = [p for members in LAYERS for p in members]
    assert len(listed) == len(set(listed)) and set(listed) <= packages


def test_every_import_names_an_existing_module():
    missing = [f"{m}:{line} imports {t}" for m, edges in GRAPH.items() for t, line, _ in edges if t not in MODULES]
    assert missing == []


def test_no_package_cycle():
    found = package_cycles()
    assert found == [], "package cycles (function-level imports included):\n" + "\n".join(found) + \
        "\npackage graph:\n" + _graph_text()


def test_every_import_goes_down_the_layers():
    up = upward_imports()
    assert up == [], "imports that do not go down the layers:\n" + "\n".join(up)


def test_no_module_cycle():
    graph = {m: {t for t, _, _ in edges if t in MODULES and t != m} for m, edges in GRAPH.items()}
    assert cycles(graph) == []


def test_imports_inside_functions_are_the_listed_ones():
    found = function_level_imports()
    unlisted = [f"{m}:{','.join(map(str, lines))} imports {t}" for (m, t), lines in sorted(found.items())
                if (m, t) not in LAZY]
    stale = [f"{m} -> {t}" for m, t in LAZY if (m, t) not in found]
    assert unlisted == [], ("imports inside functions that LAZY does not list (move them to the top of the module, "
                            "or list them with the reason):\n" + "\n".join(unlisted))
    assert stale == [], "LAZY lists imports the code no longer has:\n" + "\n".join(stale)
    assert all(reason.strip() for reason in LAZY.values())


def _libraries_at_import() -> dict[str, set[str]]:
    """module → the libraries of :data:`LIBRARIES` that importing it imports (its module-level
    imports, transitively, each module after its parent packages)."""
    third: dict[str, set[str]] = {}
    for m, p in MODULES.items():
        tree = ast.parse(p.read_text(encoding="utf-8"))
        skip = _type_checking_only(tree) | _in_functions(tree)
        names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) and id(n) not in skip for a in n.names]
        names += [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and id(n) not in skip
                  and not n.level and n.module]
        third[m] = {x.split(".")[0] for x in names} & set(LIBRARIES)
    out: dict[str, set[str]] = {}
    for m in MODULES:
        seen: set[str] = set()
        stack = [m]
        while stack:
            parts = stack.pop().split(".")
            for c in (".".join(parts[:i]) for i in range(1, len(parts) + 1)):
                if c in MODULES and c not in seen:
                    seen.add(c)
                    stack += [t for t, _, lazy in GRAPH[c] if not lazy]
        out[m] = set().union(*(third[c] for c in seen))
    return out


def test_each_function_level_import_defers_a_library():
    libs = _libraries_at_import()
    useless = [f"{m} -> {t}: {sorted(libs[t])} are imported by {m} anyway" for m, t in LAZY
               if (m, t) not in ORDER_ONLY and m in libs and t in libs and not libs[t] - libs[m]]
    assert useless == [], "function-level imports that defer nothing (move them to the top):\n" + "\n".join(useless)


def test_the_command_line_stays_torch_free():
    libs = _libraries_at_import()
    light = ["decent8", "decent8.cli.main", "decent8.cli.train_cmd", "decent8.cli.launch_cmd", "decent8.config",
             "decent8.algorithms", "decent8.train.validate"]
    assert {m: sorted(libs[m] & {"torch", "matplotlib", "sklearn"}) for m in light} == {m: [] for m in light}
    assert not libs["decent8.cli.main"] & {"omegaconf", "yaml"}


@pytest.mark.parametrize("graph, expected", [
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
    ({"a": {"b"}, "b": set()}, []),
])
def test_the_cycle_finder_finds_cycles(graph, expected):
    assert cycles(graph) == expected


def test_the_reader_sees_function_level_and_relative_imports(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import decent8.config\ndef f():\n    from ..cli.main import main\n    from . import zoo\n"
                 "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..train import loop\n")
    assert imports("decent8.models.x", f) == [("decent8.config", 1, False), ("decent8.cli.main", 3, True),
                                              ("decent8.models.zoo", 4, True)]
    assert package("decent8.models.zoo") == "decent8.models" and package("decent8.config") == "decent8.config"
    assert layer("decent8.cli") == 1 and layer("decent8.new_package") is None


def main() -> None:
    """Print the contract and what breaks it."""
    lazy = function_level_imports()
    print("layers (top down):")
    for i, members in enumerate(LAYERS):
        print(f"  {i:2d}  {'  '.join(members)}")
    print("package graph:\n" + _graph_text())
    print(f"imports inside functions: {sum(len(v) for v in lazy.values())} statements, "
          f"{len(lazy)} (module, imported module) pairs in {len({m for m, _ in lazy})} modules; "
          f"listed in LAZY: {len(LAZY)}")
    for (m, t), reason in sorted(LAZY.items()):
        print(f"  {m} -> {t}: {reason}")
    found = package_cycles()
    print(f"package cycles: {len(found)}" + "".join(f"\n  {c}" for c in found))
    up = upward_imports()
    print(f"imports not going down the layers: {len(up)}" + "".join(f"\n  {u}" for u in up))
    unlisted = sorted(k for k in lazy if k not in LAZY)
    print(f"unlisted imports inside functions: {len(unlisted)}" + "".join(f"\n  {m} -> {t}" for m, t in unlisted))


if __name__ == "__main__":
    main()
