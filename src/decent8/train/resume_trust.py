"""What code a resumed run may import.

A run folder is data: a copied or downloaded one must not run code on ``--resume``.
Its ``config.yaml`` may name code by import path (``model=pkg.module:factory``,
``loss=pkg.module:function``, ``algorithm=``, ``compression=pkg.module:Class``,
``topology=pkg.module:function``, ``metrics=pkg.module:function``, ``byzantine.attack=`` and
``byzantine.aggregator=pkg.module:Name``); on resume such code runs only if the user names it again
on the command line (``--resume RUN model=pkg.module:factory``) or passes
``--trust-config``. A module that lies inside the run folder never runs, trusted or not.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Iterable

from ..errors import ConfigError
from ..config import _parse_override
from ..config import flatten, to_dict
from ..plugins import is_import_path
from ..plugins import module_files, run_folder_of
from ..plugins import read_as_data

#: options whose value may be an import path, i.e. code that runs when the run is built
CODE_OPTIONS = ("model.name", "loss", "algorithm.name", "topology.name", "compression.name", "metrics",
                "byzantine.attack", "byzantine.aggregator")
#: a group's shorthand on the command line (``model=x`` is ``model.name=x``)
_SHORTHAND = {"model": "model.name", "algorithm": "algorithm.name", "topology": "topology.name",
              "compression": "compression.name"}


def restated_code(overrides: Iterable[str], run_dir: str | os.PathLike) -> dict[str, str]:
    """The ``key=value`` arguments given with ``--resume``: only code options may be named
    (again), as ``{option: import path}``; anything else is refused in one line."""

    named: dict[str, str] = {}
    for item in overrides:
        key, value = _parse_override(item)
        key = _SHORTHAND.get(key, key)
        if key not in CODE_OPTIONS or not isinstance(value, str):
            raise ConfigError("resume", f"takes no config or overrides (the run folder's config.yaml is used as "
                                        f"saved), except naming again the code it runs, e.g. --resume {run_dir} "
                                        f"model=pkg.module:factory; got {item[:80]!r}")
        named[key] = value
    return named


def code_options(cfg: Any) -> dict[str, str]:
    """The import paths a config names, by option."""

    flat = flatten(to_dict(cfg))
    return {k: flat[k] for k in CODE_OPTIONS if is_import_path(flat.get(k))}


def module_inside(import_path: str, folder: str | os.PathLike) -> Path | None:
    """The file or package folder, inside ``folder``, that importing ``import_path`` would
    run (or None), on ``sys.path`` with the current folder first (the widest path an import
    may use, whatever the way decent8 was started). Found without importing anything:
    importing a package to locate it would already run its ``__init__.py``; sourceless
    ``.pyc``, extension modules, packages and namespace folders count (:mod:`decent8.plugins`)."""

    root = Path(folder).resolve()
    for f in module_files(import_path.split(":", 1)[0], [os.getcwd(), *sys.path]):
        if run_folder_of(f, [root]) is not None:
            return f
    return None


def check_resume_code(cfg: Any, run_dir: str | os.PathLike, named: dict[str, str] | None, trust: bool) -> None:
    """Refuse (one line) to build a resumed run whose config names code the user did not
    name again (unless ``trust``), or code that lives inside the run folder."""

    read_as_data(run_dir)   # data from now on: off sys.path, nothing inside it is imported
    named = named or {}
    saved = code_options(cfg)
    for option, value in named.items():
        current = saved.get(option)
        if current != value:
            raise ConfigError("resume", f"{option}={value} is not what {run_dir} was trained with "
                                        f"({option}={current}); a resumed run keeps its config")
    for option, value in saved.items():
        inside = module_inside(value, run_dir)
        if inside is not None:
            raise ConfigError("resume", f"{Path(run_dir) / 'config.yaml'} names {option}={value}, code inside the run "
                                        f"folder ({inside}); decent8 never runs code from a run folder")
        if not trust and option not in named:
            raise ConfigError("resume", f"{Path(run_dir) / 'config.yaml'} names code ({option}={value}); a resumed "
                                        f"run imports it only if you name it again: --resume {run_dir} "
                                        f"{option}={value} (or pass --trust-config)")


__all__ = ["CODE_OPTIONS", "restated_code", "code_options", "module_inside", "check_resume_code"]
