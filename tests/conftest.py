"""Test-wide set-up: the documented numbers' AVX2 kernels; decoded data sets go to a temporary cache, not ~/.cache.

The suite runs on every core with pytest-xdist (``-n auto --dist loadfile`` in
pyproject.toml: a file's tests stay on one worker, so module fixtures run once);
``-n 0`` runs it in one process. The ``slow`` marker (registered in pyproject.toml) tags the long accuracy and
multi-process tests; ``python3 -m pytest -m "not slow"`` is the fast subset.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from decent8.experiments.regenerate import use_reference_kernels

# The documented numbers' CPU kernels (AVX2), chosen before any test runs a kernel: the tests
# that rerun a documented table compare exact digits, and AVX-512 kernels round differently.
use_reference_kernels()


def _share_cores_between_workers() -> None:
    """Under pytest-xdist (``-n auto`` in pyproject.toml) each worker gets its share of the
    cores, and the processes a test starts inherit it (no oversubscription)."""
    import torch

    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        threads = max(1, (os.cpu_count() or 1) // workers)
        torch.set_num_threads(threads)
        os.environ.setdefault("OMP_NUM_THREADS", str(threads))


_share_cores_between_workers()


@pytest.fixture
def one_thread():
    """One thread for the test: float results (and the compiled kernels' reductions) then do not
    depend on how a machine's cores split the work."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(autouse=True, scope="session")
def _temporary_cache(tmp_path_factory):
    """XDG_CACHE_HOME and torch.compile's kernel cache -> session temporary folders (subprocesses
    inherit them): no test reads kernels that another session built for other CPU kernels
    (an AVX-512 build loaded under the AVX2 selection aborted the process)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))
    mp.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path_factory.mktemp("inductor-cache")))
    yield
    mp.undo()


def _session_folder(tmp_path_factory) -> Path:
    """A folder of this pytest session that its xdist workers share (each worker's temporary
    folder sits in it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def main_job_summary(tmp_path_factory):
    """The README's main job (`decent8 train`, seed 0, the documented execution), run once per
    session, whichever xdist workers ask for it (a lock and run_one's summary cache in the
    session's shared folder): test_regenerate compares its row with the README,
    test_digits_accuracy uses it as the non-IID (skew 0.8) Choco run."""
    import fcntl
    import json

    from decent8.experiments.regenerate import RESULTS, run_one

    shared = _session_folder(tmp_path_factory)
    with open(shared / "main_job.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)     # the other worker waits for the run, then reads its summary
        run_one(RESULTS["main_job"], 0, 0, str(tmp_path_factory.mktemp("main_job")), cache=str(shared / "main_job"))
    (summary,) = (shared / "main_job").glob("*.json")
    return json.loads(summary.read_text(encoding="utf-8"))
