"""Mixing matrices and graph validation (SPEC §1).

Convention: ``W[i, j]`` is the weight node i gives to what it receives from node j
(j an in-neighbour of i, or j = i). Gossip is ``x_i ← Σ_j W[i, j] x_j``.

* column-stochastic (Σ_i W[i, j] = 1 for every j): what push-sum needs;
* row-stochastic (Σ_j W[i, j] = 1): every node takes a convex combination;
* doubly stochastic: both — what D-PSGD / Deep-Squeeze / Choco assume.
"""
from __future__ import annotations

from typing import Literal

import numpy as np

from decent8.errors import ConfigError

__all__ = [
    "as_adjacency",
    "is_symmetric",
    "uniform_weights",
    "metropolis_weights",
    "check_strongly_connected",
    "check_stochastic",
    "is_doubly_stochastic",
    "second_eigenvalue_modulus",
    "spectral_gap",
]

TOL = 1e-9


def _fmt(x: float) -> str:
    """A sum for an error message: up to 4 decimals, no trailing zeros (2.6, 0.75, 1.125)."""
    return f"{x:.4f}".rstrip("0").rstrip(".")


def as_adjacency(adj: np.ndarray) -> np.ndarray:
    """A square boolean copy of ``adj`` with the (implicit) self-loops removed."""
    a = np.asarray(adj)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ConfigError("topology", f"an adjacency must be a square [n, n] matrix, got shape {a.shape}")
    a = a.astype(bool, copy=True)
    np.fill_diagonal(a, False)
    return a


def is_symmetric(adj: np.ndarray) -> bool:
    """True iff every edge j → i has its reverse i → j (an undirected graph)."""
    a = as_adjacency(adj)
    return bool(np.array_equal(a, a.T))


def uniform_weights(adj: np.ndarray) -> np.ndarray:
    """Uniform (push-sum) weights: node j splits its value equally among its
    out-neighbours and itself, W[i, j] = 1/(outdeg(j) + 1) for j → i and for i = j.
    Column-stochastic by construction; doubly stochastic iff the graph is regular
    enough that rows also sum to 1 (e.g. regular graphs). SPEC §1."""
    a = as_adjacency(adj)
    share = 1.0 / (a.sum(axis=0) + 1.0)  # per sender j
    W = a * share[None, :]
    W[np.diag_indices_from(W)] = share
    return W


def metropolis_weights(adj: np.ndarray) -> np.ndarray:
    """Metropolis–Hastings weights for an undirected graph:
    W[i, j] = 1/(1 + max(deg_i, deg_j)) for neighbours i ~ j, W[i, i] = 1 − Σ_{j≠i} W[i, j].
    Symmetric and doubly stochastic. Raises ``ConfigError('topology.weights', …)`` for a
    directed adjacency. SPEC §1."""
    a = as_adjacency(adj)
    if not np.array_equal(a, a.T):
        i, j = np.argwhere(a & ~a.T)[0]  # edge j → i without i → j
        raise ConfigError(
            "topology.weights",
            f"metropolis needs an undirected graph, but node {j} sends to node {i} and not back; "
            "use topology.weights=uniform (with a push-sum algorithm)",
        )
    deg = a.sum(axis=1).astype(np.float64)
    W = a / (1.0 + np.maximum(deg[:, None], deg[None, :]))
    W[np.diag_indices_from(W)] = 1.0 - W.sum(axis=1)
    return W


def _reach(a: np.ndarray, start: int, forward: bool) -> np.ndarray:
    """Nodes reachable from ``start`` along edges (forward) or against them (backward).
    ``a[i, j]`` is the edge j → i, so the successors of j are ``a[:, j]``."""
    n = a.shape[0]
    seen = np.zeros(n, dtype=bool)
    seen[start] = True
    frontier = seen.copy()
    m = a if forward else a.T  # m[i, j]: i is a successor of j
    while frontier.any():
        nxt = m[:, frontier].any(axis=1) & ~seen
        seen |= nxt
        frontier = nxt
    return seen


def check_strongly_connected(adj: np.ndarray, option: str = "topology") -> None:
    """Raise ``ConfigError`` unless every node can reach every other node; the message
    names a node that cannot be reached from node 0 or that cannot reach node 0."""
    a = as_adjacency(adj)
    down = _reach(a, 0, forward=True)
    if not down.all():
        k = int(np.flatnonzero(~down)[0])
        raise ConfigError(option, f"node {k} cannot be reached from node 0; the graph must be strongly connected")
    up = _reach(a, 0, forward=False)
    if not up.all():
        k = int(np.flatnonzero(~up)[0])
        raise ConfigError(option, f"node {k} cannot reach node 0; the graph must be strongly connected")


def check_stochastic(
    W: np.ndarray,
    need: Literal["column", "row", "doubly"],
    option: str = "topology.weights",
    why: str | None = None,
) -> None:
    """Raise ``ConfigError`` unless W ≥ 0 and its columns (``"column"``), rows
    (``"row"``) or both (``"doubly"``) sum to 1 within 1e-9. The message names the first
    offending column/row, e.g. "column 2 of W sums to 0.75, push-sum needs every column
    to sum to 1" (``why`` replaces the part after the comma)."""
    if need not in ("column", "row", "doubly"):
        raise ValueError(f"need must be 'column', 'row' or 'doubly', got {need!r}")
    W = np.asarray(W, dtype=np.float64)
    if W.ndim != 2 or W.shape[0] != W.shape[1]:
        raise ConfigError(option, f"W must be a square [n, n] matrix, got shape {W.shape}")
    neg = np.argwhere(W < -TOL)
    if len(neg):
        i, j = neg[0]
        raise ConfigError(option, f"W[{i}, {j}] = {W[i, j]:.4g} is negative; mixing weights must be ≥ 0")
    checks = {"column": ("column",), "row": ("row",), "doubly": ("column", "row")}[need]
    for kind in checks:
        sums = W.sum(axis=0 if kind == "column" else 1)
        bad = np.flatnonzero(np.abs(sums - 1.0) > TOL)
        if len(bad):
            k = int(bad[0])
            tail = why or f"every {kind} must sum to 1" + (" (W must be doubly stochastic)" if need == "doubly" else "")
            raise ConfigError(option, f"{kind} {k} of W sums to {_fmt(sums[k])}, {tail}")


def is_doubly_stochastic(W: np.ndarray, tol: float = TOL) -> bool:
    """True iff W ≥ 0 and every row and every column sums to 1 (within ``tol``)."""
    W = np.asarray(W, dtype=np.float64)
    return bool(
        (W >= -tol).all()
        and np.allclose(W.sum(axis=0), 1.0, rtol=0.0, atol=tol)
        and np.allclose(W.sum(axis=1), 1.0, rtol=0.0, atol=tol)
    )


def second_eigenvalue_modulus(W: np.ndarray, zero_tol: float = 1e-12) -> float:
    """|λ₂(W)|: the second largest eigenvalue modulus (numpy ``eigvals``; W may be
    non-symmetric, eigenvalues complex). Moduli below ``zero_tol`` count as exactly 0."""
    W = np.asarray(W, dtype=np.float64)
    if W.shape[0] < 2:
        return 0.0
    mods = np.sort(np.abs(np.linalg.eigvals(W)))[::-1]
    lam2 = float(mods[1])
    return 0.0 if lam2 < zero_tol else lam2


def spectral_gap(W: np.ndarray) -> float:
    """Spectral gap 1 − |λ₂(W)| (SPEC §1). For the n-node directed ring with
    W = (I + P)/2 the eigenvalues are (1 + e^{2πik/n})/2 with modulus |cos(πk/n)|, so
    the gap is 1 − cos(π/n)."""
    return 1.0 - second_eigenvalue_modulus(W)
