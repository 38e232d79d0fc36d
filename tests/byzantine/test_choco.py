"""Robust mixing inside Choco-SGD's consensus step (decent8.byzantine.copies): every receiver
keeps each in-neighbour's public copy, a Byzantine sender steers the copy it owns at each
receiver with compressed messages of the run's format, and the rule mixes the copies.
Checked against a direct loop over nodes and edges on a 3x3 torus (in-degree 4)."""
from __future__ import annotations

import textwrap

import pytest
import torch

from decent8.byzantine.aggregators import clip
from decent8.config import load_config
from decent8.train.build import build

BASE = ["data.name=digits", "model=mlp", "model.width=8", "nodes=9", "device=cpu", "epochs=1", "algorithm=choco",
        "algorithm.gamma=0.5", "topology=torus", "topology.rows=3", "topology.cols=3", "checkpoint=false",
        "progress=false", "tensorboard=false", "skew=0"]
BYZ = 4


def _built(*overrides):
    return build(load_config(None, [*BASE, *overrides]))


def _rule(name, x_i, copies, w_self, w, b, tau):
    """The rule's formula on one receiver: own x_i, copies [deg, d], weights w [deg]."""
    if name == "mean":
        return w_self * x_i + sum(wj * c for wj, c in zip(w, copies))
    if name == "clipped_gossip":
        return x_i + sum(wj * clip(c - x_i, torch.tensor(tau)) for wj, c in zip(w, copies))
    if name == "self_centered_clipping":
        return x_i + sum(clip(c - x_i, torch.tensor(tau)) for c in copies) / (len(copies) + 1)
    if name == "trimmed_mean":
        kept = torch.stack(copies).sort(0).values[b: len(copies) - b]
        return (x_i + kept.sum(0)) / (kept.shape[0] + 1)
    assert name == "median"
    s = torch.cat([x_i[None], torch.stack(copies)]).sort(0).values
    n = s.shape[0]
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def _direct(c, steps_z, rule, attack, tau, gamma=0.5, eps=1.5):
    """Choco-SGD with per-edge copies, node by node, edge by edge (identity compression)."""
    n, d = steps_z[0].shape
    W = torch.tensor(c.topology.weights_np(0), dtype=torch.float32)
    nbrs = {i: [j for j in range(n) if j != i and W[i, j] > 0] for i in range(n)}
    xhat = torch.zeros(n, d)
    copies = {(i, j): torch.zeros(d) for i in range(n) for j in nbrs[i]}
    z = None
    for t, half in enumerate(steps_z):
        z = half.clone() if z is None else z + half       # x½: the previous result plus a "local step"
        q = z - xhat
        xhat = xhat + q
        new = {}
        for i in range(n):
            for j in nbrs[i]:
                new[(i, j)] = copies[(i, j)] + q[j]
        for i in range(n):
            if BYZ not in nbrs[i]:
                continue
            honest = [j for j in nbrs[i] if j != BYZ]
            if attack == "sign_flip":
                wanted = -new[(i, BYZ)]
            else:                                          # dissensus
                pull = sum(W[i, k] * (new[(i, k)] - xhat[i]) for k in honest)
                wanted = xhat[i] - eps * pull / W[i, BYZ]
            new[(i, BYZ)] = copies[(i, BYZ)] + (wanted - copies[(i, BYZ)])
        copies = new
        out = torch.empty_like(z)
        for i in range(n):
            out[i] = _rule(rule, xhat[i], [copies[(i, j)] for j in nbrs[i]], W[i, i], [W[i, j] for j in nbrs[i]],
                           1, tau)
        z = z + gamma * (out - xhat)
    return z


@pytest.mark.parametrize("rule", ["clipped_gossip", "self_centered_clipping", "trimmed_mean", "median", "mean"])
@pytest.mark.parametrize("attack", ["sign_flip", "dissensus"])
def test_the_rule_mixes_the_public_copies_as_its_formula_says(rule, attack):
    tau = 0.3
    c = _built("compression=identity", f"byzantine.nodes=[{BYZ}]", f"byzantine.attack={attack}",
               f"byzantine.aggregator={rule}", "byzantine.b=1", f"byzantine.clip_tau={tau}")
    g = torch.Generator().manual_seed(1)
    steps_z = [torch.randn(9, c.model.dim, generator=g)] + [0.1 * torch.randn(9, c.model.dim, generator=g)
                                                          for _ in range(2)]
    z = steps_z[0].clone()
    c.algorithm.init_state(z)
    for t, half in enumerate(steps_z):
        if t:
            z += half
        c.algorithm.step(z, t)
    torch.testing.assert_close(z, _direct(c, steps_z, rule, attack, tau), rtol=1e-4, atol=1e-5)


def test_a_byzantine_copy_moves_by_compressed_messages_and_bytes_do_not_change():
    """Top-k: the copy a Byzantine node steers at a receiver changes at K entries per round
    (its message has the honest format), and every edge carries the honest number of bytes."""
    lying = _built("compression=topk", f"byzantine.nodes=[{BYZ}]", "byzantine.attack=dissensus",
                   "byzantine.aggregator=clipped_gossip", "byzantine.b=1")
    honest = _built("compression=topk")
    k = lying.compressor.num_kept
    z0 = torch.randn(9, lying.model.dim, generator=torch.Generator().manual_seed(2))
    for c in (lying, honest):
        z = z0.clone()
        c.algorithm.init_state(z)
        c.algorithm.step(z, 0)
        c.algorithm.step(z, 1)
    copies = lying.algorithm._copies
    src = lying.comm.plan(0).neighbours().src
    byz = src == BYZ
    assert int(byz.sum()) == 4                                         # node 4's four out-neighbours
    after_one = (copies.copies[byz] != 0).sum(1)
    assert bool((after_one <= 2 * k).all()) and bool((after_one > 0).all())   # two top-k messages, not a dense vector
    assert torch.equal(lying.comm.bytes_sent, honest.comm.bytes_sent)


def test_with_no_byzantine_node_the_mean_rule_is_plain_choco_exactly():
    plain = _built("compression=topk")
    none = _built("compression=topk", "byzantine.nodes=0", "byzantine.attack=sign_flip", "byzantine.aggregator=mean")
    assert none.algorithm.robust is None and none.byzantine.record()["attack"] == "sign_flip"
    z0 = torch.randn(9, plain.model.dim, generator=torch.Generator().manual_seed(3))
    out = []
    for c in (plain, none):
        z = z0.clone()
        c.algorithm.init_state(z)
        for t in range(5):
            c.algorithm.step(z, t)
        out.append(z)
    assert torch.equal(out[0], out[1])


def test_the_copies_mixed_by_the_mean_formula_track_plain_choco(tmp_path, monkeypatch):
    """A user rule that is the mean's formula takes the per-edge path: with no attacker it
    computes plain Choco's update, up to float32 rounding of the neighbour sum (no drift)."""
    (tmp_path / "plain_rule.py").write_text(textwrap.dedent("""
        class Plain:
            def __init__(self, b, tau):
                pass

            def aggregate(self, m):
                w = m.weight.float() * m.mask.float()
                return m.self_weight.float()[:, None] * m.own + (w[..., None] * m.received).sum(1)
    """))
    monkeypatch.chdir(tmp_path)
    plain = _built("compression=topk", "compression.ratio=0.9")
    copies = _built("compression=topk", "compression.ratio=0.9", "byzantine.aggregator=plain_rule:Plain")
    assert copies.algorithm.robust is not None
    g = torch.Generator().manual_seed(4)
    z0 = torch.randn(9, plain.model.dim, generator=g)
    kicks = [0.01 * torch.randn(9, plain.model.dim, generator=g) for _ in range(30)]
    out = []
    for c in (plain, copies):
        z = z0.clone()
        c.algorithm.init_state(z)
        for t, kick in enumerate(kicks):
            z += kick
            c.algorithm.step(z, t)
        out.append(z)
    assert ((out[1] - out[0]).norm() / out[0].norm()).item() <= 1e-5
