"""The documented numbers come from the current code (decent8.experiments.regenerate)."""
from __future__ import annotations

import platform

import pytest
import torch

from decent8.experiments.regenerate.kernels import on_reference_cpu
from decent8.experiments.regenerate import (PRICED, RESULTS, Result, documented, documented_cell, main, render,
                                            render_row)


def test_every_documented_table_has_its_markers():
    for result in RESULTS.values():
        table = documented(result)
        assert table is not None, f"{result.doc} lacks <!-- results:{result.name} --> markers"
        assert table.startswith("| run (") and f"regenerate {result.name}`" in table, f"{result.name}: not generated"
    for priced in PRICED.values():
        for table, _ in priced.tables:
            text = documented(priced, priced.marker(table))
            assert text is not None and text.startswith("| run |"), f"{priced.doc} lacks {priced.marker(table)}"


def test_rendering_per_seed_columns_and_diverged_runs():
    r = Result("x", "README.md", [("a", []), ("b", [])], seeds=(0, 1), columns=("per_seed", "message_bytes"))
    runs = {"a": [{"mean_node_accuracy": 0.5, "message_bytes": 2184}, {"mean_node_accuracy": 0.75, "message_bytes": 2184}],
            "b": [None, {"mean_node_accuracy": 1.0, "message_bytes": 1}]}
    lines = render(r, runs).splitlines()
    assert lines[0] == "| run (seeds 0, 1) | seed 0 | seed 1 | mean node acc.: mean ± std | message B / step |"
    assert lines[2] == "| a | 50.00 | 75.00 | 62 ± 18 % | 2,184 |"          # std of (50, 75) = 17.68
    assert lines[3] == "| b | diverged | 100.00 | 100.00 % (1 of 2 diverged) | 1 |"
    assert render_row(r, "a", runs["a"]) == lines[2]
    assert documented_cell(r, "a", "seed 1", text=render(r, runs)) == "75.00"
    assert documented_cell(r, "b", "message B / step", text=render(r, runs)) == "1"


def test_unknown_table_is_one_line_exit_2(capsys):
    assert main(["no_such_table"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


@pytest.mark.slow
@pytest.mark.skipif(not on_reference_cpu(), reason="the README's digits are the reference CPU's (an Intel Xeon); an AMD "
                                                   "CPU's MKL / oneDNN take other AVX2 code paths (docs/execution.md)")
def test_main_job_row_of_the_readme_reproduces_exactly(main_job_summary):
    result = RESULTS["main_job"]
    assert render(result, {result.cells[0][0]: [main_job_summary]}) == documented(result)


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="AVX2 is an x86-64 instruction set")
def test_the_suite_runs_the_documented_numbers_kernels():
    # conftest selects them before any kernel runs; AVX-512 kernels would change the documented digits
    assert torch.backends.cpu.get_cpu_capability() == "AVX2"


def test_importing_decent8_runs_no_kernel_so_the_kernel_family_stays_selectable():
    """ATen fixes its CPU kernel family at the first kernel it runs; `regenerate` (and the
    suite's conftest) select the documented numbers' AVX2 kernels after importing decent8, so
    no decent8 module may run a kernel at import (a module-level torch.zeros did)."""
    import subprocess
    import sys

    code = ("import os, torch\n"
            "import decent8.cli.main, decent8.experiments.regenerate, decent8.train.loop, decent8.models, "
            "decent8.quant, decent8.comm, decent8.timing, decent8.algorithms, decent8.compression\n"
            "os.environ['ATEN_CPU_CAPABILITY'] = 'default'\n"
            "print(torch.backends.cpu.get_cpu_capability())\n")
    env = {k: v for k, v in __import__("os").environ.items() if k != "ATEN_CPU_CAPABILITY"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == "DEFAULT"
