"""Issue must-show on the embedded digits data (8 nodes, directed ring, the main job's settings).

D-PSGD at skew 0 reaches ≥ 93 %; Choco-SGD with 99 % top-k is within 3 points of it;
non-IID data (skew 0.9) costs Choco accuracy. The runs are seed 0 of the
cells of docs/results/engine_digits.md (``python -m decent8.experiments.regenerate
engine_digits``, the same execution), and the non-IID run is the README's main job,
shared with tests/experiments/test_regenerate.py (one run per session).
"""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow   # long training runs: `pytest -m slow` runs them

from decent8.experiments.regenerate import RESULTS, run_one


@pytest.fixture(scope="module")
def results(tmp_path_factory, main_job_summary):
    d = str(tmp_path_factory.mktemp("digits"))
    table = RESULTS["engine_digits"]
    cells = {label: i for i, (label, _) in enumerate(table.cells)}
    return {
        "dpsgd_s0": run_one(table, cells["D-PSGD, fp32, skew 0"], 0, d)["mean_node_accuracy"],
        "choco_s0": run_one(table, cells["Choco-SGD, top-k 99 %, skew 0"], 0, d)["mean_node_accuracy"],
        "choco_s08": main_job_summary["mean_node_accuracy"],
        "choco_s09": run_one(table, cells["Choco-SGD, top-k 99 %, skew 0.9"], 0, d)["mean_node_accuracy"],
    }


def test_dpsgd_iid_reaches_93_percent(results):
    assert results["dpsgd_s0"] >= 0.93


def test_choco_top1_percent_within_3_points_of_dpsgd(results):
    assert results["choco_s0"] >= results["dpsgd_s0"] - 0.03


def test_skew_costs_accuracy(results, main_job_summary):
    """Skew 0.9 costs Choco accuracy (2.6 points over seeds 0–2 in docs/results/engine_digits.md);
    at the main job's 0.8 the cost is within one seed's spread (−0.3 to +0.6 points by CPU)."""
    assert main_job_summary["skew"] == 0.8 and main_job_summary["compression"] == "topk"
    assert results["choco_s09"] < results["choco_s0"]
    assert results["choco_s08"] < results["choco_s0"] + 0.01
