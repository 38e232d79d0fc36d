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


def rounds_table(folder: Path, kind: str, rounds: int, at: set[int]) -> list[dict]:
    """Rebuild the run of ``folder`` with ``algorithm.consensus=kind`` and evaluate its rounds."""
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
    out = []
    for r in range(rounds + 1):
        if r > 0:
            s.engine.consensus_round()
        if r in at or r == rounds:
            m = s.engine.evaluate(s.x_test, s.y_test, cfg.data.eval_batch_size)
            x = s.engine.params()
            row = {"kind": kind, "round": r, "mean_node_accuracy": m.get("mean_node_accuracy"),
                   "averaged_model_accuracy": m.get("averaged_model_accuracy"),
                   "mean_node_loss": m["mean_node_loss"], "consensus_distance": m["consensus_distance"],
                   "bytes_sent_per_node": float(c.comm.bytes_sent.double().mean())}
            if getattr(alg, "x_hat", None) is not None:
                row["public_copy_error"] = float(((x - alg.x_hat) ** 2).sum(1).mean())
            out.append(row)
            print(json.dumps(row), flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/tmp/consensus")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--rounds", type=int, default=51)
    ap.add_argument("--at", type=int, nargs="+", default=[0, 1, 2, 5, 10, 20, 30, 40, 51])
    ap.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    ap.add_argument("--tag", default="run")
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
            rows += [{"seed": seed, **r} for r in rounds_table(folder, kind, a.rounds, set(a.at))]
    (out / f"{a.tag}-{'-'.join(a.kinds)}-r{a.rounds}.json").write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
