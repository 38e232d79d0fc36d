"""The :class:`Topology` object and the :func:`make_topology` factory (SPEC §1).

A topology is a directed graph with implicit self-loops plus its mixing matrix W
(``W[i, j]`` = weight node i gives to what it receives from node j). Time-varying
topologies (the one-peer exponential graph, the one-peer hypercube, the Base-(k+1)
graph) cycle through ``period`` phases; step t uses phase ``t mod period``. Per-round
random graphs (:class:`RandomTopology`: Erdős–Rényi, random matching, random k-out)
draw a fresh graph for every round t from (seed, t).
"""
from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from decent8.config import SHARED_OPTIONS
from decent8.errors import ConfigError, choice_error
from decent8.registry import check_options, construct, keyword_options, takes_any_keyword, topologies
from decent8.topology import graphs
from decent8.topology.sparse import SPARSE_TOPOLOGIES, make_sparse_topology
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
from decent8.seeding import derive_seed

__all__ = ["TOPOLOGIES", "RANDOM_TOPOLOGIES", "WEIGHTS", "Topology", "RandomTopology", "make_topology",
           "topology_from_config", "topology_options"]

#: per-round random graphs: a new graph every round, drawn from (seed, round)
RANDOM_TOPOLOGIES: tuple[str, ...] = ("erdos_renyi", "random_matching", "random_k_out")
#: rounds of a random topology's product in :attr:`Topology.spectral_gap` (the measured consensus rate)
RATE_WINDOW = 32
#: ``period`` of a per-round random topology: every step is its own phase
RANDOM_PERIOD = 2**62
WEIGHTS: tuple[str, ...] = ("uniform", "metropolis")


def __getattr__(name: str) -> Any:
    """``TOPOLOGIES``: the registered names (:data:`decent8.registry.topologies`), read when asked."""
    if name == "TOPOLOGIES":
        return topologies.names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _numpy(a: Any) -> Any:
    """A torch tensor as its numpy array (detached, on the CPU); anything else unchanged."""
    if hasattr(a, "detach") and hasattr(a, "numpy"):
        return a.detach().cpu().numpy()
    return a


class Topology:
    """A (possibly time-varying) gossip topology over ``n`` nodes.

    ``adjacency`` is one boolean ``[n, n]`` matrix (static) or a sequence of them
    (time-varying, one per phase); ``adj[i, j]`` means j → i. ``weights`` is the scheme
    (``"uniform"``: column-stochastic 1/(outdeg+1); ``"metropolis"``: doubly stochastic,
    undirected graphs only). The constructor does not check connectivity — use
    :func:`make_topology`, or call :meth:`validate` yourself. Dense: at most
    ``graphs.DENSE_MAX_NODES`` nodes (above, :class:`~decent8.topology.sparse.SparseTopology`).
    """

    #: dense ``[n, n]`` matrices (SparseTopology: edge lists and CSR)
    sparse = False

    def __init__(
        self,
        name: str,
        adjacency: np.ndarray | Sequence[np.ndarray],
        weights: str = "uniform",
        *,
        description: str | None = None,
        mixing: Sequence[np.ndarray] | None = None,
    ) -> None:
        """``mixing``: explicit W per phase (e.g. the Base-(k+1) graph), instead of W
        built from the adjacency by the ``weights`` scheme; checked ≥ 0 and doubly stochastic."""
        if weights not in WEIGHTS:
            raise choice_error("topology.weights", weights, WEIGHTS)
        adjacency = _numpy(adjacency)   # a torch [n, n] tensor is one adjacency, not a list of rounds
        phases = [adjacency] if isinstance(adjacency, np.ndarray) and np.ndim(adjacency) == 2 else \
            [_numpy(a) for a in adjacency]
        mixing = None if mixing is None else [_numpy(W) for W in (mixing if isinstance(mixing, (list, tuple))
                                                                   else list(_numpy(mixing)))]
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
        if mixing is not None:
            if len(mixing) != self.period:
                raise ConfigError("topology", f"{len(mixing)} mixing matrices for {self.period} phases")
            self._W: list[np.ndarray] = [np.array(W, dtype=np.float64) for W in mixing]
            for W in self._W:
                check_stochastic(W, "doubly", option="topology.weights")
            self.weights_scheme = "given"
        else:
            self._W = [build(a) for a in self._adj]
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

    def mean_out_degree(self) -> float:
        """Mean out-degree over nodes and over the phases of one period (messages each node
        sends per round, on average)."""
        return float(np.mean([self.out_degree(t).mean() for t in range(self.period)]))

    def rounds_to_consensus(self, max_rounds: int | None = None, tol: float = 1e-12) -> int | None:
        """The number m of rounds after which W_{m−1} ⋯ W_0 is exactly of rank one (every
        node holds the average; for a column-stochastic W the push-sum ratio), or None.

        Exact means: the largest deviation of a column from column 0, e(m), drops to ≤ ``tol``
        *at once* (e(m) ≤ 1e-6 · e(m−1)), which tells finite-time topologies — complete,
        one-peer exponential / hypercube for n = 2^d, Base-(k+1) (Takezawa et al. 2023) —
        from graphs that only converge geometrically (e(m) ≈ λ₂^m). Searched up to
        ``max_rounds`` (default max(64, 2·period))."""
        limit = max_rounds if max_rounds is not None else max(64, 2 * min(self.period, 4096))
        P = np.eye(self.n)
        prev = 1.0
        for t in range(limit):
            P = self.weights_np(t) @ P
            err = float(np.abs(P - P[:, :1]).max())
            if err <= tol:
                return t + 1 if err <= 1e-6 * prev else None
            prev = err
        return None

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
        lines.append(self.consensus_line())
        return "\n".join(lines)

    def consensus_line(self) -> str:
        """``rounds to exact consensus: m`` (finite-time graphs) or that it is only asymptotic."""
        m = self.rounds_to_consensus()
        return (f"rounds to exact consensus: {m}" if m is not None else
                "rounds to exact consensus: none (asymptotic only)")

    def __repr__(self) -> str:
        tv = f", time_varying, period={self.period}" if self.time_varying else ""
        return f"Topology({self.description!r}, n={self.n}, weights={self.weights_scheme!r}{tv})"


class RandomTopology(Topology):
    """A per-round random topology: round t uses a graph drawn with
    ``numpy.random.default_rng([seed, t, salt])`` — the same on every process and on a
    resumed run, with no state. Nothing is stored beyond a few recent rounds.

    * ``erdos_renyi``: G(n, p), p = degree/(n−1), undirected (Erdős & Rényi 1959);
    * ``random_matching``: a uniformly random (near-)perfect matching, pairs average
      (randomized gossip, Boyd et al. 2006) — W doubly stochastic with either scheme;
    * ``random_k_out``: each node sends to k uniformly chosen others (directed, push-sum).

    ``period`` is :data:`RANDOM_PERIOD` (every step its own phase); the spectral gap is
    the consensus rate measured over :data:`RATE_WINDOW` rounds, 1 − |λ₂(W_{R−1}⋯W_0)|^{1/R}.
    """

    _SALT = {"erdos_renyi": 1, "random_matching": 2, "random_k_out": 3}

    def __init__(self, name: str, n: int, weights: str = "uniform", *, seed: int = 0,
                 degree: float | None = None, description: str | None = None) -> None:
        if name not in RANDOM_TOPOLOGIES:
            raise choice_error("topology", name, RANDOM_TOPOLOGIES)
        if weights not in WEIGHTS:
            raise choice_error("topology.weights", weights, WEIGHTS)
        n = graphs.check_nodes(n)
        if name == "random_k_out" and weights == "metropolis":
            raise ConfigError("topology.weights", "metropolis needs an undirected graph, but random_k_out is directed; "
                                                  "use topology.weights=uniform with a push-sum algorithm")
        self.name, self.n, self.weights_scheme, self.seed = name, n, weights, int(seed)
        self.degree = degree
        self.period, self.time_varying = RANDOM_PERIOD, True
        self.description = description or name
        self._cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._torch: dict[tuple[int, str], torch.Tensor] = {}
        self._gap: float | None = None

    def phase(self, step: int = 0) -> int:
        return int(step) % RANDOM_PERIOD

    def _draw(self, step: int) -> tuple[np.ndarray, np.ndarray]:
        t = self.phase(step)
        hit = self._cache.get(t)
        if hit is not None:
            return hit
        rng = np.random.default_rng([self.seed, t, self._SALT[self.name]])
        if self.name == "erdos_renyi":
            adj = graphs.erdos_renyi(self.n, float(self.degree), rng)
        elif self.name == "random_matching":
            adj = graphs.random_matching(self.n, rng)
        else:
            adj = graphs.random_k_out(self.n, int(self.degree), rng)
        W = uniform_weights(adj) if self.weights_scheme == "uniform" else metropolis_weights(adj)
        adj.setflags(write=False)
        W.setflags(write=False)
        if len(self._cache) >= 8:
            self._cache.pop(next(iter(self._cache)))
            for key in [k for k in self._torch if k[0] not in self._cache]:
                del self._torch[key]
        self._cache[t] = (adj, W)
        return adj, W

    def adjacency(self, step: int = 0) -> np.ndarray:
        return self._draw(step)[0]

    def weights_np(self, step: int = 0) -> np.ndarray:
        return self._draw(step)[1]

    def weights(self, step: int = 0, device: torch.device | str | None = None) -> torch.Tensor:
        dev = torch.device(device) if device is not None else torch.device("cpu")
        key = (self.phase(step), str(dev))
        t = self._torch.get(key)
        if t is None:
            t = torch.tensor(self.weights_np(step), dtype=torch.float32, device=dev)
            self._torch[key] = t
        return t

    @property
    def is_doubly_stochastic(self) -> bool:
        """Structural: a matching (pairs average) and Metropolis weights are doubly
        stochastic in every round; uniform weights on an irregular graph are not."""
        return self.name == "random_matching" or self.weights_scheme == "metropolis"

    @property
    def is_regular(self) -> bool:
        return False

    @property
    def is_undirected(self) -> bool:
        return self.name != "random_k_out"

    @property
    def spectral_gap(self) -> float:
        """The measured consensus rate per round, 1 − |λ₂(W_{R−1} ⋯ W_0)|^{1/R}, for the
        largest R in 1, 2, 4, …, :data:`RATE_WINDOW` whose product has not yet contracted
        below 1e-6 (beyond that λ₂ of the product is rounding noise)."""
        if self._gap is None:
            P = np.eye(self.n)
            gap, done = 1.0, 0
            R = 1
            while R <= RATE_WINDOW:
                for t in range(done, R):
                    P = self.weights_np(t) @ P
                done = R
                lam2 = second_eigenvalue_modulus(P)
                if lam2 < 1e-6:
                    break
                gap = 1.0 - lam2 ** (1.0 / R)
                R *= 2
            self._gap = float(gap)
        return self._gap

    def mean_out_degree(self) -> float:
        """Expected messages per node and round: the expected degree (Erdős–Rényi), k
        (k-out), 1 (matching; (n−1)/n for odd n)."""
        if self.name == "erdos_renyi":
            return float(self.degree)
        if self.name == "random_k_out":
            return float(int(self.degree))
        return (self.n - self.n % 2) / self.n

    def rounds_to_consensus(self, max_rounds: int | None = None, tol: float = 1e-9) -> int | None:
        return super().rounds_to_consensus(max_rounds if max_rounds is not None else 64, tol)

    def validate(self) -> None:
        """Column-stochastic W in the first rounds (every round's W is column-stochastic by
        construction: uniform or Metropolis weights)."""
        for t in range(4):
            check_stochastic(self.weights_np(t), "column", option="topology.weights",
                             why="push-sum needs every column to sum to 1")

    def validate_for(self, push_sum: bool) -> None:
        if push_sum or self.is_doubly_stochastic:
            return
        fix = ("use topology.weights=metropolis or an algorithm with push_sum=true" if self.is_undirected else
               "it is directed, so use an algorithm with push_sum=true")
        raise ConfigError("topology", f"W of {self.name!r} with {self.weights_scheme} weights is not doubly stochastic "
                                      f"(node degrees differ from round to round); {fix}")

    def describe(self) -> str:
        lines = [f"topology: {self.description}",
                 f"nodes: {self.n}   weights: {self.weights_scheme}   random per round (seed {self.seed})",
                 f"undirected: {self.is_undirected}   doubly stochastic: {self.is_doubly_stochastic}   "
                 f"mean out-degree: {self.mean_out_degree():g}",
                 f"consensus rate per round, measured (1 - |lambda2(W_R-1...W_0)|^(1/R), R <= {RATE_WINDOW}): "
                 f"{self.spectral_gap:.6f}",
                 self.consensus_line()]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"RandomTopology({self.description!r}, n={self.n}, weights={self.weights_scheme!r}, seed={self.seed})"


def topology_from_config(t, nodes: int, seed: int = 0) -> Topology:
    """:func:`make_topology` from a ``TopologyConfig``: ``topology.weights`` and the function's
    keyword arguments ``topology.params`` (:func:`topology_options`); random graphs seeded
    from the run seed."""
    params = topology_options(t.name, getattr(t, "params", None))
    shared = {k: params.pop(k) for k in OPTIONS if k in params}
    return make_topology(t.name, nodes, weights=t.weights, seed=derive_seed(seed, "topology"), params=params,
                         **shared)


def user_topology(path: str, nodes: int, weights: str = "uniform", seed: int = 0, **params: Any) -> Topology:
    """``topology=pkg.module:function`` (docs/extending.md): :func:`make_topology` of a user's function."""
    return make_topology(path, nodes, weights=weights, seed=seed, params=params)


#: option names every topology accepts (the topology group's former fields) -> the value that
#: means "not set" (decent8.config.SHARED_OPTIONS): given to a topology function only when set,
#: and refused in one line when set for one that does not name them (:func:`_check_applies`)
OPTIONS: dict[str, Any] = SHARED_OPTIONS["topology"]
#: keyword arguments the builder gives a topology function itself: ``topology.weights`` (a field
#: of the group) and the seed derived from the run's
BUILDER_OPTIONS = ("weights", "seed")


def topology_options(name: str, given: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The keyword arguments topology ``name`` (a registered name or a user's
    ``pkg.module:function``) is built with beside ``weights`` and ``seed``: ``given``
    (``topology.<kwarg>=value``) checked against its function's signature and type hints
    (:func:`decent8.registry.check_options`), and the signature's defaults for the rest. A name of
    :data:`OPTIONS` at its "not set" value is the function's default (``rows=None`` for
    ``torus``: the squarest shape; ``degree=None`` for ``erdos_renyi``: 4), and dropped for a
    function that does not take it (every stored config holds them all); at any other value it
    is refused there in one line. What the resolved config records (``topology.rows`` is
    ``topology_options(t.name, t.params)["rows"]``)."""
    entry = topologies.entry(name)
    fn = entry.obj
    given = dict(given or {})
    shared = {k: given.pop(k) for k in OPTIONS if k in given}
    set_shared = {k: v for k, v in shared.items() if v is not OPTIONS[k]}   # None / False: not set
    _check_applies(entry.name, fn, set_shared)
    options = check_options(fn, {**set_shared, **given}, "topology", f"topology={entry.name}", skip=1)
    out: dict[str, Any] = {}
    for key, param in keyword_options(fn, skip=1).items():   # in the signature's order (config.yaml)
        if key in options:
            out[key] = options[key]
        elif key not in BUILDER_OPTIONS and param.default is not param.empty:
            out[key] = param.default
    return {**out, **{k: v for k, v in options.items() if k not in out}}


def _check_applies(name: str, fn: Any, options: dict[str, Any]) -> None:
    """An option set for a topology whose function does not take it: one line naming the
    topologies that do."""
    if takes_any_keyword(fn):
        return
    takes = keyword_options(fn)
    for option in options:
        if option in takes:
            continue
        users = [n for n, e in topologies.items() if option in keyword_options(e.obj)]
        if option == "time_varying":
            raise ConfigError("topology.time_varying", f"only topology={' and '.join(users)} have a time-varying "
                                                       f"variant, not {name}")
        raise ConfigError(f"topology.{option}", f"only used with topology={', '.join(users)}, not topology={name}")


def make_topology(
    name: str,
    n: int,
    weights: str = "uniform",
    rows: int | None = None,
    cols: int | None = None,
    path: str | os.PathLike[str] | None = None,
    undirected: bool = False,
    time_varying: bool = False,
    degree: float | None = None,
    seed: int = 0,
    params: dict[str, Any] | None = None,
) -> Topology:
    """Build and validate a topology (SPEC §1): the function registered as ``name``
    (:mod:`decent8.topology.builtin`, ``decent8 list``) or a user's ``pkg.module:function``,
    called as ``function(n, **options)``: the options below that are set and that it names,
    ``weights`` and ``seed`` if it names them, and ``params`` (``topology.<kwarg>=value``),
    checked against its signature and type hints (:func:`decent8.registry.construct`).

    ``weights`` ∈ {uniform, metropolis} (metropolis needs an undirected graph);
    ``rows``/``cols`` for torus; ``path``/``undirected`` for edge_list; ``time_varying=True``
    for exponential and hypercube (one peer per step); ``degree`` for erdos_renyi (expected
    degree, default 4), random_k_out (k, default 1) and base (max degree k, default 1);
    ``seed`` draws the random graphs. Raises :class:`ConfigError` for bad options, a graph
    that is not strongly connected, or a W that is not column-stochastic. Above
    ``graphs.DENSE_MAX_NODES`` nodes the topologies of
    :data:`~decent8.topology.sparse.SPARSE_TOPOLOGIES` are built sparse
    (:class:`~decent8.topology.sparse.SparseTopology`); the others are refused in one line."""
    entry = topologies.entry(name)
    set_options = {k: v for k, v in dict(rows=rows, cols=cols, path=path, undirected=undirected,
                                         time_varying=time_varying, degree=degree).items() if v != OPTIONS[k]}
    if not entry.builtin:
        return _from_function(entry.obj, name, n, weights, seed, set_options, params or {})
    n = graphs.check_nodes(n, dense=False)
    if n > graphs.DENSE_MAX_NODES and name not in SPARSE_TOPOLOGIES:
        raise ConfigError("topology", f"topology={name} is built as a dense n × n matrix: at most "
                                      f"{graphs.DENSE_MAX_NODES} nodes, got nodes={n}; above that use "
                                      f"topology={graphs.SPARSE_NAMES}")
    if weights not in WEIGHTS:
        raise choice_error("topology.weights", weights, WEIGHTS)
    _check_applies(name, entry.obj, set_options)
    if n > graphs.DENSE_MAX_NODES:  # sparse edge lists and CSR W (topology/sparse.py)
        topo_s = make_sparse_topology(name, n, weights, rows, cols, time_varying)
        topo_s.validate()
        return topo_s  # type: ignore[return-value]
    return construct(entry.obj, n, given=params, config={"weights": weights, "seed": seed, **set_options},
                     group="topology", what=f"topology={name}")


def _from_function(fn: Any, name: str, n: int, weights: str, seed: int, options: dict[str, Any],
                   params: dict[str, Any]) -> Topology:
    """A user's topology function (registered or ``pkg.module:function``): its Topology, or
    its adjacency (or list of them, one per round) with W from ``weights``; checked like the
    built-in graphs (strongly connected, W column-stochastic)."""
    n = graphs.check_nodes(n)
    _check_applies(name, fn, options)
    try:
        out = construct(fn, n, given=params, config={"weights": weights, "seed": seed, **options},
                        group="topology", what=f"topology={name}")
    except ConfigError:
        raise
    except Exception as e:
        raise ConfigError("topology", f"{name} failed: {type(e).__name__}: {e}") from None
    if weights not in WEIGHTS:
        raise choice_error("topology.weights", weights, WEIGHTS)
    if hasattr(out, "detach") and hasattr(out, "numpy"):   # a torch tensor: its array (not a list of rounds)
        out = out.detach().cpu().numpy()
    try:
        topo = out if isinstance(out, Topology) else Topology(name, out, weights, description=name)
    except Exception as e:
        why = e.message if isinstance(e, ConfigError) else f"{type(e).__name__}: {e}"
        raise ConfigError("topology", f"{name} returned {type(out).__name__}, not a Topology or a boolean [n, n] "
                                      f"adjacency (or a list of them): {why}") from None
    if topo.n != n:
        raise ConfigError("topology", f"{name} returned a graph of {topo.n} nodes for nodes={n}")
    topo.validate()
    return topo
