"""No algorithm is special-cased outside ``decent8/algorithms/`` (issue: "your algorithm in
one file"): no string constant in decent8's code outside that package equals a registered
algorithm name, and nothing asks which family an algorithm belongs to.

Prose (docstrings, help text, comments) may mention algorithms: only a string that *is* a
name — ``"choco"``, ``("deepsqueeze", "sparse_push")``, a dict key — is a special case.
The documented experiments (``experiments/findings.py``, ``presets.py``, ``regenerate/catalog.py``)
are data: they name the algorithms they measure, as a config file would."""
from __future__ import annotations

import ast
from pathlib import Path

from decent8.algorithms import algorithm_names

SRC = Path(__file__).resolve().parents[2] / "src" / "decent8"
#: files that are data naming algorithms (the documented experiments)
DATA = {"experiments/findings.py", "experiments/presets.py", "experiments/regenerate/catalog.py"}
#: (file, value): a string equal to an algorithm name that is not one
NOT_ALGORITHMS = {("config.py", "marsit"),   # the old name of the option group allreduce (RENAMED_GROUPS)
                  ("config.py", "choco")}    # DEFAULT_ALGORITHM: the default config names its algorithm, as a
                                             # config file would (in config, the bottom layer: tests/test_layering.py)
#: attributes / names that ask what kind of algorithm a caller holds
FAMILY_QUESTIONS = {"ALLREDUCE_ALGORITHMS", "GOSSIP_ALGORITHMS", "aggregates_updates"}


def offences(root: Path = SRC) -> list[str]:
    names = set(algorithm_names())
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("algorithms/") or rel in DATA:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names \
                    and (rel, node.value) not in NOT_ALGORITHMS:
                found.append(f"{rel}:{node.lineno}: {node.value!r}")
            elif isinstance(node, ast.Attribute) and node.attr in FAMILY_QUESTIONS \
                    or isinstance(node, ast.Name) and node.id in FAMILY_QUESTIONS:
                found.append(f"{rel}:{node.lineno}: {getattr(node, 'attr', getattr(node, 'id', ''))}")
            elif isinstance(node, ast.alias) and node.name in FAMILY_QUESTIONS:
                found.append(f"{rel}:{node.lineno}: import {node.name}")
            elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "getattr" and len(node.args) > 1 \
                    and isinstance(node.args[1], ast.Constant) and node.args[1].value == "consensus_step":
                found.append(f"{rel}:{node.lineno}: getattr(..., 'consensus_step')")
    return found


def test_no_algorithm_name_outside_the_algorithms_package():
    assert offences() == []


def test_the_scan_finds_a_special_case(tmp_path):
    (tmp_path / "bad.py").write_text('def gamma(name):\n    return 1.0 if name in ("deepsqueeze", "x") else 5.0\n'
                                     'from decent8.algorithms import ALLREDUCE_ALGORITHMS\n'
                                     '"""Prose may say choco."""\n')
    assert sorted(offences(tmp_path)) == ["bad.py:2: 'deepsqueeze'", "bad.py:3: import ALLREDUCE_ALGORITHMS"]
