"""The ``test`` extra of pyproject.toml is installed, and no test skips when one of its
packages is missing: such a test imports it and fails instead (CI installs ``.[test]``)."""
from __future__ import annotations

import importlib
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: distribution name -> module name, where they differ
MODULES = {"pytest-xdist": "xdist", "mlflow-skinny": "mlflow", "tensorboardx": "tensorboardX"}


def extra_names() -> list[str]:
    """The distributions of the ``test`` extra, lower case."""
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
    return [re.split(r"[<>=!~;\[ ]", req, maxsplit=1)[0].strip().lower() for req in extra]


def extra_modules() -> list[str]:
    return [MODULES.get(n, n) for n in extra_names()]


def test_the_tracking_backends_are_in_the_test_extra():
    assert {"mlflow-skinny", "wandb", "transformers", "tensorboardx"} <= set(extra_names())


@pytest.mark.parametrize("module", extra_modules())
def test_the_test_extra_is_installed(module):
    importlib.import_module(module)


def test_no_test_skips_for_a_package_of_the_test_extra():
    modules = extra_modules()
    skip = re.compile(r"importorskip\(\s*['\"]([\w.]+)|find_spec\(\s*['\"]([\w.]+)")
    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for m in skip.finditer(path.read_text()):
            name = (m.group(1) or m.group(2)).split(".")[0]
            if name in modules:
                found.append(f"{path.relative_to(ROOT)}: {m.group(0)}")
    assert not found, "a package of the test extra is imported, not skipped:\n" + "\n".join(found)
