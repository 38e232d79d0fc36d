"""Deep-Squeeze vs Choco-SGD with 99 % top-k on a small tensors-only problem (issue 12).

8 nodes on a ring, d = 2,000, IID quadratic f(x) = ½‖x − c‖² with stochastic
gradients x − c + ξ (ξ ~ N(0, 1), fresh per node and step; plain SGD, lr 0.05, all
nodes start at the same x0) — the skew-0 setting of issue 12. Prints, per γ, after `--steps` steps:
the mean size of the sent values ‖c‖ / ‖x‖ (Deep-Squeeze sends entries of x½ + e),
the error buffer ‖e‖ / ‖x‖, the consensus distance and the distance of the node
average to the optimum mean(c_i). A numpy transcription of SPEC §3's formula is
run alongside the first γ and must agree step by step (max abs difference printed).

    python benchmarks/deepsqueeze_probe.py [--steps 2000]

Algorithms built through ``Algorithm.from_context`` on the simulator
(``decent8.experiments.problems.make``). ``DECENT8_BENCH_SMOKE=1``: 20 steps (a check that it runs).
"""
from __future__ import annotations

import argparse
import os

import numpy as np
import torch

from decent8.compression import make_compressor
from decent8.experiments.problems import make
from decent8.layout import ParamLayout
from decent8.topology import make_topology

N, D, LR = 8, 2000, 0.05
SMOKE = os.environ.get("DECENT8_BENCH_SMOKE", "") not in ("", "0")


def spec_deepsqueeze_step(x_half: np.ndarray, e: np.ndarray, w: np.ndarray, keep: int, gamma: float):
    """SPEC §3 in numpy: v = x½ + e; c = top-k(v); e ← v − c; x ← x½ + γ Σ_j (W_ij − δ_ij) c_j."""
    v = x_half + e
    c = np.zeros_like(v)
    for i in range(v.shape[0]):
        idx = np.argsort(-np.abs(v[i]), kind="stable")[:keep]
        c[i, idx] = v[i, idx]
    return x_half + gamma * ((w - np.eye(len(w))) @ c), v - c


def run(name: str, gamma: float, steps: int, check: bool = False) -> str:
    topo = make_topology("ring", N)
    comp = make_compressor("topk", ParamLayout.single(D), ratio=0.99)
    algo = make(name, topo, comp, gamma, False)
    g = torch.Generator().manual_seed(0)
    c_i = torch.randn(1, D, generator=g).repeat(N, 1)
    z = (0.1 * torch.randn(1, D, generator=g)).repeat(N, 1)
    algo.init_state(z)
    w = topo.weights_np(0)
    zn, en = z.double().numpy().copy(), np.zeros((N, D))
    worst, sent, sizes = 0.0, [], []
    for t in range(steps):
        grad = z - c_i + torch.randn(N, D, generator=g)
        if check:
            zn, en = spec_deepsqueeze_step(zn - LR * grad.double().numpy(), en, w, int(D * 0.01), gamma)
        z.sub_(LR * grad)
        before = z.clone()
        if name == "deepsqueeze":
            v = z + algo.error
        algo.step(z, t)
        if name == "deepsqueeze":
            sent.append(((v - algo.error).norm() / before.norm()).item())   # ‖c‖ / ‖x½‖
            sizes.append((algo.error.norm() / before.norm()).item())
        if check:
            worst = max(worst, float(np.abs(z.double().numpy() - zn).max()))
        if not torch.isfinite(z).all():
            return f"{name:12s} γ={gamma:<6g} diverged at step {t}"
    cons = (z - z.mean(0)).pow(2).sum(1).mean().sqrt().item()
    opt = (z.mean(0) - c_i.mean(0)).norm().item()
    extra = (f"  ‖c‖/‖x‖ {np.mean(sent[-100:]):.3f}  ‖e‖/‖x‖ {np.mean(sizes[-100:]):.2f}" if sent else "")
    chk = f"  |impl − SPEC numpy| {worst:.1e}" if check else ""
    return f"{name:12s} γ={gamma:<6g} consensus {cons:.3e}  dist-to-opt {opt:.3e}{extra}{chk}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=2000)
    a = ap.parse_args()
    a.steps = 20 if SMOKE else a.steps
    print("| run |\n|---|")
    print("|", run("deepsqueeze", 0.01, min(200, a.steps), check=True), "|")
    for gamma in (0.002, 0.005, 0.01, 0.02, 0.05):
        print("|", run("deepsqueeze", gamma, a.steps), "|", flush=True)
    for gamma in (0.01, 0.05):
        print("|", run("choco", gamma, a.steps), "|", flush=True)


if __name__ == "__main__":
    main()
