"""A heterogeneous least-squares problem on plain tensors that drives :class:`Engine` and
the algorithms directly (no data set, no model zoo): node i minimises
f_i(x) = ½‖A_i x − b_i‖² with its own optimum x*_i = x̄* + h·u_i (Σ_i u_i = 0), so h
scales the heterogeneity. Used by test_heterogeneity.py and the sim/dist parity worker.
"""
from __future__ import annotations

import torch

from decent8.algorithms import make_algorithm
from decent8.compression import make_compressor
from decent8.layout import ParamLayout
from decent8.optim import LocalMomentum
from decent8.train.engine import Engine


class Quadratic:
    """The duck-typed part of StackedModel that Engine.train_step and state_dict use:
    full local gradients of f_i for the k local nodes ``rows`` (batches are ignored)."""

    buffers = None

    def __init__(self, A: torch.Tensor, b: torch.Tensor, rows: list[int]) -> None:
        self.A, self.b = A[rows], b[rows]
        self.device = torch.device("cpu")

    def loss_and_grad(self, x, xb=None, yb=None, step=0):
        r = torch.einsum("kmd,kd->km", self.A, x) - self.b
        return 0.5 * (r**2).sum(1), torch.einsum("kmd,km->kd", self.A, r)

    def buffers_state(self):
        return None

    def load_buffers_state(self, state) -> None:
        pass


def problem(h: float, n: int = 8, m: int = 40, d: int = 5, seed: int = 0):
    """``(A [n, m, d], b [n, m], x_opt [d])``; x_opt minimises Σ_i f_i (solved in float64)."""
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(n, m, d, generator=g) / m**0.5
    u = torch.randn(n, d, generator=g)
    u -= u.mean(0)
    x_local = 0.05 * torch.randn(d, generator=g) + h * u
    b = torch.einsum("kmd,kd->km", A, x_local)
    H = torch.einsum("kmd,kme->de", A.double(), A.double())
    x_opt = torch.linalg.solve(H, torch.einsum("kmd,km->d", A.double(), b.double())).float()
    return A, b, x_opt


def make_engine(name: str, comm, A, b, gamma: float = 1.0, compression: str = "identity", ratio: float = 0.5,
                push_sum: bool = False, momentum: float = 0.0, kind: str = "local", **options) -> Engine:
    from decent8.optim import make_optimizer
    from decent8.seeding import node_generators
    d = A.shape[2]
    comp = make_compressor(compression, ParamLayout([("w", (d,))]), ratio=ratio)
    algo = make_algorithm(name, comm, comp, gamma, push_sum, node_generators(0, "compress", comm.local_nodes), **options)
    opt = LocalMomentum(momentum, False, 0.0) if kind == "local" else make_optimizer(kind, momentum, True, 0.0)
    return Engine(Quadratic(A, b, comm.local_nodes), algo, opt, comm, torch.zeros(d))
