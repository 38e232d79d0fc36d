"""Sparse topologies for many nodes (SPEC §1).

Above :data:`~decent8.topology.graphs.DENSE_MAX_NODES` nodes a topology is held as edge
lists and a ``scipy.sparse`` CSR mixing matrix per phase — never an ``[n, n]`` array.
Only graphs that are Cayley graphs of an abelian group (a node i is a tuple of digits in
``Z_{m1} × … × Z_{mk}``, every node has the same neighbour offsets) are built this way:
ring and directed ring (Z_n), torus (Z_rows × Z_cols), exponential (Z_n, static or one
peer per step) and hypercube (Z_2^d, static or one dimension per round). Their uniform
(and Metropolis) weights are shift-invariant, so W is a group convolution and its
spectrum is the discrete Fourier transform of W's column 0 (:func:`group_spectrum`):
the spectral gap costs O(n log n) instead of an O(n³) dense eigen-solve.

Conventions as in :mod:`~decent8.topology.topology`: W[i, j] is what i takes from j.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import scipy.sparse as sp
import torch

from decent8.errors import ConfigError
from decent8.topology.mixing import TOL, _fmt
from decent8.topology.graphs import DENSE_MAX_NODES
from decent8.topology import graphs

__all__ = ["SPARSE_TOPOLOGIES", "SparseTopology", "shift_edges", "group_spectrum", "sparse_mixing"]

#: topologies that can be built without a dense matrix (nodes > DENSE_MAX_NODES)
SPARSE_TOPOLOGIES: tuple[str, ...] = ("ring", "directed_ring", "torus", "exponential", "hypercube")


def shift_edges(shape: tuple[int, ...], offsets: Sequence[tuple[int, ...]], xor: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Directed edges src → dst of the Cayley graph on ``Z_{shape[0]} × …``: node i (digits
    ``unravel(i, shape)``) sends to i + o for every offset o (componentwise mod, or XOR
    for ``xor=True``). Duplicates and self-loops removed; sorted by (dst, src)."""
    n = int(np.prod(shape))
    digits = np.stack(np.unravel_index(np.arange(n), shape), axis=0)      # [k, n]
    src, dst = [], []
    for o in offsets:
        o = np.asarray(o, dtype=np.int64)[:, None]
        d = (digits ^ o) if xor else (digits + o) % np.asarray(shape)[:, None]
        src.append(np.arange(n))
        dst.append(np.ravel_multi_index(tuple(d), shape))
    s, t = np.concatenate(src), np.concatenate(dst)
    keep = s != t
    key = np.unique(t[keep] * n + s[keep])                                # merges duplicates, sorts
    return (key % n).astype(np.int64), (key // n).astype(np.int64)


def sparse_mixing(n: int, src: np.ndarray, dst: np.ndarray, weights: str) -> sp.csr_matrix:
    """W as CSR from the edges src → dst with uniform weights (1/(outdeg(j)+1) for j → i
    and i = j; column-stochastic) or Metropolis weights (undirected graphs only:
    1/(1 + max(deg_i, deg_j)), diagonal 1 − row sum). Same formulas as
    :func:`~decent8.topology.mixing.uniform_weights` / ``metropolis_weights`` (SPEC §1)."""
    out_deg = np.bincount(src, minlength=n).astype(np.float64)
    if weights == "uniform":
        share = 1.0 / (out_deg + 1.0)
        vals, diag = share[src], share
    else:
        deg = np.bincount(dst, minlength=n).astype(np.float64)
        vals = 1.0 / (1.0 + np.maximum(deg[dst], deg[src]))
        diag = 1.0 - np.bincount(dst, weights=vals, minlength=n)
    idx = np.arange(n)
    W = sp.coo_matrix((np.concatenate([vals, diag]), (np.concatenate([dst, idx]), np.concatenate([src, idx]))),
                      shape=(n, n)).tocsr()
    W.sort_indices()
    return W


def group_spectrum(W: sp.csr_matrix, shape: tuple[int, ...], xor: bool = False) -> np.ndarray | None:
    """All n eigenvalues of W when W is a convolution on the group ``Z_{shape}`` (or Z_2^d
    with ``xor``): W[i, j] = c[i − j], c = W[:, 0]; then the eigenvalues are ``fftn(c)``
    (for Z_2^d the Walsh–Hadamard transform, which fftn over shape (2, …, 2) is). None when
    W is not shift-invariant (checked on every stored entry)."""
    n = W.shape[0]
    coo = W.tocoo()
    di = np.stack(np.unravel_index(coo.row, shape)).astype(np.int64)
    dj = np.stack(np.unravel_index(coo.col, shape)).astype(np.int64)
    diff = (di ^ dj) if xor else (di - dj) % np.asarray(shape)[:, None]
    flat = np.ravel_multi_index(tuple(diff), shape)
    c = np.zeros(n)
    c[flat] = coo.data
    if not np.allclose(c[flat], coo.data, rtol=0.0, atol=1e-15) or not np.isclose(W[:, 0].sum(), c.sum()):
        return None
    return np.fft.fftn(c.reshape(shape)).reshape(-1)


def _dense_refused(what: str) -> ConfigError:
    return ConfigError("nodes", f"{what} needs the dense n × n mixing matrix: at most {DENSE_MAX_NODES} nodes "
                                f"(sparse topologies above that support gossip in the simulator only)")


class SparseTopology:
    """A static or periodic topology over many nodes, stored sparse (module docstring).

    Offers the part of :class:`~decent8.topology.Topology` the simulator's training path
    uses (:meth:`edges`, :meth:`weights_sparse`, degrees, stochasticity checks, spectral
    gap); the dense accessors (:meth:`adjacency`, :meth:`weights_np`) raise a one-line
    ``ConfigError`` naming the node limit."""

    sparse = True

    def __init__(self, name: str, n: int, phases: Sequence[tuple[np.ndarray, np.ndarray]], weights: str,
                 shape: tuple[int, ...], xor: bool = False, *, description: str | None = None) -> None:
        self.name, self.n, self.weights_scheme = name, int(n), weights
        self.period = len(phases)
        self.time_varying = self.period > 1
        self.description = description or name
        self._edges = [(np.ascontiguousarray(s), np.ascontiguousarray(d)) for s, d in phases]
        self._shape, self._xor = tuple(shape), xor
        if weights == "metropolis" and not self.is_undirected:
            raise ConfigError("topology.weights", f"metropolis needs an undirected graph, but {name!r} is directed; "
                                                  "use topology.weights=uniform with a push-sum algorithm")
        self._W = [sparse_mixing(self.n, s, d, weights) for s, d in self._edges]
        self._gap: float | None = None
        self._torch: dict[tuple[int, str, torch.dtype], torch.Tensor] = {}

    # ------------------------------------------------------------------ access
    def phase(self, step: int = 0) -> int:
        return int(step) % self.period

    def edges(self, step: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Off-diagonal entries of W at ``step``: (dst, src, weight), sorted by (dst, src)."""
        W = self._W[self.phase(step)].tocoo()
        off = W.row != W.col
        return W.row[off].astype(np.int64), W.col[off].astype(np.int64), W.data[off]

    def weights_sparse(self, step: int = 0) -> sp.csr_matrix:
        """float64 CSR mixing matrix W of the phase at ``step`` (treat as read-only)."""
        return self._W[self.phase(step)]

    def weights_torch(self, step: int = 0, dtype: torch.dtype = torch.float32,
                      device: torch.device | str = "cpu") -> torch.Tensor:
        """W at ``step`` as a torch sparse CSR tensor (cached per phase, device and dtype)."""
        key = (self.phase(step), str(device), dtype)
        if key not in self._torch:
            W = self._W[key[0]]
            import warnings
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # "sparse CSR support is in beta"
                self._torch[key] = torch.sparse_csr_tensor(
                    torch.as_tensor(W.indptr, dtype=torch.int64), torch.as_tensor(W.indices, dtype=torch.int64),
                    torch.as_tensor(W.data, dtype=dtype), size=W.shape, device=device)
        return self._torch[key]

    def adjacency(self, step: int = 0) -> np.ndarray:
        raise _dense_refused(f"this feature (a dense adjacency of topology={self.name} with {self.n} nodes)")

    def weights_np(self, step: int = 0) -> np.ndarray:
        raise _dense_refused(f"this feature (a dense W of topology={self.name} with {self.n} nodes)")

    def weights(self, step: int = 0, device: torch.device | str | None = None) -> torch.Tensor:
        return self.weights_torch(step, torch.float32, device or "cpu")

    def in_neighbors(self, i: int, step: int = 0) -> list[int]:
        s, d = self._edges[self.phase(step)]
        return sorted(int(j) for j in s[d == i])

    def out_neighbors(self, i: int, step: int = 0) -> list[int]:
        s, d = self._edges[self.phase(step)]
        return sorted(int(k) for k in d[s == i])

    def out_degree(self, step: int = 0) -> np.ndarray:
        return np.bincount(self._edges[self.phase(step)][0], minlength=self.n).astype(np.int64)

    def in_degree(self, step: int = 0) -> np.ndarray:
        return np.bincount(self._edges[self.phase(step)][1], minlength=self.n).astype(np.int64)

    def mean_out_degree(self) -> float:
        return float(np.mean([self.out_degree(t).mean() for t in range(self.period)]))

    # ------------------------------------------------------------- properties
    @property
    def is_doubly_stochastic(self) -> bool:
        return all(self._sums_ok(W, axis) for W in self._W for axis in (0, 1)) and \
            all((W.data >= -TOL).all() for W in self._W)

    @staticmethod
    def _sums_ok(W: sp.csr_matrix, axis: int) -> bool:
        return bool(np.allclose(np.asarray(W.sum(axis=axis)).ravel(), 1.0, rtol=0.0, atol=TOL))

    @property
    def is_regular(self) -> bool:
        return all((np.concatenate([self.in_degree(t), self.out_degree(t)]) == self.out_degree(t)[0]).all()
                   for t in range(self.period))

    @property
    def is_undirected(self) -> bool:
        for s, d in self._edges:
            fwd = np.unique(d * self.n + s)
            if not np.array_equal(fwd, np.unique(s * self.n + d)):
                return False
        return True

    @property
    def spectral_gap(self) -> float:
        """1 − |λ₂(W_{τ−1} ⋯ W_0)|^{1/τ} as for the dense topologies (SPEC §1), from the
        group Fourier transform of each phase (the phases commute: their product's
        eigenvalues are the pointwise products). NaN when a W is not shift-invariant."""
        if self._gap is None:
            lam = np.ones(self.n, dtype=complex)
            for W in self._W:
                ev = group_spectrum(W, self._shape, self._xor)
                if ev is None:
                    self._gap = float("nan")
                    return self._gap
                lam = lam * ev
            mods = np.sort(np.abs(lam))[::-1]
            lam2 = 0.0 if mods[1] < 1e-12 else float(mods[1])
            self._gap = float(1.0 - lam2 ** (1.0 / self.period))
        return self._gap

    def rounds_to_consensus(self, max_rounds: int | None = None, tol: float = 1e-12) -> int | None:
        """Not computed at this size (it needs the dense product of the phases): None."""
        return None

    # -------------------------------------------------------------- validation
    def validate(self) -> None:
        """Column-stochastic W (strong connectivity holds by construction for these graphs)."""
        for W in self._W:
            sums = np.asarray(W.sum(axis=0)).ravel()
            bad = np.flatnonzero(np.abs(sums - 1.0) > TOL)
            if len(bad):
                raise ConfigError("topology.weights", f"column {bad[0]} of W sums to {_fmt(sums[bad[0]])}, "
                                                      "push-sum needs every column to sum to 1")

    def validate_for(self, push_sum: bool) -> None:
        """Push-sum: column-stochastic W; otherwise doubly stochastic (SPEC §1)."""
        self.validate()
        if push_sum or self.is_doubly_stochastic:
            return
        raise ConfigError("topology", f"W of {self.name!r} with {self.weights_scheme} weights is not doubly "
                                      f"stochastic; use an algorithm with push_sum=true")

    def describe(self) -> str:
        return "\n".join([
            f"topology: {self.description}",
            f"nodes: {self.n}   weights: {self.weights_scheme}   "
            f"{'time-varying, period ' + str(self.period) if self.time_varying else 'static'}   (sparse)",
            f"regular: {self.is_regular}   undirected: {self.is_undirected}   "
            f"doubly stochastic: {self.is_doubly_stochastic}   mean out-degree: {self.mean_out_degree():g}",
            f"spectral gap{' per step (product over one period)' if self.time_varying else ' 1 - |lambda2(W)|'}: "
            f"{self.spectral_gap:.3e}",
        ])

    def consensus_line(self) -> str:
        return "rounds to exact consensus: not computed (sparse topology)"

    def __repr__(self) -> str:
        return f"SparseTopology({self.description!r}, n={self.n}, weights={self.weights_scheme!r}, period={self.period})"


def make_sparse_topology(name: str, n: int, weights: str, rows: int | None = None, cols: int | None = None,
                         time_varying: bool = False) -> SparseTopology:
    """The sparse counterpart of :func:`~decent8.topology.make_topology` for ``name`` in
    :data:`SPARSE_TOPOLOGIES` (the same graphs as :mod:`~decent8.topology.graphs`)."""
    if name in ("ring", "directed_ring"):
        offs = [(1,)] if name == "directed_ring" else [(1,), (n - 1,)]
        return SparseTopology(name, n, [shift_edges((n,), offs)], weights, (n,))
    if name == "torus":
        r, c = graphs.torus_shape(n, rows, cols)
        offs = [(1, 0), (r - 1, 0), (0, 1), (0, c - 1)]
        return SparseTopology(name, n, [shift_edges((r, c), offs)], weights, (r, c), description=f"torus {r}x{c}")
    if name == "exponential":
        shifts = [2**k for k in range(n.bit_length()) if 2**k < n]
        if time_varying:
            tau = graphs.one_peer_exponential_period(n)
            phases = [shift_edges((n,), [(2**k,)]) for k in range(tau)]
            return SparseTopology(name, n, phases, weights, (n,), description="exponential (one peer per step)")
        return SparseTopology(name, n, [shift_edges((n,), [(s,) for s in shifts])], weights, (n,))
    if name == "hypercube":
        d = graphs._log2_exact(n, "hypercube")
        shape = (2,) * d
        unit = [tuple(int(ax == d - 1 - b) for ax in range(d)) for b in range(d)]   # bit b of i (C order)
        if time_varying:
            return SparseTopology(name, n, [shift_edges(shape, [u], xor=True) for u in unit], weights, shape, True,
                                  description="hypercube (one dimension per round)")
        return SparseTopology(name, n, [shift_edges(shape, unit, xor=True)], weights, shape, True)
    raise _dense_refused(f"topology={name}")
