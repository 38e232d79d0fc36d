"""Test-wide set-up: the documented numbers' AVX2 kernels; decoded data sets go to a temporary cache, not ~/.cache.

The suite runs on every core with pytest-xdist (``-n auto --dist loadfile`` in
pyproject.toml: a file's tests stay on one worker, so module fixtures run once);
``-n 0`` runs it in one process. The ``slow`` marker (registered in pyproject.toml) tags the long accuracy and
multi-process tests, which the default run skips (``-m "not slow"`` in pyproject.toml);
``python3 -m pytest -m slow`` runs them.
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


#: the longest files in CI (2 cores; the top of ``--durations``), longest first. pytest-xdist
#: hands whole files to its workers in collection order (``--dist loadfile
#: --no-loadscope-reorder`` in pyproject.toml): starting with these, the workers end together
#: instead of one of them running a long file alone at the end.
LONGEST_FIRST = (
    "tests/cli/test_fuzz_whole_commands.py",      # 220 whole commands
    "tests/end_to_end/test_robust.py",            # 20 signals at random moments
    "tests/comm/test_distributed.py",             # gloo process groups
    "tests/comm/test_hybrid.py",
    "tests/algorithms/test_marsit_accuracy.py",   # three 60-epoch runs of a documented table
    "tests/cli/test_fuzz_cli.py",
    "tests/algorithms/test_defaults.py",
    "tests/models/test_compile.py",
    "tests/train/test_digits_accuracy.py",        # the main job (shared with test_regenerate.py)
    "tests/algorithms/test_extending.py",
    "tests/models/test_transformers.py",
    "tests/models/test_user_models.py",
)


def pytest_collection_modifyitems(config, items):
    """Files in :data:`LONGEST_FIRST` order, then the others by number of tests (what
    xdist's own reordering does); a file's tests keep their order."""
    files = [item.nodeid.split("::")[0] for item in items]
    count = {f: files.count(f) for f in set(files)}
    first = {f: files.index(f) for f in reversed(files)}
    rank = {f: i for i, f in enumerate(LONGEST_FIRST)}
    order = sorted(range(len(items)), key=lambda i: (rank.get(files[i], len(rank)),
                                                     -count[files[i]], first[files[i]], i))
    items[:] = [items[i] for i in order]


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
