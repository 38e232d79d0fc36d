"""The :class:`Topology` object and the :func:`make_topology` factory (SPEC §1).

A topology is a directed graph with implicit self-loops plus its mixing matrix W
(``W[i, j]`` = weight node i gives to what it receives from node j). Time-varying
topologies (the one-peer exponential graph) cycle through ``period`` phases; step t
uses phase ``t mod period``.
"""
from __future__ import annotations

import os
from typing import Sequence

import numpy as np
import torch

from decent8.errors import ConfigError, choice_error
from decent8.topology import graphs
from decent8.topology.mixing import (
    TOL,
    _fmt,
    as_adjacency,
    check_stochastic,
    check_strongly_connected,
    is_doubly_stochastic,
    is_symmetric,
    metropolis_weights,
    second_eigenvalue_modulus,
    uniform_weights,
)

__all__ = ["TOPOLOGIES", "WEIGHTS", "Topology", "make_topology"]

TOPOLOGIES: tuple[str, ...] = ("directed_ring", "ring", "torus", "complete", "exponential", "star", "edge_list")
WEIGHTS: tuple[str, ...] = ("uniform", "metropolis")


class Topology:
    """A (possibly time-varying) gossip topology over ``n`` nodes.

    ``adjacency`` is one boolean ``[n, n]`` matrix (static) or a sequence of them
    (time-varying, one per phase); ``adj[i, j]`` means j → i. ``weights`` is the scheme
    (``"uniform"``: column-stochastic 1/(outdeg+1); ``"metropolis"``: doubly stochastic,
    undirected graphs only). The constructor does not check connectivity — use
    :func:`make_topology`, or call :meth:`validate` yourself.
    """

    def __init__(
        self,
        name: str,
        adjacency: np.ndarray | Sequence[np.ndarray],
        weights: str = "uniform",
        *,
        description: str | None = None,
    ) -> None:
        if weights not in WEIGHTS:
            raise choice_error("topology.weights", weights, WEIGHTS)
        phases = [adjacency] if isinstance(adjacency, np.ndarray) and np.ndim(adjacency) == 2 else list(adjacency)
        if not phases:
            raise ConfigError("topology", "a topology needs at least one adjacency matrix")
        self._adj: list[np.ndarray] = [as_adjacency(a) for a in phases]
        n = self._adj[0].shape[0]
        if any(a.shape != (n, n) for a in self._adj):
            raise ConfigError("topology", "all phases of a time-varying topology must have the same number of nodes")
        graphs.check_nodes(n)
        for a in self._adj:
            a.setflags(write=False)
        self.name: str = name
        self.n: int = n
        self.weights_scheme: str = weights
        self.period: int = len(self._adj)
        self.time_varying: bool = self.period > 1
        self.description: str = description or name
        if weights == "metropolis":
            for a in self._adj:
                if not is_symmetric(a):
                    i, j = np.argwhere(a & ~a.T)[0]  # edge j -> i without i -> j
                    raise ConfigError(
                        "topology.weights",
                        f"metropolis needs an undirected graph, but {name!r} is directed (node {j} sends "
                        f"to node {i} and not back); use topology.weights=uniform with a push-sum algorithm",
                    )
        build = uniform_weights if weights == "uniform" else metropolis_weights
        self._W: list[np.ndarray] = [build(a) for a in self._adj]
        for W in self._W:
            W.setflags(write=False)
        self._torch: dict[tuple[int, str], torch.Tensor] = {}
        self._gap: float | None = None

    # ------------------------------------------------------------------ access
    def phase(self, step: int = 0) -> int:
        """The phase used at iteration ``step``: ``step mod period``."""
        return int(step) % self.period

    def adjacency(self, step: int = 0) -> np.ndarray:
        """Read-only boolean ``[n, n]`` adjacency of the phase at ``step`` (adj[i, j]: j → i)."""
        return self._adj[self.phase(step)]

    def weights_np(self, step: int = 0) -> np.ndarray:
        """Read-only float64 ``[n, n]`` mixing matrix W of the phase at ``step``."""
        return self._W[self.phase(step)]

    def weights(self, step: int = 0, device: torch.device | str | None = None) -> torch.Tensor:
        """float32 ``[n, n]`` mixing matrix W at ``step`` (cached per phase and device;
        treat it as read-only)."""
        dev = torch.device(device) if device is not None else torch.device("cpu")
        key = (self.phase(step), str(dev))
        t = self._torch.get(key)
        if t is None:
            t = torch.tensor(self._W[key[0]], dtype=torch.float32, device=dev)
            self._torch[key] = t
        return t

    def in_neighbors(self, i: int, step: int = 0) -> list[int]:
        """Nodes j ≠ i that send to i at ``step`` (ascending)."""
        return [int(j) for j in np.flatnonzero(self.adjacency(step)[i, :])]

    def out_neighbors(self, i: int, step: int = 0) -> list[int]:
        """Nodes k ≠ i that i sends to at ``step`` (ascending)."""
        return [int(k) for k in np.flatnonzero(self.adjacency(step)[:, i])]

    def out_degree(self, step: int = 0) -> np.ndarray:
        """int64 ``[n]``: number of out-neighbours of each node (self excluded)."""
        return self.adjacency(step).sum(axis=0).astype(np.int64)

    def in_degree(self, step: int = 0) -> np.ndarray:
        """int64 ``[n]``: number of in-neighbours of each node (self excluded)."""
        return self.adjacency(step).sum(axis=1).astype(np.int64)

    # ------------------------------------------------------------- properties
    @property
    def is_doubly_stochastic(self) -> bool:
        """True iff W of every phase is doubly stochastic."""
        return all(is_doubly_stochastic(W) for W in self._W)

    @property
    def is_regular(self) -> bool:
        """True iff in every phase all nodes have the same in- and out-degree."""
        for t in range(self.period):
            deg = np.concatenate([self.in_degree(t), self.out_degree(t)])
            if (deg != deg[0]).any():
                return False
        return True

    @property
    def is_undirected(self) -> bool:
        """True iff every phase's adjacency is symmetric."""
        return all(is_symmetric(a) for a in self._adj)

    @property
    def spectral_gap(self) -> float:
        """1 − |λ₂(W)| (static), or for a time-varying topology the per-step rate over one
        period, 1 − |λ₂(W_{τ−1} ⋯ W_0)|^{1/τ} (SPEC §1)."""
        if self._gap is None:
            P = self._W[0]
            for W in self._W[1:]:
                P = W @ P
            lam2 = second_eigenvalue_modulus(P)
            self._gap = float(1.0 - lam2 ** (1.0 / self.period))
        return self._gap

    # -------------------------------------------------------------- validation
    def validate(self) -> None:
        """Strong connectivity (of the union over one period) and column-stochastic W."""
        union = np.logical_or.reduce(self._adj)
        check_strongly_connected(union, option="topology")
        for W in self._W:
            check_stochastic(W, "column", option="topology.weights",
                             why="push-sum needs every column to sum to 1")

    def validate_for(self, push_sum: bool) -> None:
        """Check W suits an algorithm: push-sum needs column-stochastic W in every phase;
        the others (D-PSGD, Deep-Squeeze, Choco) need doubly stochastic W (SPEC §1)."""
        if push_sum:
            for W in self._W:
                check_stochastic(W, "column", option="topology.weights",
                                 why="push-sum needs every column to sum to 1")
            return
        for W in self._W:
            if is_doubly_stochastic(W):
                continue
            rows, cols = W.sum(axis=1), W.sum(axis=0)
            bad_r = np.flatnonzero(np.abs(rows - 1.0) > TOL)
            bad_c = np.flatnonzero(np.abs(cols - 1.0) > TOL)
            if len(bad_r):
                what = f"row {bad_r[0]} sums to {_fmt(rows[bad_r[0]])}"
            elif len(bad_c):
                what = f"column {bad_c[0]} sums to {_fmt(cols[bad_c[0]])}"
            else:
                what = "it has negative entries"
            fix = ("use topology.weights=metropolis or an algorithm with push_sum=true"
                   if self.is_undirected else
                   "the graph is directed and irregular, so use an algorithm with push_sum=true "
                   "or an undirected graph with topology.weights=metropolis")
            raise ConfigError(
                "topology",
                f"W of {self.name!r} with {self.weights_scheme} weights is not doubly stochastic "
                f"({what}); {fix}",
            )

    # ----------------------------------------------------------------- display
    def describe(self) -> str:
        """Human-readable summary: graph, W (4 decimals, '.' for 0) and spectral gap."""
        lines = [
            f"topology: {self.description}",
            f"nodes: {self.n}   weights: {self.weights_scheme}   "
            f"{'time-varying, period ' + str(self.period) if self.time_varying else 'static'}",
            f"regular: {self.is_regular}   undirected: {self.is_undirected}   "
            f"doubly stochastic: {self.is_doubly_stochastic}",
        ]
        width = 6
        for t in range(self.period):
            W = self._W[t]
            lines.append(f"W (phase {t} of {self.period}, used at steps t ≡ {t} mod {self.period}):"
                         if self.time_varying else "W:")
            header = "      " + " ".join(f"{j:>{width}d}" for j in range(self.n))
            lines.append(header)
            for i in range(self.n):
                cells = " ".join(f"{W[i, j]:{width}.4f}" if W[i, j] != 0 else f"{'.':>{width}}" for j in range(self.n))
                lines.append(f"{i:>4d}  {cells}")
        label = "spectral gap per step (product over one period)" if self.time_varying else "spectral gap 1 - |lambda2(W)|"
        lines.append(f"{label}: {self.spectral_gap:.6f}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        tv = f", time_varying, period={self.period}" if self.time_varying else ""
        return f"Topology({self.description!r}, n={self.n}, weights={self.weights_scheme!r}{tv})"


def make_topology(
    name: str,
    n: int,
    weights: str = "uniform",
    rows: int | None = None,
    cols: int | None = None,
    path: str | os.PathLike[str] | None = None,
    undirected: bool = False,
    time_varying: bool = False,
) -> Topology:
    """Build and validate a topology (SPEC §1).

    ``name`` ∈ :data:`TOPOLOGIES`; ``weights`` ∈ {uniform, metropolis} (metropolis needs
    an undirected graph); ``rows``/``cols`` only for torus; ``path``/``undirected`` only
    for edge_list; ``time_varying=True`` only for exponential (one peer per step).
    Raises :class:`ConfigError` for bad options, a graph that is not strongly connected,
    or a W that is not column-stochastic."""
    if name not in TOPOLOGIES:
        raise choice_error("topology", name, TOPOLOGIES)
    n = graphs.check_nodes(n)
    if weights not in WEIGHTS:
        raise choice_error("topology.weights", weights, WEIGHTS)
    if name != "torus":
        for opt, v in (("topology.rows", rows), ("topology.cols", cols)):
            if v is not None:
                raise ConfigError(opt, f"only used with topology=torus, not topology={name}")
    if name != "edge_list":
        if path is not None:
            raise ConfigError("topology.path", f"only used with topology=edge_list, not topology={name}")
        if undirected:
            raise ConfigError("topology.undirected", f"only used with topology=edge_list, not topology={name}")
    if time_varying and name != "exponential":
        raise ConfigError("topology.time_varying", f"only topology=exponential has a time-varying variant, not {name}")

    description = name
    adjacency: np.ndarray | list[np.ndarray]
    if name == "directed_ring":
        adjacency = graphs.directed_ring(n)
    elif name == "ring":
        adjacency = graphs.ring(n)
    elif name == "torus":
        r, c = graphs.torus_shape(n, rows, cols)
        adjacency = graphs.torus(n, r, c)
        description = f"torus {r}x{c}"
    elif name == "complete":
        adjacency = graphs.complete(n)
    elif name == "exponential":
        if time_varying:
            adjacency = graphs.one_peer_exponential(n)
            description = "exponential (one peer per step)"
        else:
            adjacency = graphs.exponential(n)
    elif name == "star":
        adjacency = graphs.star(n)
    else:  # edge_list
        if path is None:
            raise ConfigError("topology.path", "topology=edge_list needs a file, e.g. topology.path=graph.txt")
        adjacency = graphs.edge_list(path, n, undirected=undirected)
        description = f"edge_list {os.fspath(path)}" + (" (undirected)" if undirected else "")

    # Check connectivity before building weights, so the connectivity message wins.
    phases = adjacency if isinstance(adjacency, list) else [adjacency]
    check_strongly_connected(np.logical_or.reduce(phases), option="topology")
    topo = Topology(name, adjacency, weights, description=description)
    topo.validate()
    return topo
