"""Every robust rule equals a direct, coordinate-by-coordinate implementation of its formula
on hand-made neighbour sets (irregular in-degrees: padded slots), and states its assumption."""
from __future__ import annotations

import pytest
import torch

from decent8.byzantine.aggregators import ClippedGossip, Mean, Median, SelfCenteredClipping, TrimmedMean

from ._messages import hand_made


def nbr_values(i, nbrs, x):
    return [x[j] for j in nbrs[i]]


def direct_clip(z, tau):
    n = float(z.norm())
    return z if n <= tau else z * (tau / n)


def test_mean_is_the_w_weighted_sum():
    msgs, nbrs, x = hand_made()
    out = Mean().aggregate(msgs)
    for i, js in nbrs.items():
        w = 1.0 / (len(js) + 1)
        torch.testing.assert_close(out[i], w * x[i] + sum(w * x[j] for j in js))


@pytest.mark.parametrize("b", [0, 1])
def test_trimmed_mean_drops_b_largest_and_smallest_per_coordinate(b):
    msgs, nbrs, x = hand_made()
    out = TrimmedMean(b).aggregate(msgs)
    for i, js in nbrs.items():
        if len(js) < 2 * b + 1:
            continue
        for c in range(x.shape[1]):
            vals = sorted(float(x[j, c]) for j in js)
            kept = vals[b: len(vals) - b]
            assert out[i, c].item() == pytest.approx((float(x[i, c]) + sum(kept)) / (len(kept) + 1), rel=1e-5, abs=1e-6)


def test_median_per_coordinate_over_self_and_neighbours():
    msgs, nbrs, x = hand_made()
    out = Median(1).aggregate(msgs)
    for i, js in nbrs.items():
        for c in range(x.shape[1]):
            vals = sorted([float(x[i, c])] + [float(x[j, c]) for j in js])
            n = len(vals)
            med = vals[n // 2] if n % 2 else (vals[n // 2 - 1] + vals[n // 2]) / 2
            assert out[i, c].item() == pytest.approx(med, rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("tau", [None, 0.7])
def test_clipped_gossip_clips_differences_and_weights_them_by_w(tau):
    msgs, nbrs, x = hand_made()
    b = 1
    out = ClippedGossip(b, tau).aggregate(msgs)
    for i, js in nbrs.items():
        dists = sorted((float((x[j] - x[i]).norm()) for j in js), reverse=True)
        t = tau if tau is not None else dists[b]          # the (b+1)-th largest distance
        w = 1.0 / (len(js) + 1)
        expect = x[i] + sum(w * direct_clip(x[j] - x[i], t) for j in js)
        torch.testing.assert_close(out[i], expect, rtol=1e-5, atol=1e-6)
    # b = 0 with the adaptive radius clips nothing: plain averaging
    torch.testing.assert_close(ClippedGossip(0).aggregate(msgs), Mean().aggregate(msgs), rtol=1e-5, atol=1e-6)


def test_self_centered_clipping_uses_uniform_weights():
    msgs, nbrs, x = hand_made()
    out = SelfCenteredClipping(1, 0.5).aggregate(msgs)
    for i, js in nbrs.items():
        expect = x[i] + sum(direct_clip(x[j] - x[i], 0.5) for j in js) / (len(js) + 1)
        torch.testing.assert_close(out[i], expect, rtol=1e-5, atol=1e-6)


def test_each_rule_states_its_degree_assumption():
    assert Mean().check([1, 1], b=3) is None
    assert TrimmedMean(1).check([3, 4], 1) is None
    why = TrimmedMean(1).check([4, 2], 1)
    assert why is not None and "2b + 1 = 3" in why and "node 1" in why and "in-degree 2" in why
    assert Median(2).check([4], 2) is None and Median(2).check([3], 2) is not None
    assert ClippedGossip(2).check([3], 2) is None and ClippedGossip(2).check([2], 2) is not None
    assert SelfCenteredClipping(1).check([1], 1) is not None
