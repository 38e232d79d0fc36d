"""Every attack changes what is sent as its docstring's formula says (hand-made neighbour sets)."""
from __future__ import annotations

import math
from statistics import NormalDist

import pytest
import torch

from decent8.byzantine.aggregators import Mean
from decent8.byzantine.attacks import ALIE, IPM, Dissensus, Gaussian, LabelFlip, SignFlip

from ._messages import hand_made, slots_of

BYZ = {3, 5}   # senders 3 and 5 lie; receiver 0 has one Byzantine neighbour (3), 1 has (5), 2 has (3, 5)


def honest_set(i, nbrs, x):
    """H_i = {i} ∪ honest in-neighbours, as rows."""
    return torch.stack([x[i]] + [x[j] for j in nbrs[i] if j not in BYZ])


def check_only_byzantine_slots_change(msgs, out):
    slots = slots_of(msgs, BYZ)
    assert torch.equal(out[~slots], msgs.received[~slots])
    assert not torch.equal(out[slots], msgs.received[slots])


def test_sign_flip_sends_the_negated_message():
    msgs, nbrs, x = hand_made()
    out = SignFlip().craft(msgs, slots_of(msgs, BYZ), step=0)
    check_only_byzantine_slots_change(msgs, out)
    for i, js in nbrs.items():
        for s, j in enumerate(js):
            assert torch.equal(out[i, s], -x[j] if j in BYZ else x[j])
    assert torch.equal(SignFlip(scale=3.0).craft(msgs, slots_of(msgs, BYZ), 0)[0, 2], -3.0 * x[3])


def test_gaussian_adds_seeded_noise_per_sender_and_round():
    msgs, nbrs, x = hand_made(d=4000)
    att = Gaussian(scale=2.0, seed=7)
    out = att.craft(msgs, slots_of(msgs, BYZ), step=3)
    check_only_byzantine_slots_change(msgs, out)
    noise3_at0, noise3_at2 = out[0, 2] - x[3], out[2, 1] - x[3]
    assert torch.equal(noise3_at0, noise3_at2)                     # one draw per sender, to every receiver
    noise5 = out[1, 1] - x[5]
    assert not torch.allclose(noise3_at0, noise5)
    assert noise3_at0.std().item() == pytest.approx(2.0, rel=0.05) and abs(noise3_at0.mean().item()) < 0.1
    again = Gaussian(scale=2.0, seed=7).craft(msgs, slots_of(msgs, BYZ), step=3)
    assert torch.equal(again, out)
    assert not torch.equal(Gaussian(scale=2.0, seed=7).craft(msgs, slots_of(msgs, BYZ), step=4), out)


def test_label_flip_leaves_messages_alone():
    msgs, _, _ = hand_made()
    assert LabelFlip.flips_labels
    assert torch.equal(LabelFlip().craft(msgs, slots_of(msgs, BYZ), 0), msgs.received)


def test_alie_sends_mean_minus_z_std_of_the_honest_messages():
    msgs, nbrs, x = hand_made()
    out = ALIE().craft(msgs, slots_of(msgs, BYZ), step=0)
    check_only_byzantine_slots_change(msgs, out)
    for i, js in nbrs.items():
        h = honest_set(i, nbrs, x)
        b = sum(j in BYZ for j in js)
        n = h.shape[0] + b
        q = math.floor(n / 2 + 1) - b
        z = NormalDist().inv_cdf((n - q) / n)
        expect = h.mean(0) - z * h.std(0, unbiased=False)
        for s, j in enumerate(js):
            if j in BYZ:
                torch.testing.assert_close(out[i, s], expect, rtol=1e-5, atol=1e-6)
    fixed = ALIE(scale=1.5).craft(msgs, slots_of(msgs, BYZ), 0)
    h = honest_set(0, nbrs, x)
    torch.testing.assert_close(fixed[0, 2], h.mean(0) - 1.5 * h.std(0, unbiased=False), rtol=1e-5, atol=1e-6)


def test_ipm_sends_minus_epsilon_times_the_honest_mean():
    msgs, nbrs, x = hand_made()
    out = IPM(scale=0.5).craft(msgs, slots_of(msgs, BYZ), step=0)
    check_only_byzantine_slots_change(msgs, out)
    torch.testing.assert_close(out[2, 1], -0.5 * honest_set(2, nbrs, x).mean(0))
    torch.testing.assert_close(out[2, 3], -0.5 * honest_set(2, nbrs, x).mean(0))
    torch.testing.assert_close(IPM().craft(msgs, slots_of(msgs, BYZ), 0)[0, 2], -0.1 * honest_set(0, nbrs, x).mean(0))


def test_dissensus_cancels_epsilon_times_the_honest_pull():
    msgs, nbrs, x = hand_made()
    eps = 1.5
    out = Dissensus(scale=eps).craft(msgs, slots_of(msgs, BYZ), step=0)
    check_only_byzantine_slots_change(msgs, out)
    for i, js in nbrs.items():
        w = 1.0 / (len(js) + 1)
        pull = sum(w * (x[k] - x[i]) for k in js if k not in BYZ)
        wb = w * sum(j in BYZ for j in js)
        for s, j in enumerate(js):
            if j in BYZ:
                torch.testing.assert_close(out[i, s], x[i] - eps * pull / wb, rtol=1e-5, atol=1e-6)
        # under plain averaging, node i moves by (1 − ε) times its honest pull
        mixed = Mean().aggregate(msgs.with_received(out))[i]
        torch.testing.assert_close(mixed, x[i] + (1 - eps) * pull, rtol=1e-5, atol=1e-5)
