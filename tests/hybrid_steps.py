"""Shared by tests/test_hybrid.py and its rank workers: T training steps of a config
(the train loop's step: sampler, augmentation, schedule, Engine.train_step) on the
simulator or on the node-block communicator that ``build`` makes for
``backend=distributed dist.ranks=R``; returns every node's parameters and bytes."""
from __future__ import annotations

import torch

from decent8.config import load_config
from decent8.data.augment import make_batch_transform
from decent8.models.stacked import take
from decent8.train.build import build
from decent8.train.engine import Engine

#: the algorithms the parity test runs (n = 16): the issue's list plus D² and QG-GUTm
BASE = ["device=cpu", "data.name=digits", "model=mlp", "model.width=8", "epochs=4", "progress=false", "seed=5",
        "sim.chunk=4", "data.batch_size=16", "algorithm.consensus_rounds=0", "optimizer.milestones=[3.0]"]
CASES: dict[str, list[str]] = {
    "dpsgd": ["topology=ring", "algorithm=dpsgd", "compression=identity"],
    "choco_topk8": ["topology=ring", "algorithm=choco", "compression=topk", "compression.ratio=0.9",
                    "compression.value_bits=8"],
    "pushsum_edges": ["topology=edge_list", "topology.path={graph}", "algorithm=dpsgd", "compression=identity",
                      "algorithm.push_sum=true"],
    "gt": ["topology=ring", "algorithm=gt", "compression=identity"],
    "marsit": ["topology=ring", "algorithm=marsit"],
    "relaysgd": ["topology=ring", "algorithm=relaysgd", "compression=identity"],
    "d2": ["topology=ring", "algorithm=d2", "compression=identity", "topology.weights=metropolis"],
    "qg_gutm": ["topology=exponential", "topology.time_varying=true", "algorithm=qg_gutm", "compression=identity"],
}
#: uneven blocks: n = 10 over 4 ranks (3, 3, 2, 2)
UNEVEN: dict[str, list[str]] = {
    "uneven_choco": ["nodes=10", "topology=exponential", "algorithm=choco", "compression=topk",
                     "compression.ratio=0.9", "compression.value_bits=8"],
    "uneven_marsit": ["nodes=10", "topology=ring", "algorithm=marsit"],
}
STEPS = 20


def config(case: list[str], graph: str, extra: list[str]):
    return load_config(None, [*BASE, "nodes=16", *[c.format(graph=graph) for c in case], *extra])


def run_steps(cfg, steps: int = STEPS) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """(parameters [n, d], bytes_sent [n], placement record or {}) after ``steps`` steps."""
    c = build(cfg)
    comm = c.comm
    augment = make_batch_transform(c.dataset, cfg.data.augment, cfg.seed, comm.local_nodes, c.device)
    engine = Engine(c.model, c.algorithm, c.optimizer, comm, c.x0)
    spe = c.sampler.steps_per_epoch
    x_train, y_train = c.dataset.x_train, c.dataset.y_train
    for t in range(steps):
        epoch, s = divmod(t, spe)
        batch = c.sampler.epoch_indices(epoch)[:, s]
        xb = augment(take(x_train, batch), t)
        engine.train_step(xb, y_train[batch], c.schedule(epoch + s / spe))
    params = comm.gather_nodes(engine.params()).detach().cpu()
    sent = comm.gather_nodes(comm.bytes_sent.to(c.device).unsqueeze(1)).cpu()[:, 0]
    record = comm.placement_record() if hasattr(comm, "placement_record") else {}
    return params, sent, record
