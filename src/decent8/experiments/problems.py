"""Tiny tensors-only problems that drive the algorithm classes directly over long horizons
(float32 numerics of Choco-SGD, D² and gradient tracking). Shared by the tests and the
benchmarks (``benchmarks/choco_drift.py``, ``benchmarks/exact_state.py``); every algorithm
is built through :meth:`~decent8.algorithms.base.Algorithm.from_context`, as a run builds it."""
from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from ..algorithms import ChocoSGD, algorithm_class
from ..algorithms.dpsgd import DPSGD
from ..algorithms.base import Algorithm, AlgorithmContext
from ..comm import SimulatorCommunicator
from ..compression import make_compressor
from ..compression.base import Compressor
from ..layout import ParamLayout
from ..topology import Topology, make_topology

N, D = 8, 20


def make(algorithm: str | type[Algorithm], topology: Topology, compressor: Compressor, gamma: float,
         push_sum: bool, generators=None, device: torch.device | str = "cpu") -> Algorithm:
    """The algorithm (a registered name or a class) on a simulator over ``topology``."""
    cls = algorithm_class(algorithm) if isinstance(algorithm, str) else algorithm
    comm = SimulatorCommunicator(topology, device)
    return cls.from_context(AlgorithmContext(comm, compressor, gamma, push_sum, generators))


class RunningSumChoco(ChocoSGD):
    """The earlier Choco-SGD: s_i = Σ_j W_ij x̂_j kept as a float32 running sum (drifts)."""

    def init_state(self, x):
        super().init_state(x)
        self.s = torch.zeros_like(x)

    def buffers(self):
        return {"x_hat": self.x_hat, "s": self.s}

    def _gossip(self, z, step):
        payload = self._encode(z - self.x_hat)
        q = self.compressor.decode(payload)
        self.x_hat += q
        self.s += self.comm.exchange(payload, self.compressor, step, decoded=q)
        z.add_(self.s - self.x_hat, alpha=self.gamma)


# ---------------------------------------------------------------- a convex quadratic on a ring
def quadratic_problem():
    """Non-IID strongly convex f_i(x) = ½ Σ_k a_ik (x_k − c_ik)²: (a, c, optimum of Σ_i f_i in float64)."""
    g = torch.Generator().manual_seed(0)
    a = 0.5 + torch.rand(N, D, generator=g)
    c = torch.randn(N, D, generator=g) + torch.linspace(-1.0, 1.0, N)[:, None]  # node i's optimum shifted by i
    xstar = (a.double() * c.double()).sum(0) / a.double().sum(0)
    return a, c, xstar


def train_quadratic(algo: Algorithm, a, c, steps: int, lr: float = 0.05) -> torch.Tensor:
    """``steps`` local gradient steps x½ = x − lr ∇f_i(x), each followed by ``algo.step``."""
    z = torch.zeros(N, D)
    algo.init_state(z)
    for t in range(steps):
        z.sub_(lr * a * (z - c))
        algo.step(z, t)
    return z


def dpsgd_and(cls: type[Algorithm] = ChocoSGD) -> tuple[Algorithm, Algorithm]:
    """D-PSGD and ``cls`` (identity compression, γ = 1) on the 8-node Metropolis ring (doubly stochastic W)."""
    topo = make_topology("ring", N, weights="metropolis")
    ident = make_compressor("identity", ParamLayout.single(D))
    return make(DPSGD, topo, ident, 1.0, False), make(cls, topo, ident, 1.0, False)


# ---------------------------------------------------------------- push-sum on an irregular digraph
IRREGULAR_7_EDGES = "0 1\n0 2\n0 3\n1 2\n2 3\n2 4\n3 4\n4 5\n5 6\n6 0\n1 5\n"


def irregular_7(folder: str | Path | None = None) -> Topology:
    """A 7-node digraph with unequal out-degrees (W not doubly stochastic): push-sum."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(folder or tmp) / "g7.txt"
        path.write_text(IRREGULAR_7_EDGES)
        topo = make_topology("edge_list", 7, path=str(path))
    assert not topo.is_doubly_stochastic and len(set(topo.out_degree().tolist())) > 1
    return topo


def push_sum_gossip(topo: Topology, comp: Compressor, gamma: float, rounds: int,
                    cls: type[Algorithm] = ChocoSGD) -> list[tuple[float, float]]:
    """Gossip only, push-sum; every 1,000 rounds (consensus distance, max error to the true average)."""
    algo = make(cls, topo, comp, gamma, True, [torch.Generator().manual_seed(i) for i in range(7)])
    x0 = torch.randn(7, D, generator=torch.Generator().manual_seed(0)) + 2.0
    z = x0.clone()
    algo.init_state(z)
    out = []
    for t in range(rounds):
        algo.step(z, t)
        if (t + 1) % 1000 == 0:
            x = algo.debiased(z).double()
            consensus = (x - x.mean(0)).pow(2).sum(1).mean().sqrt().item()
            out.append((consensus, (x - x0.double().mean(0)).abs().max().item()))
    return out


# ---------------------------------------------------------------- heterogeneous least squares (D², GT)
def far_least_squares(n: int = 8, m: int = 40, d: int = 3, center: float = 3.0, spread: float = 3.0):
    """f_i(x) = ½‖A_i x − b_i‖², local optima ``spread``·u_i apart around ``center`` (|x*| ≈ 5): (A, b, x*)."""
    g = torch.Generator().manual_seed(0)
    A = torch.randn(n, m, d, generator=g) / m**0.5
    u = torch.randn(n, d, generator=g)
    u -= u.mean(0)
    b = torch.einsum("kmd,kd->km", A, center + spread * u)
    H = torch.einsum("kmd,kme->de", A.double(), A.double())
    return A, b, torch.linalg.solve(H, torch.einsum("kmd,km->d", A.double(), b.double()))


def heterogeneous_run(name: str, steps: int, push_sum: bool = False, topology: str = "ring", gamma: float = 1.0,
                      lr: float = 0.3, epoch: int = 10, cls: type[Algorithm] | None = None) -> list[float]:
    """Full-batch steps of algorithm ``name`` (or ``cls``); every ``epoch`` steps each node's rows
    are reshuffled (same gradient, another float32 summation order). Returns the distance of
    the worst node to x* every 100 steps."""
    A, b, xstar = far_least_squares()
    n, m, d = A.shape
    ident = make_compressor("identity", ParamLayout.single(d))
    algo = make(cls or name, make_topology(topology, n), ident, gamma, push_sum)
    shuffle = torch.Generator().manual_seed(1)
    z = torch.zeros(n, d)
    algo.init_state(z)
    dists = []
    for t in range(steps):
        if t % epoch == 0:
            p = torch.randperm(m, generator=shuffle)
            Ap, bp = A[:, p].contiguous(), b[:, p].contiguous()
        x = algo.debiased(z)
        grad = torch.einsum("kmd,km->kd", Ap, torch.einsum("kmd,kd->km", Ap, x) - bp)
        direction = algo.local_direction(grad, x, lr, t)
        z.sub_(direction, alpha=lr)
        algo.step(z, t)
        if (t + 1) % 100 == 0:
            dists.append((algo.debiased(z).double() - xstar).norm(dim=1).max().item())
    return dists
