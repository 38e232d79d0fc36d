"""The documented result tables, generated from the current code.

Every number in README.md and docs/results/ that this module knows sits between
markers ``<!-- results:NAME -->`` and ``<!-- /results:NAME -->``; the text between them is
exactly what :func:`render` prints for the runs of :data:`RESULTS`. So

    python -m decent8.experiments.regenerate            # rerun everything, rewrite the docs
    python -m decent8.experiments.regenerate main_job   # one table
    python -m decent8.experiments.regenerate --check    # rerun, compare, write nothing (exit 1 if stale)
    python -m decent8.experiments.regenerate --print --cache DIR heterogeneity
                                                        # print only; keep/reuse each run's summary in DIR

keeps the documents honest. :data:`RESULTS` are tables of run summaries (cells × seeds);
:data:`PRICED` are sweeps priced on a network model by ``decent8.experiments.tta`` (the
time-to-accuracy page), one marker per table. Cheap subsets are rerun by the tests: the README's main-job
row (tests/experiments/test_regenerate.py), seed 0 of three cells of the Marsit table
(tests/algorithms/test_marsit_accuracy.py). Result tables of docs/results/ that are not listed here
say so in place ("measured once, with the code as of commit X, with command Y").

The runs pin ``sim.chunk=8`` (8 nodes in one vmap call) unless a row names its own (the
README's main job: ``layers:8``, what ``sim.chunk=auto`` now picks for the digits CNN on
a 2-core CPU): other executions compute the same math with other float rounding, which
over 60 epochs moves a final accuracy by up to ~0.4 points (main job, seed 0: 97.43 %
with ``8``, 97.53 % with ``layers:4``, 97.81 % with ``layers:8``).

The CPU's vector kernels round differently too: the same run on AVX-512 kernels ends at
97.92 % instead of 97.81 % (main job, seed 0, AMD EPYC). The documented numbers are
computed with PyTorch's AVX2 kernels (:data:`REFERENCE_KERNELS`; this module and the
test suite set them, any x86-64 CPU of the last decade has them), so they reproduce
exactly on AVX2 and AVX-512 machines of the reference CPU's vendor
(:data:`~.kernels.REFERENCE_CPU_VENDOR`, an Intel Xeon): MKL and oneDNN also pick their
code paths by vendor, so an AMD CPU ends a few tenths away. A plain ``decent8 train`` uses
the fastest kernels of its CPU; ``ATEN_CPU_CAPABILITY=avx2 DNNL_MAX_CPU_ISA=AVX2
MKL_ENABLE_INSTRUCTIONS=AVX2 decent8 train`` gives the documented digits.
"""
from .catalog import PINNED, PRICED, REPO, RESULTS, Priced, Result
from .cli import main
from .documents import documented, documented_cell, write
from .kernels import REFERENCE_KERNELS, use_reference_kernels
from .render import FORMAT, render, render_row
from .run import price, run_cells, run_one

__all__ = ["FORMAT", "PINNED", "PRICED", "REFERENCE_KERNELS", "REPO", "RESULTS", "Priced", "Result", "documented",
           "documented_cell", "main", "price", "render", "render_row", "run_cells", "run_one", "use_reference_kernels",
           "write"]
