"""Choco-SGD's long-horizon float32 drift, before and after issue 12 (prints the numbers
of docs/results/choco_numerics.md). The problems of decent8.experiments.problems (also
those of tests/train/test_long_horizon.py); "old" is ``RunningSumChoco``, the earlier
float32 running sum, built through the same ``Algorithm.from_context`` as "new".

    PYTHONPATH=src python benchmarks/choco_drift.py

``DECENT8_BENCH_SMOKE=1``: 200 convex steps and 1,000 gossip rounds (a check that it runs).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from decent8.compression import make_compressor  # noqa: E402
from decent8.experiments.problems import (RunningSumChoco, dpsgd_and, irregular_7, push_sum_gossip,  # noqa: E402
                                          quadratic_problem, train_quadratic)
from decent8.layout import ParamLayout  # noqa: E402

SMOKE = os.environ.get("DECENT8_BENCH_SMOKE", "") not in ("", "0")


def main() -> None:
    steps, rounds = (200, 1000) if SMOKE else (20_000, 5000)
    a, c, xstar = quadratic_problem()
    ref, new = dpsgd_and()
    _, old = dpsgd_and(RunningSumChoco)
    zr = train_quadratic(ref, a, c, steps)
    zn = train_quadratic(new, a, c, steps)
    zo = train_quadratic(old, a, c, steps)
    print(f"convex, 8 nodes, ring (doubly stochastic), identity, {steps:,} steps:")
    print(f"  D-PSGD dist to optimum {(zr.double().mean(0) - xstar).norm().item():.3e}")
    print(f"  new: max|x_choco - x_dpsgd| {(zn - zr).abs().max().item():.2e}  "
          f"max|mean_i(s_i - x̂_i)| {new.residual.double().mean(0).abs().max().item():.2e}")
    print(f"  old: max|x_choco - x_dpsgd| {(zo - zr).abs().max().item():.2e}  "
          f"max|mean_i(s_i - x̂_i)| {(old.s - old.x_hat).double().mean(0).abs().max().item():.2e}")
    topo = irregular_7()
    print("\n| digraph | compression | Choco | consensus / error-to-average every 1,000 rounds |")
    print("|---|---|---|---|")
    for comp, gamma in (("identity", 1.0), ("topk", 0.1)):
        compressor = make_compressor(comp, ParamLayout.single(20), ratio=0.9)
        for label, cls in (("new", None), ("old", RunningSumChoco)):
            kw = {} if cls is None else {"cls": cls}
            curve = push_sum_gossip(topo, compressor, gamma, rounds, **kw)
            pts = "  ".join(f"{(i + 1) * 1000}: {cd:.1e}/{err:.1e}" for i, (cd, err) in enumerate(curve))
            print(f"| push-sum, 7 nodes | {comp} γ={gamma} | {label} | {pts} |", flush=True)


if __name__ == "__main__":
    main()
