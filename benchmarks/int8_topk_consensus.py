"""Why 8-bit training with 99 % top-k Choco leaves the nodes far apart (docs/results/int8_topk_consensus.md).

Builds the run through the product path (``build(load_config(None, overrides))``) and
runs the training loop's own steps (the schedule, the sampler, the augmentation of
:mod:`decent8.train.loop`), recording every ``--every`` steps:

- consensus distance D = mean_i ‖x_i − x̄‖² (what summary.json reports),
- per layer: mean_i ‖x_i − x̄‖ and ‖x̄‖ (weight norm),
- Choco's public-copy error mean_i ‖x_i − x̂_i‖ (and per layer),
- the last step's displacement mean_i ‖x_i(t) − x_i(t − 1)‖ (and per layer),
- the learning rate,

then the final node / averaged-model accuracy (Engine.evaluate). One JSON line per
record and a final summary line go to stdout (or ``--out``); a markdown table of the records
follows on stdout.

    OMP_NUM_THREADS=1 python benchmarks/int8_topk_consensus.py precision=int8 compression.wire=fp32 \\
        [--every 50] [--out FILE] [--layers] OPTION=VALUE ...

The options are ``decent8 train``'s; the defaults below are the proxy of the CIFAR-10 cell
(Choco, 99 % top-k, γ 0.01, 8 nodes on the directed ring, lr 0.1 cosine, momentum 0.9,
weight decay 5e-4) on the digits CNN.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from decent8.config import load_config  # noqa: E402
from decent8.data.augment import make_batch_transform  # noqa: E402
from decent8.models.stacked import take  # noqa: E402
from decent8.train.build import build  # noqa: E402
from decent8.train.engine import Engine  # noqa: E402

PROXY = ["algorithm=choco", "compression=topk", "compression.ratio=0.99", "algorithm.gamma=0.01", "nodes=8",
         "topology=directed_ring", "skew=0", "optimizer.lr=0.1", "optimizer.momentum=0.9",
         "optimizer.weight_decay=0.0005", "optimizer.schedule=cosine", "optimizer.warmup_epochs=0.25",
         "optimizer.warmup_lr=0.01", "epochs=20", "sim.chunk=1", "sim.compile=false", "device=cpu",
         "progress=false"]


def swap_gate(variant: str) -> None:
    """Diagnostic variants of the norm-activation layers (``--variant``), patched in for this
    process only: ``range_sigmoid`` — Range EvoNorm with EvoNorm-S0's sigmoid gate
    (range scale kept); ``evonorm_hardsigmoid`` — EvoNorm-S0 with Range EvoNorm's hard
    sigmoid (variance scale kept); ``range_unbiased`` — Range EvoNorm normalising by
    R / d2(L), the unbiased Gaussian σ estimate from the chunk range, instead of C(L)·R."""
    import torch.nn.functional as F
    from decent8.models import norms

    if variant == "range_sigmoid":
        def forward(self, xt):
            b = xt.shape[0]
            num = xt * torch.sigmoid(xt * self._param(self.v))
            r, length = norms.chunked_range(xt.reshape(b, self.groups, -1), self.chunks)
            return self._affine(num, self._q(1.0 / (norms.range_constant(length) * r + self.eps)).unsqueeze(-1))
        norms.RangeEvoNorm._forward = forward
    elif variant == "evonorm_hardsigmoid":
        def forward(self, xt):
            b = xt.shape[0]
            num = xt * F.hardsigmoid(xt * self._param(self.v))
            var = xt.reshape(b, self.groups, -1).var(-1, unbiased=False, keepdim=True)
            return self._affine(num, self._q(torch.rsqrt(var + self.eps)))
        norms.EvoNormS0._forward = forward
    elif variant == "range_unbiased":
        # R / d2(L) is an unbiased estimate of σ for Gaussian chunks of L values (d2: the
        # expected range of L standard normal draws), where C(L)·R is ≈ 0.67 σ at L = 4
        d2 = {2: 1.128, 3: 1.693, 4: 2.059, 5: 2.326, 6: 2.534, 7: 2.704, 8: 2.847, 16: 3.532}

        def forward(self, xt):
            b = xt.shape[0]
            num = xt * F.hardsigmoid(xt * self._param(self.v))
            r, length = norms.chunked_range(xt.reshape(b, self.groups, -1), self.chunks)
            return self._affine(num, self._q(1.0 / (r / d2[length] + self.eps)).unsqueeze(-1))
        norms.RangeEvoNorm._forward = forward
    elif variant:
        raise SystemExit(f"--variant: unknown {variant!r}; allowed: range_sigmoid, evonorm_hardsigmoid, "
                         f"range_unbiased")


def layer_norms(v: torch.Tensor, layout) -> dict[str, float]:
    """mean over nodes of ‖v_i‖ restricted to each parameter tensor."""
    return {s.name: v[:, s.offset:s.end].norm(dim=1).mean().item() for s in layout}


def record(engine: Engine, c, step: int, lr: float, layers: bool, prev: torch.Tensor | None = None) -> dict:
    x = engine.params()
    x_bar = x.mean(0, keepdim=True)
    dev = x - x_bar
    row = {"step": step, "lr": lr, "consensus_distance": (dev ** 2).sum(1).mean().item(),
           "x_bar_norm": x_bar.norm().item()}
    x_hat = getattr(c.algorithm, "x_hat", None)
    if x_hat is not None:
        err = x - x_hat
        row["public_copy_error"] = err.norm(dim=1).mean().item()
        row["public_copy_rel"] = row["public_copy_error"] / max(x.norm(dim=1).mean().item(), 1e-30)
    if prev is not None:   # the last step's displacement (local step + gossip), mean over nodes
        row["step_norm"] = (x - prev).norm(dim=1).mean().item()
    if layers:
        row["layer_dev"] = layer_norms(dev, c.model.layout)
        if prev is not None:
            row["layer_step"] = layer_norms(x - prev, c.model.layout)
        row["layer_norm"] = layer_norms(x_bar, c.model.layout)
        if x_hat is not None:
            row["layer_public_copy_error"] = layer_norms(x - x_hat, c.model.layout)
    return row


def table(rows: list[dict]) -> str:
    """The records as a markdown table: step, lr, D, public-copy error relative to ‖x_i‖, step norm."""
    def cell(row: dict, key: str) -> str:
        return f"{row[key]:.4g}" if key in row else "—"
    lines = ["| step | lr | consensus distance | public-copy error / ‖x‖ | step norm |", "|---|---|---|---|---|"]
    lines += [f"| {r['step']} | {cell(r, 'lr')} | {cell(r, 'consensus_distance')} | {cell(r, 'public_copy_rel')} | "
              f"{cell(r, 'step_norm')} |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--every", type=int, default=50, help="steps between records")
    p.add_argument("--out", help="write the JSON lines here (default stdout)")
    p.add_argument("--layers", action="store_true", help="per-layer norms in each record")
    p.add_argument("--variant", default="", help="range_sigmoid | evonorm_hardsigmoid | range_unbiased (diagnostic layers)")
    p.add_argument("overrides", nargs="*")
    ns = p.parse_args()
    swap_gate(ns.variant)
    c = build(load_config(None, PROXY + ns.overrides))
    cfg = c.cfg
    engine = Engine(c.model, c.algorithm, c.optimizer, c.comm, c.x0)
    augment = make_batch_transform(c.dataset, cfg.data.augment, cfg.seed, c.comm.local_nodes, c.device)
    x_train, y_train = c.dataset.x_train, c.dataset.y_train
    steps = c.sampler.steps_per_epoch
    out = open(ns.out, "w") if ns.out else sys.stdout
    t0 = time.perf_counter()
    lr, prev, rows = 0.0, None, []
    for epoch in range(cfg.epochs):
        idx = c.sampler.epoch_indices(epoch)
        for s in range(steps):
            t = epoch * steps + s
            if t % ns.every == 0:
                rows.append(record(engine, c, t, lr, ns.layers, prev))
                print(json.dumps(rows[-1]), file=out, flush=True)
            prev = engine.params().clone() if (t + 1) % ns.every == 0 else None
            lr = c.schedule(epoch + s / steps)
            batch = idx[:, s]
            engine.train_step(augment(take(x_train, batch), t), y_train[batch], lr)
    final = record(engine, c, cfg.epochs * steps, lr, True)
    m = engine.evaluate(c.dataset.x_test, c.dataset.y_test, cfg.data.eval_batch_size)
    final.update({k: m[k] for k in ("mean_node_accuracy", "averaged_model_accuracy", "mean_node_loss")
                  if k in m})
    final.update({"final": True, "precision": cfg.precision, "wire": cfg.compression.wire,
                  "wire_compression": c.compressor.name, "model": cfg.model.name, "norm": cfg.model.norm,
                  "wall_s": time.perf_counter() - t0, "overrides": ns.overrides, "variant": ns.variant})
    print(json.dumps(final), file=out, flush=True)
    accuracy = ", ".join(f"{k} {100 * final[k]:.2f} %" for k in ("mean_node_accuracy", "averaged_model_accuracy")
                         if k in final)
    print(f"\n{table(rows + [final])}\n\nafter {cfg.epochs * steps} steps: {accuracy}")


if __name__ == "__main__":
    main()
