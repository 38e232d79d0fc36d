"""Which nodes an evaluation tests (evaluation at scale; SPEC §8).

``eval.nodes=all`` tests every node's own model at every evaluation. ``eval.nodes=N``
tests a seeded sample of N nodes (the same sample all run: a node set drawn once from a
generator seeded by (run seed, "eval-nodes"), so the curves follow the same nodes) at
the intermediate evaluations, and all nodes at the last epoch's and the final
evaluation, so the summary is always over every node. The averaged model and the
consensus distance (no forward pass per node) are always over all nodes. Each metrics
row records ``evaluated_nodes`` (and, for a sample, ``evaluated_node_ids``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import ConfigError

if TYPE_CHECKING:  # the checks run before torch / numpy are imported (the CLI's validation)
    import numpy as np


def parse_eval_nodes(value: object, n: int) -> int | None:
    """``eval.nodes``: None for ``all`` (or N ≥ n), else the sample size N in [1, n)."""
    text = str(value).strip().lower()
    if text == "all":
        return None
    try:
        m = int(text)
    except ValueError:
        raise ConfigError("eval.nodes", f"must be all or a number of nodes >= 1, got {value!r}") from None
    if m < 1:
        raise ConfigError("eval.nodes", f"must be all or a number of nodes >= 1, got {value!r}")
    return None if m >= n else m


def check_node_chunk(value: object) -> int:
    """``eval.node_chunk``: an integer >= 1."""
    if isinstance(value, bool) or not hasattr(value, "__index__") or int(value) < 1:
        raise ConfigError("eval.node_chunk", f"must be an integer >= 1, got {value!r}")
    return int(value)


def eval_sample(seed: int, n: int, m: int | None) -> "np.ndarray | None":
    """The sorted global ids of the ``m`` nodes the intermediate evaluations test (None: all)."""
    import numpy as np

    from ..seeding import derive_seed
    if m is None:
        return None
    rng = np.random.default_rng(derive_seed(seed, "eval-nodes"))
    return np.sort(rng.choice(n, size=m, replace=False)).astype(np.int64)
