"""The final consensus rounds, round by round, for each ``algorithm.consensus`` kind
(docs/results/consensus_rounds.md).

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/consensus_rounds.py --out /tmp/consensus \
        --seeds 0 1 2 -- nodes=16 skew=0.9 epochs=10

Each seed trains once with ``algorithm.consensus_rounds=0`` (``decent8 train``, a
checkpoint at the last epoch); then, for each kind, the run is rebuilt from its
config.yaml through the product path (:class:`decent8.train.loop.Session`, which loads
the checkpoint: parameters, Choco's public copies, running statistics) and runs the
rounds with :meth:`Engine.consensus_round`, evaluating after every round listed in
``--at``: mean node accuracy, averaged-model accuracy, the consensus distance
1/n Σ‖x_i − x̄‖², and — for Choco — the public-copy error 1/n Σ‖x_i − x̂_i‖².
The last round's row equals what ``decent8 train`` reports with the same options.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

KINDS = ("compressed", "exact")


def train_once(out: Path, name: str, extra: list[str]) -> Path:
    folder = out / name
    if not (folder / "checkpoint.pt").is_file():
        cmd = [sys.executable, "-m", "decent8", "train", f"out_dir={out}", f"name={name}", "tensorboard=false",
               "algorithm.consensus_rounds=0", "checkpoint=true", "--quiet", *extra]
        print(" ".join(cmd[1:]), flush=True)
        subprocess.run(cmd, check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    return folder


def rounds_table(folder: Path, kind: str, rounds: int, at: set[int], gamma: float | None = None) -> list[dict]:
    """Rebuild the run of ``folder`` with ``algorithm.consensus=kind`` and evaluate its rounds
    (``gamma``: a probe, the consensus step size of the rounds only; None: the run's)."""
    from decent8.config import load_config
    from decent8.data.augment import make_batch_transform
    from decent8.train.build import build
    from decent8.train.loop import Session
    from decent8.train.run_dir import RunDir

    cfg = load_config(str(folder / "config.yaml"), [f"algorithm.consensus={kind}", "progress=false",
                                                    "tensorboard=false"])
    c = build(cfg)
    augment = make_batch_transform(c.dataset, c.cfg.data.augment, c.cfg.seed, c.comm.local_nodes, c.device)
    s = Session(c, RunDir(folder), augment, quiet=True, resumed=True)
    alg = c.algorithm
    if gamma is not None:
        alg.gamma = gamma
    out = []
    for r in range(rounds + 1):
        if r > 0:
            s.engine.consensus_round()
        if r in at or r == rounds:
            m = s.engine.evaluate(s.x_test, s.y_test, cfg.data.eval_batch_size)
            x = s.engine.params()
            row = {"kind": kind, "round": r, "gamma": alg.gamma, "mean_node_accuracy": m.get("mean_node_accuracy"),
                   "averaged_model_accuracy": m.get("averaged_model_accuracy"),
                   "mean_node_loss": m["mean_node_loss"], "averaged_model_loss": m["averaged_model_loss"],
                   "consensus_distance": m["consensus_distance"],
                   "bytes_sent_per_node": float(c.comm.bytes_sent.double().mean())}
            if getattr(alg, "x_hat", None) is not None:
                row["public_copy_error"] = float(((x - alg.x_hat) ** 2).sum(1).mean())
            out.append(row)
            print(json.dumps(row), flush=True)
    return out


def markdown(rows: list[dict], rounds: int) -> str:
    """Per seed and mean: before → after each kind (accuracies in %, consensus distance)."""
    import statistics

    def pick(kind: str, seed: int, r: int) -> dict:
        return next(x for x in rows if x["kind"] == kind and x["seed"] == seed and x["round"] == r)

    seeds = sorted({x["seed"] for x in rows})
    kinds = [k for k in KINDS if any(x["kind"] == k for x in rows)]
    acc = rows[0].get("mean_node_accuracy") is not None
    key, unit = ("mean_node_accuracy", 100.0) if acc else ("mean_node_loss", 1.0)
    avg = "averaged_model_accuracy" if acc else "averaged_model_loss"
    head = ["seed", f"node {'acc.' if acc else 'loss'} before"] + \
        [f"after {rounds} {k}" for k in kinds] + [f"averaged {'acc.' if acc else 'loss'}"] + \
        ["distance before"] + [f"distance after {k}" for k in kinds]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    cols: list[list[float]] = []
    for seed in seeds:
        b = pick(kinds[0], seed, 0)
        vals = [unit * b[key]] + [unit * pick(k, seed, rounds)[key] for k in kinds] + [unit * b[avg]] + \
            [b["consensus_distance"]] + [pick(k, seed, rounds)["consensus_distance"] for k in kinds]
        cols.append(vals)
        lines.append(f"| {seed} | " + " | ".join(f"{v:.3g}" if i > len(kinds) + 1 else f"{v:.2f}"
                                                  for i, v in enumerate(vals)) + " |")
    if len(seeds) > 1:
        means = [statistics.mean(c[i] for c in cols) for i in range(len(cols[0]))]
        lines.append("| mean | " + " | ".join(f"{v:.3g}" if i > len(kinds) + 1 else f"{v:.2f}"
                                             for i, v in enumerate(means)) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/tmp/consensus")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--rounds", type=int, default=51)
    ap.add_argument("--at", type=int, nargs="+", default=[0, 1, 2, 5, 10, 20, 30, 40, 51])
    ap.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    ap.add_argument("--tag", default="run")
    ap.add_argument("--round-gamma", type=float, default=None,
                    help="a probe: γ of the compressed rounds only (training keeps the run's γ)")
    ap.add_argument("extra", nargs="*", help="more `decent8 train` options for every run")
    a = ap.parse_args()
    if os.environ.get("DECENT8_BENCH_SMOKE", "") not in ("", "0"):  # a check that it runs
        a.out = os.path.join(os.environ.get("DECENT8_BENCH_TMP", "/tmp"), "consensus-smoke")
        a.seeds, a.rounds, a.at = [0], 2, [0, 2]
        a.extra = ["nodes=4", "epochs=1", "model.width=4", *a.extra]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for seed in a.seeds:
        folder = train_once(out, f"{a.tag}-seed{seed}", [*a.extra, f"seed={seed}"])
        for kind in a.kinds:
            rows += [{"seed": seed, **r} for r in rounds_table(folder, kind, a.rounds, set(a.at), a.round_gamma)]
    print(markdown(rows, a.rounds))
    g = "" if a.round_gamma is None else f"-g{a.round_gamma:g}"
    (out / f"{a.tag}-{'-'.join(a.kinds)}-r{a.rounds}{g}.json").write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
