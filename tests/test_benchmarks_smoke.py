"""Every benchmark runs: each ``benchmarks/*.py`` with ``DECENT8_BENCH_SMOKE=1`` (tiny sizes, no
CUDA, no git history) exits 0 and prints a markdown table; each ``benchmarks/*.sh`` parses."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p.name for p in (REPO / "benchmarks").glob("*.py"))
SHELL = sorted(p.name for p in (REPO / "benchmarks").glob("*.sh"))
TABLE = re.compile(r"^\|.*\|\s*$", re.MULTILINE)


def _run(name: str, tmp: Path) -> tuple[int, str, str, float]:
    env = {**os.environ, "DECENT8_BENCH_SMOKE": "1", "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1",
           "CUDA_VISIBLE_DEVICES": "", "DECENT8_BENCH_TMP": str(tmp)}
    t0 = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, f"benchmarks/{name}"], cwd=REPO, env=env, capture_output=True,
                           text=True, timeout=300)
        return p.returncode, p.stdout, p.stderr, time.perf_counter() - t0
    except subprocess.TimeoutExpired as e:
        return -1, str(e.stdout or ""), f"timed out after {e.timeout} s", time.perf_counter() - t0


@pytest.fixture(scope="module")
def smoke_runs(tmp_path_factory) -> dict[str, tuple[int, str, str, float]]:
    """All scripts, three at a time (most of each run is starting Python and importing torch)."""
    tmp = tmp_path_factory.mktemp("bench")
    with ThreadPoolExecutor(max_workers=3) as pool:
        return dict(zip(SCRIPTS, pool.map(lambda n: _run(n, tmp), SCRIPTS)))


@pytest.mark.slow   # ~35 Python processes importing torch: about 2 CPU-minutes
@pytest.mark.parametrize("name", SCRIPTS)
def test_benchmark_smoke_runs_and_prints_a_table(name, smoke_runs):
    rc, out, err, seconds = smoke_runs[name]
    assert rc == 0, f"{name} exited {rc} after {seconds:.0f} s:\n{err[-3000:]}"
    assert TABLE.search(out), f"{name} printed no table:\n{out[-2000:]}"


@pytest.mark.parametrize("name", SHELL)
def test_benchmark_shell_script_parses(name):
    subprocess.run(["bash", "-n", str(REPO / "benchmarks" / name)], check=True)


def test_no_benchmark_imports_the_tests():
    for path in (REPO / "benchmarks").glob("*.py"):
        text = path.read_text()
        assert not re.search(r"^\s*(from|import)\s+tests\b", text, re.MULTILINE), path.name
