"""Graph builders (SPEC §1).

Every builder returns a boolean adjacency ``adj`` of shape ``[n, n]`` with
``adj[i, j] = True`` iff there is an edge j → i (node i receives from node j), i ≠ j.
Self-loops are implicit: every node always keeps its own value, so the diagonal is
never stored (it is always False here).
"""
from __future__ import annotations

import math
import os

import numpy as np

from decent8.errors import ConfigError

__all__ = [
    "check_nodes",
    "directed_ring",
    "ring",
    "torus",
    "torus_shape",
    "complete",
    "exponential",
    "star",
    "edge_list",
    "one_peer_exponential",
    "one_peer_exponential_period",
]


#: The builders here return dense n × n matrices (and W's spectrum is computed densely):
#: at most this many nodes. Above it, topology/sparse.py builds the sparse graphs.
DENSE_MAX_NODES = 4096
#: at most this many nodes at all (sparse topologies, topology/sparse.py): the
#: simulator holds every node's state in one process — 65,536 nodes of the 10,000-node MNIST
#: run's MLP (365 KiB per node at peak, docs/results/scale_10k.md) would need about 23 GiB
MAX_NODES = 65_536
#: the topologies that have a sparse form above DENSE_MAX_NODES (topology/sparse.py)
SPARSE_NAMES = "ring, directed_ring, torus, exponential, hypercube"


def check_nodes(n: int, dense: bool = True) -> int:
    """Validate the node count: an integer in [2, DENSE_MAX_NODES] for a dense graph
    (``dense=False``: up to MAX_NODES); a graph of one node has nothing to mix."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise ConfigError("nodes", f"need an integer number of nodes ≥ 2, got {n!r}")
    if n < 2:
        raise ConfigError("nodes", f"need at least 2 nodes, got {n}")
    if n > MAX_NODES:
        raise ConfigError("nodes", f"at most {MAX_NODES:,} nodes, got {n}")
    if dense and n > DENSE_MAX_NODES:
        raise ConfigError("nodes", f"at most {DENSE_MAX_NODES} nodes for a dense n × n topology, got {n}; "
                                   f"above that use topology={SPARSE_NAMES} (built sparse)")
    return int(n)


def _from_edges(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Adjacency from directed edges src → dst (duplicates merged, self-loops dropped)."""
    adj = np.zeros((n, n), dtype=bool)
    adj[np.asarray(dst, dtype=np.int64), np.asarray(src, dtype=np.int64)] = True
    np.fill_diagonal(adj, False)
    return adj


def _shift_graph(n: int, shifts: list[int]) -> np.ndarray:
    """Circulant graph: every node i sends to i + s (mod n) for each s in ``shifts``."""
    i = np.arange(n)
    src = np.concatenate([i for _ in shifts]) if shifts else np.zeros(0, np.int64)
    dst = np.concatenate([(i + s) % n for s in shifts]) if shifts else np.zeros(0, np.int64)
    return _from_edges(n, src, dst)


def directed_ring(n: int) -> np.ndarray:
    """Directed ring: i sends to i+1 (mod n), receives from i−1. With uniform weights
    W = (I + P)/2, P the cyclic shift (SPEC §1, the paper's "directed ring")."""
    n = check_nodes(n)
    return _shift_graph(n, [1])


def ring(n: int) -> np.ndarray:
    """Undirected ring: i ↔ i ± 1 (mod n). For n = 2 both neighbours coincide (one edge)."""
    n = check_nodes(n)
    return _shift_graph(n, [1, n - 1])


def torus_shape(n: int, rows: int | None = None, cols: int | None = None) -> tuple[int, int]:
    """Resolve the torus shape: given ``rows``/``cols``, or the most square factorization
    ``rows × cols = n`` with rows ≤ cols (a prime n gives 1 × n, i.e. a ring)."""
    n = check_nodes(n, dense=False)
    for opt, v in (("topology.rows", rows), ("topology.cols", cols)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1):
            raise ConfigError(opt, f"must be a positive integer, got {v!r}")
    if rows is None and cols is None:
        r = int(math.isqrt(n))
        while n % r:
            r -= 1
        return r, n // r
    if rows is not None and cols is not None:
        if rows * cols != n:
            raise ConfigError(
                "topology.rows",
                f"rows*cols must equal nodes, got {rows}*{cols} = {rows * cols} but nodes = {n}",
            )
        return int(rows), int(cols)
    given, opt = (rows, "topology.rows") if rows is not None else (cols, "topology.cols")
    if n % given:
        raise ConfigError(opt, f"{given} does not divide nodes = {n}; rows*cols must equal nodes")
    return (int(rows), n // int(rows)) if rows is not None else (n // int(cols), int(cols))


def torus(n: int, rows: int | None = None, cols: int | None = None) -> np.ndarray:
    """Undirected 2-D torus ``rows × cols`` (node i = r·cols + c): neighbours
    (r ± 1, c) and (r, c ± 1), wrapping around — 4 neighbours + self, so uniform
    weights are 1/5 (SPEC §1). With rows or cols ≤ 2, coinciding neighbours are merged
    (and a length-1 dimension adds no edges)."""
    n = check_nodes(n)
    rows, cols = torus_shape(n, rows, cols)
    r, c = np.divmod(np.arange(n), cols)
    src, dst = [], []
    for dr, dc in ((1, 0), (-1, 0), (0, 1), (0, -1)):
        src.append(np.arange(n))
        dst.append(((r + dr) % rows) * cols + (c + dc) % cols)
    return _from_edges(n, np.concatenate(src), np.concatenate(dst))


def complete(n: int) -> np.ndarray:
    """Complete graph: every node sends to every other node (W = J/n with uniform weights)."""
    n = check_nodes(n)
    adj = np.ones((n, n), dtype=bool)
    np.fill_diagonal(adj, False)
    return adj


def exponential(n: int) -> np.ndarray:
    """Static exponential graph: i sends to i + 2^k (mod n) for every 2^k < n (directed,
    regular with out-degree ⌈log₂ n⌉)."""
    n = check_nodes(n)
    return _shift_graph(n, [2**k for k in range(n.bit_length()) if 2**k < n])


def one_peer_exponential_period(n: int) -> int:
    """τ = ⌈log₂ n⌉, the period of the one-peer exponential graph."""
    n = check_nodes(n, dense=False)
    return max(1, (n - 1).bit_length())


def one_peer_exponential(n: int) -> list[np.ndarray]:
    """Time-varying one-peer exponential graph: at step t node i sends only to
    i + 2^(t mod τ) (mod n), τ = ⌈log₂ n⌉. Returns the τ phase adjacencies.
    For n a power of two the uniform-weight product over one period is exactly J/n."""
    n = check_nodes(n)
    return [_shift_graph(n, [2**k]) for k in range(one_peer_exponential_period(n))]


def star(n: int) -> np.ndarray:
    """Undirected star with node 0 at the centre."""
    n = check_nodes(n)
    leaves = np.arange(1, n)
    zeros = np.zeros(n - 1, dtype=np.int64)
    return _from_edges(n, np.concatenate([leaves, zeros]), np.concatenate([zeros, leaves]))


#: an edge-list file is at most 1 MiB + 64 bytes per possible edge, and at most this many bytes
EDGE_LIST_MAX_BYTES = 1 << 30


def edge_list(path: str | os.PathLike[str], n: int, undirected: bool = False) -> np.ndarray:
    """Read a text file of directed edges, one ``src dst`` per line (src sends to dst;
    node ids in 0..n−1; ``#`` starts a comment; blank lines ignored; a comma may
    separate the ids). ``undirected=True`` adds every reverse edge. Self-loops ``i i``
    are accepted and ignored (they are implicit)."""
    n = check_nodes(n)
    if path is None or str(path) == "":
        raise ConfigError("topology.path", "topology=edge_list needs a file, e.g. topology.path=graph.txt")
    if not os.path.isfile(path):
        raise ConfigError("topology.path", f"edge-list file not found: {os.fspath(path)}")
    src: list[int] = []
    dst: list[int] = []
    limit = min(EDGE_LIST_MAX_BYTES, (1 << 20) + 64 * n * n)
    try:
        size = os.path.getsize(path)
        if size > limit:
            raise ConfigError("topology.path", f"{os.fspath(path)} has {size} bytes; an edge-list file may have at most "
                                               f"{limit}")
        with open(path, "rb") as fb:
            text = fb.read().decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError("topology.path", f"{os.fspath(path)} is not UTF-8 text (byte {e.start})") from None
    except OSError as e:
        raise ConfigError("topology.path", f"cannot read {os.fspath(path)}: {e.strerror or e}") from None
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].replace(",", " ").strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 2:
            raise ConfigError(
                "topology.path",
                f"{os.fspath(path)} line {lineno}: expected 'src dst' (two node ids), got {raw.strip()!r}",
            )
        try:
            s, d = int(parts[0]), int(parts[1])
        except ValueError:
            raise ConfigError(
                "topology.path",
                f"{os.fspath(path)} line {lineno}: node ids must be integers, got {raw.strip()!r}",
            ) from None
        for v in (s, d):
            if not 0 <= v < n:
                raise ConfigError(
                    "topology.path",
                    f"{os.fspath(path)} line {lineno}: node {v} is out of range; ids must be 0..{n - 1} for nodes = {n}",
                )
        src.append(s)
        dst.append(d)
    if not src:
        raise ConfigError("topology.path", f"{os.fspath(path)} contains no edges")
    s_arr, d_arr = np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64)
    if undirected:
        s_arr, d_arr = np.concatenate([s_arr, d_arr]), np.concatenate([d_arr, s_arr])
    return _from_edges(n, s_arr, d_arr)


# ----------------------------------------------------------------- hypercube
def _log2_exact(n: int, name: str) -> int:
    """log₂ n for n a power of two, else a ConfigError naming the topology."""
    n = check_nodes(n, dense=False)
    if n & (n - 1):
        lo = 1 << (n.bit_length() - 1)
        raise ConfigError("nodes", f"topology={name} needs a power-of-two number of nodes (e.g. {lo} or {2 * lo}), "
                                   f"got {n}; topology=base works for any n")
    return n.bit_length() - 1


def hypercube(n: int) -> np.ndarray:
    """Static hypercube on n = 2^d nodes: i ↔ i XOR 2^b for every bit b (d neighbours,
    undirected, regular; uniform weights 1/(d+1))."""
    d = _log2_exact(n, "hypercube")
    i = np.arange(n)
    return _from_edges(n, np.concatenate([i] * d), np.concatenate([i ^ (1 << b) for b in range(d)]))


def one_peer_hypercube(n: int) -> list[np.ndarray]:
    """Time-varying hypercube: in round t node i pairs with i XOR 2^(t mod d), d = log₂ n.
    With weights 1/2 the product of the d rounds is exactly J/n: finite-time exact
    consensus in log₂ n rounds (each round averages along one dimension)."""
    d = _log2_exact(n, "hypercube")
    i = np.arange(n)
    return [_from_edges(n, i, i ^ (1 << b)) for b in range(d)]


# ---------------------------------------------------- Base-(k+1) graphs (W)
def _clique_factors(m: int, k: int) -> list[int] | None:
    """m as a product of factors in [2, k+1] (largest first), or None when m has a prime
    factor > k+1. ``[]`` for m = 1."""
    out: list[int] = []
    rest = m
    for f in range(k + 1, 1, -1):
        while rest % f == 0:
            out.append(f)
            rest //= f
    return out if rest == 1 else None


def _clique_rounds(nodes: list[int], factors: list[int]) -> list[list[list[int]]]:
    """The k-peer hyper-hypercube on ``nodes`` (Takezawa et al. 2023, Alg. 1): write the
    position q of a node in mixed radix ``factors``; round l joins the nodes whose digits
    differ only in digit l into a clique of size factors[l]. Averaging each clique
    (weights 1/size) for all rounds gives the exact mean of ``nodes``."""
    m = len(nodes)
    rounds = []
    stride = 1
    for f in factors:
        cliques = []
        for q in range(m):
            if (q // stride) % f == 0:
                cliques.append([nodes[q + d * stride] for d in range(f)])
        rounds.append(cliques)
        stride *= f
    return rounds


def _cliques_to_W(n: int, cliques: list[list[int]], W: np.ndarray | None = None) -> np.ndarray:
    W = np.eye(n) if W is None else W
    for c in cliques:
        idx = np.array(c)
        W[np.ix_(idx, idx)] = 1.0 / len(c)
    return W


def _simple_base_rounds(n: int, k: int) -> list[np.ndarray]:
    """The simple Base-(k+1) graph (Takezawa et al., NeurIPS 2023, Alg. 2) as mixing
    matrices whose product is exactly J/n.

    n = Σ_l a_l (k+1)^{p_l} (base-(k+1) digits, p_1 > p_2 > …) splits the nodes into
    groups V_l of s_l = a_l (k+1)^{p_l} nodes, each V_l into a_l subgroups of (k+1)^{p_l}.
    (1) every V_l averages internally (hyper-hypercube); (2) merge round l: each node i of
    R_l = V_{l+1} ∪ … (r_l nodes, r_l < (k+1)^{p_l}) pairs with one node j of each
    subgroup of V_l, c = s_l/(s_l + r_l): x_i ← (1−c) x_i + (c/a_l) Σ_j x_j and
    x_j ← (1 − c/a_l) x_j + (c/a_l) x_i. Then R_l's mean and every subgroup's mean equal
    the mean of V_l ∪ R_l, and the subgroups average internally in p_l more rounds.
    Max degree k; W symmetric and doubly stochastic in every round."""
    if _clique_factors(n, k) is not None:
        return [_cliques_to_W(n, r) for r in _clique_rounds(list(range(n)), _clique_factors(n, k))]
    b = k + 1
    digits, p, rest = [], 0, n
    while rest:
        digits.append((rest % b, p))
        rest //= b
        p += 1
    parts = [(a, p) for a, p in reversed(digits) if a]           # (a_l, p_l), p descending
    groups, start = [], 0
    for a, p in parts:
        groups.append(list(range(start, start + a * b**p)))
        start += a * b**p
    L = len(groups)
    # per round: a list of cliques and of explicit (i, j, c/a) merge links
    schedule: dict[int, list] = {}
    for (a, p), g in zip(parts, groups):
        for t, cl in enumerate(_clique_rounds(g, [a] * (a > 1) + [b] * p)):
            schedule.setdefault(t, []).append(("cliques", cl))
    r1 = (parts[0][1] + (parts[0][0] > 1))
    for l in range(L - 1):
        a, p = parts[l]
        t = r1 + l
        rest_nodes = [v for g in groups[l + 1:] for v in g]
        c = len(groups[l]) / (len(groups[l]) + len(rest_nodes))
        size = b**p
        links = [(i, groups[l][s * size + q], c / a) for q, i in enumerate(rest_nodes) for s in range(a)]
        schedule.setdefault(t, []).append(("links", links))
        subgroups = [groups[l][s * size:(s + 1) * size] for s in range(a)]
        for s_nodes in subgroups:
            for dt, cl in enumerate(_clique_rounds(s_nodes, [b] * p)):
                schedule.setdefault(t + 1 + dt, []).append(("cliques", cl))
    out = []
    for t in range(max(schedule) + 1):
        W = np.eye(n)
        for kind, what in schedule.get(t, []):
            if kind == "cliques":
                _cliques_to_W(n, what, W)
            else:
                for i, j, w in what:
                    W[i, j] = W[j, i] = w
                    W[j, j] = 1.0 - w
                    W[i, i] -= w
        out.append(W)
    return out


def base_graph(n: int, k: int = 1) -> list[np.ndarray]:
    """Mixing matrices of the Base-(k+1) graph (Takezawa, Sato, Bao, Niwa, Yamada, "Beyond
    Exponential Graph: Communication-Efficient Topologies for Decentralized Learning via
    Finite-time Convergence", NeurIPS 2023): every node has at most k peers per round and
    W_{m−1} ⋯ W_0 = J/n exactly, for any n. The better of the simple Base-(k+1) graph
    on all n nodes and its product form (Alg. 3): n = n_p · n_r with n_p the largest
    divisor of n whose prime factors are ≤ k+1 — n_p blocks of n_r nodes run the simple
    graph, then n_r strided groups of n_p nodes run the hyper-hypercube."""
    n = check_nodes(n)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k < n:
        raise ConfigError("topology.degree", f"topology=base needs an integer max degree k in [1, nodes-1], got {k!r}")
    k = int(k)
    simple = _simple_base_rounds(n, k)
    n_p = 1
    for f in range(2, k + 2):
        while n % (n_p * f) == 0 and all(f % q for q in range(2, f)):  # prime f ≤ k+1
            n_p *= f
    n_r = n // n_p
    if n_p == 1 or n_r == 1:
        return simple
    inner = _simple_base_rounds(n_r, k)
    combo = []
    for W_r in inner:
        W = np.zeros((n, n))
        for blk in range(n_p):
            s = blk * n_r
            W[s:s + n_r, s:s + n_r] = W_r
        combo.append(W)
    for cl in _clique_rounds(list(range(n_p)), _clique_factors(n_p, k) or []):
        combo.append(_cliques_to_W(n, [[r + c * n_r for c in clique] for r in range(n_r) for clique in cl]))
    return combo if len(combo) < len(simple) else simple


# ------------------------------------------------------- per-round random graphs
def erdos_renyi(n: int, degree: float, rng: np.random.Generator) -> np.ndarray:
    """One Erdős–Rényi graph G(n, p), p = degree/(n−1) (expected degree ``degree``),
    undirected; isolated nodes keep their value that round."""
    upper = np.triu(rng.random((n, n)) < degree / (n - 1), 1)
    return upper | upper.T


def random_matching(n: int, rng: np.random.Generator) -> np.ndarray:
    """A uniformly random (near-)perfect matching: shuffle the nodes and pair neighbours
    in the shuffled order (odd n: one node sits out). The synchronous form of randomized
    gossip (Boyd, Ghosh, Prabhakar, Shah, IEEE Trans. Inf. Theory 2006): each pair averages."""
    perm = rng.permutation(n)
    m = n - n % 2
    a, b = perm[0:m:2], perm[1:m:2]
    return _from_edges(n, np.concatenate([a, b]), np.concatenate([b, a]))


def random_k_out(n: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """Directed random k-out graph: every node sends to k distinct other nodes chosen
    uniformly (in-degrees vary, so W is only column-stochastic: push-sum)."""
    off = np.argsort(rng.random((n, n - 1)), axis=1)[:, :k] + 1   # k distinct offsets in 1..n−1
    src = np.repeat(np.arange(n), k)
    return _from_edges(n, src, (src + off.reshape(-1)) % n)
