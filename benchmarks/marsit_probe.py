"""Why Marsit-K's reset can wreck a run: a probe of the global compensation (docs/results/marsit.md, "Why").

Marsit (docs/algorithms.md §10) keeps a per-worker compensation c_m = u_m − η_s·ĝ. The
iterate that follows exact SGD is y = x − mean_m(c_m); Marsit-K jumps to y every K steps.
This trains pure Marsit (K = 0) on digits for ``--epochs`` epochs (8 workers, ring, IID,
seed 0; the first epochs of the 60-epoch runs of that page: the same warm-up and constant
lr until epoch 30), then reads the checkpoint and prints, per setting,

* the spread of the compensation: RMS over workers and coordinates of c_m − mean(c);
* RMS of mean(c) — how far y is from x — against RMS of x;
* mean node accuracy and test loss at x, and test loss at y = x − mean(c).

    python benchmarks/marsit_probe.py                  # plain SGD and Nesterov momentum, η_s 0.01, 12 epochs
"""
from __future__ import annotations

import argparse
import os
import json
import sys
import tempfile
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from decent8.config import load_config  # noqa: E402
from decent8.data.augment import make_batch_transform  # noqa: E402
from decent8.train.build import build  # noqa: E402
from decent8.train.loop import to_device, train  # noqa: E402

SETTINGS = {"plain SGD": "optimizer.momentum=0", "Nesterov momentum 0.9": "optimizer.momentum=0.9"}


def rms(t: torch.Tensor) -> float:
    return t.double().pow(2).mean().sqrt().item()


def probe(momentum: str, epochs: int, eta_s: float, seed: int, out: str) -> dict[str, float]:
    cfg = load_config(None, ["algorithm=marsit", "allreduce.K=0", f"allreduce.eta_s={eta_s}", momentum, "nodes=8",
                             "topology=ring", "skew=0", f"seed={seed}", f"epochs={epochs}",
                             "optimizer.milestones=[30,45]", "sim.chunk=8", "device=cpu", "progress=false",
                             "tensorboard=false", "checkpoint=true", f"out_dir={out}"])
    summary, run = train(cfg, quiet=True)
    state = torch.load(Path(run) / "checkpoint.pt", weights_only=False)
    x, c = state["engine"]["z"], state["engine"]["algorithm"]["compensation"]
    mean_c = c.mean(0, keepdim=True)
    comp = build(cfg)
    ds, model = comp.dataset, comp.model
    augment = make_batch_transform(ds, cfg.data.augment, cfg.seed, comp.comm.local_nodes, comp.device)
    x_test = augment.prepare_eval(to_device(ds.x_test, comp.device))

    def test_loss(params: torch.Tensor) -> float:
        with torch.no_grad():
            loss, _ = model.task.eval_sums(model.logits(params[:1], x_test), ds.y_test)
        return loss[0].item() / ds.y_test.shape[0]

    return {"spread of c": rms(c - mean_c), "RMS mean(c)": rms(mean_c), "RMS x": rms(x[0]),
            "mean node acc. at x (%)": 100 * summary["mean_node_accuracy"],
            "test loss at x": test_loss(x), "test loss at y = x − mean(c)": test_loss(x - mean_c)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epochs", type=int, default=12)
    ap.add_argument("--eta-s", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="also write the table as JSON to this file")
    a = ap.parse_args()
    if os.environ.get("DECENT8_BENCH_SMOKE", "") not in ("", "0"):  # one epoch: a check that it runs
        a.epochs = 1
    rows = {}
    with tempfile.TemporaryDirectory(prefix="d8-probe-") as out:
        for label, momentum in SETTINGS.items():
            rows[label] = probe(momentum, a.epochs, a.eta_s, a.seed, out)
    keys = list(next(iter(rows.values())))
    print(f"Marsit K = 0, η_s {a.eta_s}, digits, 8 workers, ring, skew 0, seed {a.seed}, after {a.epochs} epochs")
    print("| setting | " + " | ".join(keys) + " |")
    print("|---|" + "---:|" * len(keys))
    for label, r in rows.items():
        print(f"| {label} | " + " | ".join(f"{v:.3g}" for v in r.values()) + " |")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
