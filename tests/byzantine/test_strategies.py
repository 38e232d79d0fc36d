"""One config, one result with Byzantine nodes: a seeded attack against a robust rule ends
where the plain loop ends however the simulator executes the nodes (vmap chunks,
node-batched layers), for D-PSGD and for Choco-SGD's per-edge public copies. The attack and
the rule act on the gossip, which every strategy shares; the strategies differ in the local
steps, so the parameters agree to float summation order (tests/train/test_equivalence.py)."""
from __future__ import annotations

import copy

import pytest
import torch

from decent8.config import load_config
from decent8.models.strategies import strategy_for
from decent8.train.build import build
from tests.helpers import rel, run_steps

NODES = 4
STEPS = 12
CASES = {
    # Gaussian noise drawn per (seed, round, sender) against the coordinate-wise trimmed mean
    "dpsgd-gaussian-trimmed_mean": ["algorithm=dpsgd", "compression=identity", "byzantine.attack=gaussian",
                                    "byzantine.aggregator=trimmed_mean"],
    # ALIE (omniscient) on Choco's copies, top-k messages, against ClippedGossip's adaptive radius
    "choco-alie-clipped_gossip": ["algorithm=choco", "compression=topk", "compression.ratio=0.9",
                                  "byzantine.attack=alie", "byzantine.aggregator=clipped_gossip"],
}


def _final(c, spec: str, n: int) -> torch.Tensor:
    model = copy.copy(c.model)
    model.init_buffers(NODES)
    model.use(strategy_for(spec, n))
    return run_steps(c, model, STEPS)


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("case", list(CASES))
def test_a_seeded_attack_ends_where_the_loop_ends_on_every_strategy(case):
    c = build(load_config(None, [f"nodes={NODES}", "model=mlp", "model.width=16", "progress=false",
                                 "data.batch_size=8", "optimizer.warmup_epochs=0", "topology=complete", "seed=5",
                                 "byzantine.nodes=[1]", "byzantine.b=1", *CASES[case]]))
    assert c.algorithm.robust is not None
    loop = _final(c, "vmap", 1)
    again = _final(c, "vmap", 1)
    assert torch.equal(loop, again)                    # fresh algorithm state: the same run twice
    honest = build(load_config(None, [f"nodes={NODES}", "model=mlp", "model.width=16", "progress=false",
                                      "data.batch_size=8", "optimizer.warmup_epochs=0", "topology=complete", "seed=5",
                                      *[o for o in CASES[case] if not o.startswith("byzantine.attack")],
                                      "byzantine.b=1"]))
    assert rel(_final(honest, "vmap", 1), loop) > 1e-3    # the attack changes the run: the bound means something
    for spec, n in (("vmap", 2), ("vmap", NODES), ("layers", NODES)):
        assert rel(_final(c, spec, n), loop) <= 1e-5, f"{spec}:{n}"
