"""Local momentum equals PyTorch's SGD; QGM follows SPEC §6 by hand; lr schedule."""
from __future__ import annotations

import pytest
import torch

from decent8.optim import LRSchedule, LocalMomentum, QuasiGlobalMomentum


def test_local_nesterov_matches_torch_sgd():
    torch.manual_seed(0)
    p = torch.nn.Parameter(torch.randn(2, 6))
    opt = torch.optim.SGD([p], lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4)
    mine = LocalMomentum(0.9, True, 1e-4)
    x = p.detach().clone()
    mine.init_state(x)
    for _ in range(5):
        g = torch.randn(2, 6)
        p.grad = g.clone()
        opt.step()
        x -= 0.1 * mine.direction(g, x)
    assert torch.allclose(x, p.detach(), atol=1e-6)


def test_qgm_direction_and_buffer_by_hand():
    q = QuasiGlobalMomentum(momentum=0.5, weight_decay=0.0)
    x = torch.zeros(1, 2)
    q.init_state(x)
    g = torch.tensor([[1.0, -2.0]])
    d = q.direction(g, x)                       # m̂ = 0: d = g + β·g
    assert torch.allclose(d, 1.5 * g)
    before, after = torch.tensor([[1.0, 1.0]]), torch.tensor([[0.8, 1.4]])
    q.after_gossip(before, after, lr=0.1)       # m̂ = (1−β)(before − after)/lr
    assert torch.allclose(q.buf, 0.5 * (before - after) / 0.1)
    d2 = q.direction(g, x)                      # g + β(β m̂ + g)
    assert torch.allclose(d2, g + 0.5 * (0.5 * q.buf + g))


def test_schedule_warmup_and_milestones():
    s = LRSchedule(lr=0.1, warmup_epochs=1, warmup_lr=0.01, milestones=[100, 150], decay=0.1)
    assert s(0.5) == 0.01
    assert s(1.0) == 0.1
    assert abs(s(120) - 0.01) < 1e-12
    assert abs(s(160) - 0.001) < 1e-12
    v = LRSchedule(lr=0.1, warmup_epochs=0, every=30, decay=0.5)
    assert abs(v(61) - 0.025) < 1e-12


def test_onecycle_rises_linearly_to_the_peak_then_falls_linearly_to_zero():
    s = LRSchedule(lr=0.4, warmup_epochs=1.5, warmup_lr=0.04, kind="onecycle", total_epochs=6)
    assert s(0.0) == pytest.approx(0.04)
    assert s(0.75) == pytest.approx(0.22)          # halfway up: (0.04 + 0.4) / 2
    assert s(1.5) == pytest.approx(0.4)            # the peak
    assert s(3.75) == pytest.approx(0.2)           # halfway down
    assert s(6.0) == pytest.approx(0.0) and s(7.0) == 0.0
    lrs = [s(e / 10) for e in range(61)]
    peak = lrs.index(max(lrs))
    assert all(a < b for a, b in zip(lrs[:peak], lrs[1:peak + 1]))
    assert all(a > b for a, b in zip(lrs[peak:-1], lrs[peak + 1:]))
