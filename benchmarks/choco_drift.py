"""Choco-SGD's long-horizon float32 drift, before and after issue 12 (prints the numbers
of docs/results/choco_numerics.md). Uses the problems of tests/train/test_long_horizon.py.

    PYTHONPATH=src python benchmarks/choco_drift.py
"""
from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from tests.train.test_long_horizon import (RunningSumChoco, _algos, _irregular_7, _push_sum_gossip,  # noqa: E402
                                     _quadratic_problem, _train)
from decent8.compression import make_compressor  # noqa: E402
from decent8.layout import ParamLayout  # noqa: E402


def main() -> None:
    a, c, xstar = _quadratic_problem()
    ref, new = _algos()
    _, old = _algos(RunningSumChoco)
    zr = _train(ref, a, c, 20_000)
    zn = _train(new, a, c, 20_000)
    zo = _train(old, a, c, 20_000)
    print("convex, 8 nodes, ring (doubly stochastic), identity, 20,000 steps:")
    print(f"  D-PSGD dist to optimum {(zr.double().mean(0) - xstar).norm().item():.3e}")
    print(f"  new: max|x_choco - x_dpsgd| {(zn - zr).abs().max().item():.2e}  "
          f"max|mean_i(s_i - x̂_i)| {new.residual.double().mean(0).abs().max().item():.2e}")
    print(f"  old: max|x_choco - x_dpsgd| {(zo - zr).abs().max().item():.2e}  "
          f"max|mean_i(s_i - x̂_i)| {(old.s - old.x_hat).double().mean(0).abs().max().item():.2e}")
    topo = _irregular_7(pathlib.Path("/tmp"))
    for comp, gamma in (("identity", 1.0), ("topk", 0.1)):
        compressor = make_compressor(comp, ParamLayout.single(20), ratio=0.9)
        for label, cls in (("new", None), ("old", RunningSumChoco)):
            kw = {} if cls is None else {"cls": cls}
            curve = _push_sum_gossip(topo, compressor, gamma, 5000, **kw)
            pts = "  ".join(f"{(i + 1) * 1000}: {cd:.1e}/{err:.1e}" for i, (cd, err) in enumerate(curve))
            print(f"push-sum 7-node digraph, {comp} γ={gamma}, {label} (consensus/error-to-average) {pts}")


if __name__ == "__main__":
    main()
