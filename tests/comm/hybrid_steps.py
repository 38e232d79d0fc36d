"""Shared by tests/comm/test_hybrid.py and its rank workers: T training steps of a config
(the train loop's step: sampler, augmentation, schedule, Engine.train_step) on the
simulator or on the node-block communicator that ``build`` makes for
``backend=distributed dist.ranks=R``; returns every node's parameters and bytes."""
from __future__ import annotations

import os

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


def comm_checks(graph: str, placement: str) -> list[dict]:
    """Every BlockCommunicator call against the simulator's rows for this rank's block
    (n = 16 and n = 10; static, irregular and time-varying graphs; payloads of three
    compressors in float32 and float64 sums; push-sum scalars; ring and permutation
    passes; gathers and means; bytes per node; crossing edges × payload on the wire).
    Each entry's ``diff`` must be ~0."""
    from decent8.comm import SimulatorCommunicator
    from decent8.comm.block import BlockCommunicator
    from decent8.comm.placement import make_placement
    from decent8.compression import make_compressor
    from decent8.layout import ParamLayout
    from decent8.seeding import node_generators
    from decent8.topology import make_topology

    R = int(os.environ["WORLD_SIZE"])
    layout = ParamLayout([("w", (12, 10)), ("b", (12,)), ("v", (7, 3))])
    report: list[dict] = []
    for n in (16, 10):
        topologies = [make_topology("ring", n), make_topology("exponential", n, time_varying=True)]
        if n == 16:
            topologies.append(make_topology("edge_list", n, path=graph))
        owner = make_placement(placement, n, R, seed=1)
        for topo in topologies:
            comm = BlockCommunicator(topo, owner, "cpu", 60.0)
            mine = comm.local_nodes
            sim = SimulatorCommunicator(topo)
            tag = f"{n}/{topo.name}"
            for name in ["identity", "topk_int8", "sign"]:
                comp = make_compressor(name, layout, ratio=0.8)
                for step in range(2):
                    x = torch.randn(n, layout.dim, generator=torch.Generator().manual_seed(step))
                    p_all = comp.encode(x, node_generators(5, "c", list(range(n))))
                    p_me = comp.encode(x[mine], node_generators(5, "c", mine))
                    before = comm.wire_bytes
                    got = comm.exchange(p_me, comp, step)
                    report.append({"what": f"{tag}/{name}/{step}",
                                   "diff": (sim.exchange(p_all, comp, step)[mine] - got).abs().max().item()})
                    # this rank's wire bytes: its crossing out-edges × one payload
                    w = topo.weights_np(step)
                    cross = sum(1 for j in mine for i in range(n) if i != j and w[i, j] != 0 and owner[i] != owner[j])
                    report.append({"what": f"{tag}/{name}/{step}/wire",
                                   "diff": abs(comm.wire_bytes - before - cross * p_me.nbytes_per_node())})
                    got64 = comm.exchange(p_me, comp, step, dtype=torch.float64)
                    want64 = sim.exchange(p_all, comp, step, dtype=torch.float64)[mine]
                    report.append({"what": f"{tag}/{name}/{step}/f64",
                                   "diff": (want64 - got64).abs().max().item() * 1e6 + float(got64.dtype != torch.float64)})
            v = torch.rand(n, 2, generator=torch.Generator().manual_seed(10))
            report.append({"what": f"{tag}/scalars",
                           "diff": (sim.mix_scalars(v, 0)[mine] - comm.mix_scalars(v[mine], 0)).abs().max().item()})
            chunk = torch.arange(n * 5, dtype=torch.uint8).view(n, 5)
            report.append({"what": f"{tag}/ring",
                           "diff": (sim.ring_pass(chunk)[mine].float() - comm.ring_pass(chunk[mine]).float()).abs().max().item()})
            perm = torch.randperm(n, generator=torch.Generator().manual_seed(3)).tolist()
            report.append({"what": f"{tag}/permute", "diff": (sim.permute_pass(chunk, perm)[mine].float()
                                                              - comm.permute_pass(chunk[mine], perm).float()).abs().max().item()})
            x = torch.randn(n, 3, generator=torch.Generator().manual_seed(99))
            report.append({"what": f"{tag}/gather", "diff": (comm.gather_nodes(x[mine]) - x).abs().max().item()})
            report.append({"what": f"{tag}/mean", "diff": (comm.mean_over_nodes(x[mine]) - x.mean(0)).abs().max().item()})
            report.append({"what": f"{tag}/bytes", "diff": (comm.bytes_sent - sim.bytes_sent[mine]).abs().max().item()})
            rec = comm.placement_record()
            report.append({"what": f"{tag}/counted=measured",
                           "diff": abs(rec["bytes_between_ranks"] - rec["bytes_between_ranks_measured"])})
    return report
