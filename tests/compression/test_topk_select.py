"""The top-k selection (`compression.topk.top_indices`) against `torch.topk`: the same index
set on rows of distinct values, and on tied rows (integer values, all zeros, ±0) the
documented rule — the lowest positions among equal scores, a stable descending sort's
first c — on the reference path (small slots) and the two-stage CPU path alike."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from decent8.compression.topk import TopKCompressor, rank_keys, top_indices
from decent8.layout import ParamLayout

#: (n, c): reference path (n < 4096 or n < 32·c) and two-stage path (n ≥ 4096, n ≥ 32·c)
SHAPES = [(100, 10), (100, 99), (1280, 12), (4096, 128), (4096, 40), (8192, 81), (16384, 163)]


def stable_first(score: torch.Tensor, c: int) -> torch.Tensor:
    """The documented rule: the first c of a stable descending sort (sorted positions)."""
    return torch.sort(score + 0.0, dim=-1, descending=True, stable=True).indices[..., :c].sort(-1).values


def rows(kind: str, n: int, g: torch.Generator) -> torch.Tensor:
    """``[3, 2, n]`` test rows of one kind."""
    if kind == "random":
        return torch.randn(3, 2, n, generator=g)
    if kind == "tied":                                   # few distinct values: ties at every boundary
        return torch.randint(-3, 4, (3, 2, n), generator=g).float()
    if kind == "zero":
        return torch.zeros(3, 2, n)
    if kind == "signed-zero":                            # −0 and +0 are equal scores
        return torch.where(torch.rand(3, 2, n, generator=g) < 0.5, -0.0, 0.0)
    # random rows with a zero row and a tied row among them
    x = torch.randn(3, 2, n, generator=g)
    x[1, 0] = 0.0
    x[2, 1] = torch.randint(-40, 41, (n,), generator=g).float()
    return x


@pytest.mark.parametrize("magnitude", [True, False])
@pytest.mark.parametrize("n,c", SHAPES)
def test_selection_equals_torch_topk_set_and_breaks_ties_by_lowest_position(n: int, c: int, magnitude: bool) -> None:
    g = torch.Generator().manual_seed(n + c)
    for kind in ("random", "tied", "zero", "signed-zero", "mixed"):
        x = rows(kind, n, g)
        score = x.abs() if magnitude else x
        got = top_indices(x, c, magnitude=magnitude)
        assert got.shape == (3, 2, c)
        got = got.sort(-1).values
        ref = torch.topk(score, c, dim=2, sorted=False)
        # the same values as torch.topk's selection, at distinct positions
        assert torch.equal(score.gather(2, got).sort(-1).values, ref.values.sort(-1).values), kind
        assert all(row.unique().numel() == c for row in got.reshape(-1, c)), kind
        # the same positions: torch.topk's set where values are distinct, the lowest positions among ties
        assert torch.equal(got, stable_first(score, c)), kind
        if kind == "random":
            assert torch.equal(got, ref.indices.sort(-1).values)
        if kind == "zero":
            assert torch.equal(got, torch.arange(c).expand(3, 2, c))


def test_selection_of_a_strided_view_and_of_one_row_alone() -> None:
    """A row's selection depends on that row only (a distributed rank selects its own row):
    two slots of a wider buffer (a strided view) select as each slot alone."""
    g = torch.Generator().manual_seed(5)
    n, c = 8192, 81
    wide = torch.randint(-50, 51, (4, 2 * n + 24), generator=g).float()
    s = wide.as_strided((4, 2, n), (wide.stride(0), n + 8, 1), 8)
    got = top_indices(s, c, magnitude=True).sort(-1).values
    for i in range(4):
        for j in range(2):
            alone = top_indices(s[i, j].contiguous().view(1, 1, n), c, magnitude=True).sort(-1).values
            assert torch.equal(got[i, j], alone[0, 0])
            assert torch.equal(got[i, j], stable_first(s[i, j].abs(), c))


def test_rank_keys_order_scores_then_lower_positions() -> None:
    v = torch.tensor([-3.0, -0.0, 0.0, 1.5, -1e-30, float("inf"), -float("inf"), 2.0, 2.0, 1e-30])
    keys = rank_keys(v, torch.arange(v.numel()))
    order = torch.argsort(keys, descending=True).tolist()
    assert order == [5, 7, 8, 3, 9, 1, 2, 4, 0, 6]      # ±0 equal (position order), ties by position


def test_topk_compressor_on_tied_values_equals_the_stable_reference() -> None:
    """The compressor's payload on integer-valued data (many ties) is the per-slot stable
    reference (numpy's stable argsort of −|x|), on both selection paths."""
    layout = ParamLayout([("a", (16384,)), ("b", (300,)), ("c", (8192,))])
    g = torch.Generator().manual_seed(1)
    x = torch.randint(-20, 21, (3, layout.dim), generator=g).float()
    x[1] = 0.0
    comp = TopKCompressor(layout, 0.99)
    out = comp.decode(comp.encode(x)).numpy()
    ref = np.zeros_like(out)
    xn = x.numpy()
    for i in range(3):
        for slot, c in zip(layout, comp.keep):
            seg = xn[i, slot.offset:slot.end]
            idx = np.argsort(-np.abs(seg), kind="stable")[:c]
            ref[i, slot.offset + idx] = seg[idx]
    assert np.array_equal(out, ref)
    local = comp.encode(x).tensors["indices"].to(torch.int64) + 32768
    assert torch.equal(local[1, :comp.keep[0]].sort().values, torch.arange(comp.keep[0]))  # zero row: first positions
