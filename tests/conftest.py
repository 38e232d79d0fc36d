"""Test-wide set-up: every test writes decoded data sets to a temporary cache, not ~/.cache.

The ``slow`` marker (registered in pyproject.toml) tags the long accuracy and
multi-process tests; ``python3 -m pytest -m "not slow"`` is the fast subset.
"""
from __future__ import annotations

import pytest


@pytest.fixture(autouse=True, scope="session")
def _temporary_cache(tmp_path_factory):
    """XDG_CACHE_HOME -> a session temporary folder (subprocesses inherit it)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))
    yield
    mp.undo()


@pytest.fixture(scope="session")
def main_job_summary(tmp_path_factory):
    """The README's main job (`decent8 train`, seed 0, the documented execution), run once per
    session: test_regenerate compares its row with the README, test_digits_accuracy uses it as
    the non-IID (skew 0.8) Choco run."""
    from decent8.experiments.regenerate import RESULTS, run_one
    return run_one(RESULTS["main_job"], 0, 0, str(tmp_path_factory.mktemp("main_job")))
