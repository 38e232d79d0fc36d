"""D² and gradient tracking over 20,000 float32 steps, before and after issue 32 (prints the
numbers of docs/results/exact_state.md). The problem and loop of
decent8.experiments.problems (also tests/train/test_long_horizon.py: heterogeneous least squares, 8-node ring, |x*| ≈ 5, local optima
several units apart, full batch reshuffled every 10 steps); "before" are the pre-issue-32
float32 updates, re-stated here (built through the same ``Algorithm.from_context``).

    PYTHONPATH=src OMP_NUM_THREADS=1 python benchmarks/exact_state.py

``DECENT8_BENCH_SMOKE=1``: 300 steps (a check that it runs).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from decent8.algorithms.d2 import D2  # noqa: E402
from decent8.algorithms.gt import GradientTracking  # noqa: E402
from decent8.experiments.problems import heterogeneous_run  # noqa: E402

SMOKE = os.environ.get("DECENT8_BENCH_SMOKE", "") not in ("", "0")


class Float32D2(D2):
    """Before: c = x − x½ kept in float32, x ← φ + γ(Wφ − φ) with float32 W."""

    def init_state(self, x):
        super().init_state(x)
        self.correction = torch.zeros_like(x)

    def _gossip(self, z, step):
        half = z.clone()
        z.add_(self.correction)
        mixed = self.comm.exchange(self._encode(z), self.compressor, step)
        z.add_(mixed - z, alpha=self.gamma)
        torch.sub(z, half, out=self.correction)


class Float32GT(GradientTracking):
    """Before: y ← y + γ(Wy − y) + d − d_prev, all float32 (exact messages)."""

    def init_state(self, x):
        super().init_state(x)
        self.d_prev = torch.zeros_like(x)

    def local_direction(self, direction, x, lr, step):
        if bool(self.started.all()):
            mixed = self.comm.exchange(self._encode(self.y), self.compressor, step)
            self.y.add_(mixed - self.y, alpha=self.gamma).add_(direction).sub_(self.d_prev)
        else:
            self.y.copy_(direction)
            self.started.fill_(1.0)
        self.d_prev.copy_(direction)
        return self.y

    def _gossip(self, z, step):
        mixed = self.comm.exchange(self._encode(z), self.compressor, step)
        z.add_(mixed - z, alpha=self.gamma)


def main() -> None:
    marks = (100, 300) if SMOKE else (300, 1000, 5000, 20000)
    print("| algorithm | state | best | " + " | ".join(f"step {m:,}" for m in marks) + " |")
    print("|---|---|---:|" + "---:|" * len(marks))
    for name, kw, old in (("d2", {"gamma": 0.5}, Float32D2), ("gt", {}, Float32GT),
                          ("gt push-sum, star, lr 0.1", {"push_sum": True, "topology": "star", "lr": 0.1}, Float32GT)):
        for label, cls in (("float32 (before)", old), ("float64 increments (after)", None)):
            d = heterogeneous_run(name.split()[0], marks[-1], cls=cls, **kw)
            cells = " | ".join(f"{d[m // 100 - 1]:.1e}" for m in marks)
            print(f"| {name} | {label} | {min(d):.1e} | {cells} |", flush=True)


if __name__ == "__main__":
    main()
