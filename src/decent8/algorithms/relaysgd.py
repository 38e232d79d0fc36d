"""RelaySGD (Vogels et al. 2021) on the chain 0 – 1 – … – n−1 (the ring without its
edge n−1 – 0).

RelaySum on a spanning tree: every edge i → j carries a message relaying the models of
the whole subtree behind i, one hop per step, and a count of the models in it::

    m_{i→j}^t = x½_i^t + Σ_{k ∈ N(i)∖j} m_{k→i}^{t−1}       c_{i→j}^t = 1 + Σ_{k ∈ N(i)∖j} c_{k→i}^{t−1}
    x_i^{t+1} = (1/n) ( x½_i^t + Σ_{j ∈ N(i)} m_{j→i}^t + (n − 1 − Σ_{j ∈ N(i)} c_{j→i}^t) x½_i^t )

(missing, not-yet-arrived models are filled in with the node's own x½). After n − 1 steps
every node averages all n models, each delayed by its distance, so the heterogeneity
of the local objectives does not bias the fixed point: at a constant step size it is the
exact minimiser of the average objective.

Why a chain and not any tree: a tree node sends a *different* message to each neighbour
(m_{i→j} excludes what came from j), while :meth:`Communicator.exchange` sends one
payload to all out-neighbours and returns only the W-weighted sum. A chain fits the
existing :meth:`Communicator.permute_pass` (one chunk per node to one peer per call):
two matching passes per step — pass A over the edges (0,1), (2,3), …, pass B over
(1,2), (3,4), … — carry both directions of every edge, each node sending its right-going
message to its right partner and its left-going one to its left partner. General trees
would need a per-edge send (``exchange_per_edge(chunks[k, deg, d]) → [k, deg, d]``, a
batched isend/irecv in the distributed backend and a gather in the simulator); not built.
The counts are deterministic (c = min(distance, t + 1)), so only models travel.

Limits (one-line ConfigError): topology=ring (its chain); no compression, no push-sum,
γ = 1 (RelaySGD has no consensus step size). Precision: float32 ``[k, d]``; extra memory
two model-sized receive buffers per node; bytes per step: one dense message per chain
neighbour (2 for inner nodes, 1 for the two ends), as D-PSGD on the ring minus one edge.
"""
from __future__ import annotations

import torch

from ..errors import ConfigError
from ..state_spec import F32, StateSpec
from .base import GossipAlgorithm
from ..registry import algorithms
from .info import AlgorithmInfo


#: two relay buffers (the paper's); exact models only; QGM is not defined for it
INFO = AlgorithmInfo(state_buffers=2, supports_compression=False, allows_qgm=False)


@algorithms.register("relaysgd", order=10, info=INFO)
class RelaySGD(GossipAlgorithm):
    name = "relaysgd"
    #: the two relay buffers; one round holds both outgoing messages, both received ones and a choice
    state = StateSpec({"recv_right": F32, "recv_left": F32}, step=24)
    messages_per_step = 2

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if self.push_sum:
            raise ConfigError("algorithm.push_sum", "relaysgd averages exactly over a chain; push-sum is not defined for it")
        if self.comm.topology.name != "ring":
            raise ConfigError("topology", f"relaysgd runs on the chain of topology=ring, not {self.comm.topology.name!r} "
                                          "(general trees need per-edge messages; see relaysgd.py)")
        if self.gamma != 1.0:
            raise ConfigError("algorithm.gamma", f"relaysgd has no consensus step size; use algorithm.gamma=1, got {self.gamma:g}")
        n = self.comm.num_nodes
        self._dst_a = [i + 1 if i % 2 == 0 and i + 1 < n else (i - 1 if i % 2 == 1 else i) for i in range(n)]
        self._dst_b = [i + 1 if i % 2 == 1 and i + 1 < n else (i - 1 if i % 2 == 0 and i >= 2 else i) for i in range(n)]

    def init_state(self, x: torch.Tensor) -> None:
        super().init_state(x)
        self.recv_right = torch.zeros_like(x)    # from the left neighbour: models of nodes < i
        self.recv_left = torch.zeros_like(x)     # from the right neighbour: models of nodes > i
        idx = torch.tensor(self.comm.local_nodes, device=x.device).unsqueeze(1)
        self._idx, self._odd = idx, (idx % 2 == 1)

    def buffers(self) -> dict[str, torch.Tensor]:
        return {**super().buffers(), "recv_right": self.recv_right, "recv_left": self.recv_left}

    def _gossip(self, z: torch.Tensor, step: int) -> None:
        n, i, odd = self.comm.num_nodes, self._idx, self._odd
        to_right = z + self.recv_right           # m_{i→i+1}
        to_left = z + self.recv_left             # m_{i→i−1}
        got_a = self.comm.permute_pass(torch.where(odd, to_left, to_right), self._dst_a)
        got_b = self.comm.permute_pass(torch.where(odd, to_right, to_left), self._dst_b)
        has_left, has_right = (i >= 1).to(z.dtype), (i <= n - 2).to(z.dtype)
        torch.mul(torch.where(odd, got_a, got_b), has_left, out=self.recv_right)
        torch.mul(torch.where(odd, got_b, got_a), has_right, out=self.recv_left)
        c_right = has_left * torch.clamp(i, max=step + 1).to(z.dtype)
        c_left = has_right * torch.clamp(n - 1 - i, max=step + 1).to(z.dtype)
        z.mul_(n - c_right - c_left).add_(self.recv_right).add_(self.recv_left).div_(n)
