"""sim.chunk=auto's timing (decent8.models.execution): what it runs, and that it leaves no trace."""
from __future__ import annotations

import torch
from torch import nn

from decent8.models import StackedModel
from decent8.models import execution
from decent8.models.execution import choose_chunk


def _bn_model(k: int) -> tuple[StackedModel, torch.Tensor]:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Flatten(), nn.Linear(8, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 3))
    sm = StackedModel(net, nodes=k)
    return sm, sm.flat_parameters().unsqueeze(0).repeat(k, 1)


def test_auto_times_small_chunks_on_a_sample_of_nodes_and_scales_to_k(monkeypatch):
    """k = 12 > SAMPLE_NODES = 4: chunks 1, 2, 4 run on 4 nodes (their time × 12/4), 8 on 8,
    12 on all 12; the per-node BatchNorm statistics and the RNG are exactly as before."""
    monkeypatch.setattr(execution, "SAMPLE_NODES", 4)
    k = 12
    sm, params = _bn_model(k)
    x, y = torch.randn(k, 5, 8), torch.randint(0, 3, (k, 5))
    sm.buffers.add_(torch.arange(k, dtype=torch.float32).unsqueeze(1))  # distinct per-node statistics
    bufs, rng = sm.buffers.clone(), torch.get_rng_state()
    seen: list[tuple[int, int, int]] = []
    real = StackedModel.loss_and_grad

    def spy(self, p, xb, yb, strategy=None, step=0):
        seen.append((p.shape[0], (strategy or self.strategy).chunk, -1 if self.buffers is None else self.buffers.shape[0]))
        return real(self, p, xb, yb, strategy=strategy, step=step)

    monkeypatch.setattr(StackedModel, "loss_and_grad", spy)
    choice = choose_chunk(sm, params, x, y, "auto", steps=1, use_cache=False)
    timed = {(m, c, b) for m, c, b in seen}
    for c, m in ((1, 4), (2, 4), (4, 4), (8, 8), (12, 12)):
        if str(c) in choice.seconds_per_step:
            assert (m, c, m) in timed  # rows, chunk and buffer rows agree
    assert "1" in choice.seconds_per_step and (4, 1, 4) in timed and (12, 1, 12) not in timed
    assert torch.equal(sm.buffers, bufs) and sm.buffers.shape == (k, bufs.shape[1])
    assert torch.equal(torch.get_rng_state(), rng)
    assert sm.chunk == choice.chunk and str(choice.chunk) in choice.seconds_per_step



def test_saved_bytes_per_node_do_not_grow_with_the_node_count():
    """The memory estimate is one node's: it must not count the storage of all k rows
    that a saved row view shares (which capped auto's chunk at large k)."""
    from decent8.models.execution import saved_bytes_per_node
    per = {}
    for k in (2, 256):
        sm, params = _bn_model(k)
        per[k] = saved_bytes_per_node(sm, params, torch.randn(k, 5, 8), torch.randint(0, 3, (k, 5)))
    assert per[2] == per[256] > 0
