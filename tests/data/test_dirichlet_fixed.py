"""partition=dirichlet_fixed (per-node Dirichlet class mix, fixed size; SPEC §2, issue 32)
and the fast failure of partition=dirichlet when every node cannot get a sample."""
from __future__ import annotations

import numpy as np
import pytest

from decent8.config import load_config, partition_label
from decent8.data.dirichlet_fixed import dirichlet_fixed_partition
from decent8.data.partition import PARTITIONS, class_counts, dirichlet_partition, make_partition
from decent8.errors import ConfigError


@pytest.fixture(scope="module")
def mnist_like() -> np.ndarray:
    """60,000 labels of 10 classes with MNIST-like (uneven) class sizes, shuffled."""
    sizes = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
    return np.random.default_rng(5).permutation(np.repeat(np.arange(10), sizes))


def _top_share(parts, y) -> float:
    cc = class_counts(parts, y, 10)
    return float((cc.max(axis=1) / cc.sum(axis=1)).mean())


def test_10000_nodes_with_6_samples_each(mnist_like):
    parts = make_partition("dirichlet_fixed", mnist_like, 10_000, seed=0, alpha=0.1)
    assert len(parts) == 10_000
    assert {len(p) for p in parts} == {6}
    flat = np.concatenate(parts)
    assert np.unique(flat).size == flat.size == 60_000           # every sample at most once (here: all)
    assert all(p.dtype == np.int64 for p in parts[:10])


def test_class_skew_grows_as_alpha_falls(mnist_like):
    shares = [_top_share(dirichlet_fixed_partition(mnist_like, 2000, a, seed=1), mnist_like)
              for a in (0.05, 0.5, 5.0, 500.0)]
    assert shares == sorted(shares, reverse=True)
    assert shares[0] > 0.9 and shares[-1] < 0.5


def test_seeded_and_reproducible(mnist_like):
    a = dirichlet_fixed_partition(mnist_like, 500, 1.0, seed=3)
    b = dirichlet_fixed_partition(mnist_like, 500, 1.0, seed=3)
    c = dirichlet_fixed_partition(mnist_like, 500, 1.0, seed=4)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c, strict=True))
    assert {len(p) for p in a} == {120}


def test_size_floor_and_options():
    y = np.repeat(np.arange(3), [5, 3, 2])                     # 10 samples, 3 nodes: 3 each, one left over
    parts = dirichlet_fixed_partition(y, 3, 0.01, seed=0)
    assert [len(p) for p in parts] == [3, 3, 3] and np.unique(np.concatenate(parts)).size == 9
    with pytest.raises(ConfigError, match="partition.alpha"):
        dirichlet_fixed_partition(y, 3, 0.0, seed=0)
    with pytest.raises(ConfigError, match="nodes"):
        dirichlet_fixed_partition(y, 11, 1.0, seed=0)
    assert "dirichlet_fixed" in PARTITIONS
    cfg = load_config(None, ["partition=dirichlet_fixed", "partition.alpha=0.3"])
    assert partition_label(cfg) == "dirichlet_fixed α=0.3" and partition_label(cfg, ascii_only=True) == "dirf0.3"


@pytest.mark.parametrize("alpha,what", [(0.1, "practically every"), (100.0, "node 0 got no sample")])
def test_hopeless_dirichlet_fails_fast_in_one_line(mnist_like, alpha, what):
    with pytest.raises(ConfigError) as e:
        dirichlet_partition(mnist_like, 10_000, alpha, seed=0)
    msg = str(e.value)
    assert what in msg and "partition=dirichlet_fixed" in msg and "\n" not in msg


def test_feasible_dirichlet_is_unchanged(mnist_like):
    parts = dirichlet_partition(mnist_like, 10_000, 10.0, seed=0)   # succeeds within a few tries
    assert min(len(p) for p in parts) >= 1 and sum(len(p) for p in parts) == 60_000
