"""Choco-SGD (Koloskova et al. 2019/2020), SPEC §3: compressed updates of public copies.

    q = C(x½ − x̂_i);  x̂_i ← x̂_i + q;  send q;
    s_i ← s_i + Σ_j W_ij q_j        (s_i = Σ_j W_ij x̂_j)
    x ← x½ + γ (s_i − x̂_i)

x̂ and s start at 0. With ``push_sum=True`` this is the Quant-SGP-style Choco + push-sum
(Taheri et al. 2020). Extra memory: two model-sized buffers per node.

Numerics. Only the difference s_i − x̂_i enters the update, so the second
buffer holds the *consensus residual* u_i = s_i − x̂_i directly, in float64, and the
neighbour sum of each round is formed in float64 (``exchange(..., dtype=float64)``):

    u_i ← u_i + (Σ_j W_ij q_j − q_i)      (= Σ_j (W_ij − δ_ij) q_j),      x ← x½ + γ u_i

The same algorithm in exact arithmetic. In float32 it is not: every rounding error
that enters the running sum (s, or u) stays there and is re-applied to x every round
through γ·u, so x drifts linearly in time. For column-stochastic W the exact
Σ_i u_i = Σ_j (Σ_i W_ij − 1) x̂_j = 0 keeps the node sum of x (and under push-sum of
the numerators z) fixed; with a float32 running sum s it drifted (mean_i(s_i − x̂_i)
6.7e-5 after 20k steps in the convex check of tests/train/test_long_horizon.py, linear de-biased error under
push-sum), and with a float32 u the rounding of the first, model-sized messages
(q = x − 0 in round 1) still persists. In float64 these errors are ~2⁻⁵³ and the
drift is gone (tests/train/test_long_horizon.py). x̂_i stays float32: it only decides what
is compressed next, so its rounding acts like compression error, which Choco's next
message corrects, and does not enter Σ_i u_i.

Wire: unchanged (payloads as before; the float64 sum is formed after decoding).

Byzantine nodes (``byzantine.*``): a robust rule needs each neighbour's public copy, not
their sum, so the receivers keep one copy per in-edge and mix them through the rule
(:mod:`decent8.byzantine.copies`): x ← x½ + γ (AGG(x̂_i; {x̂_j}) − x̂_i); the residual
pair is not used then.

Exact and fast. The residual is stored as a float32 pair u ≈ hi + lo
(algorithms/compensated.py: the same value to 2⁻⁴⁸, 8 bytes per entry like float64) and
the update reads hi: z ← x½ + γ·hi is a float32 pass. The increment Σ_j W_ij q_j − q_i
comes from the communicator in float64 (``exchange_increment``): dense, or — for sparse
messages (top-k, random-k: ``compressor.decode_sparse``) — as the K received entries per
edge, so x̂ and u are updated at those positions only (scatter) instead of decoding q
densely and multiplying by a float64 W. Both backends run this code (the distributed
rank takes the dense form). Memory: x̂ (4 B) + u (8 B) = 12 B per parameter.
"""
from __future__ import annotations

import torch

from ..errors import ConfigError
from ..state_spec import F32, StateSpec
from . import compensated
from .base import GossipAlgorithm
from ..registry import algorithms
from .info import AlgorithmInfo, replace
from ..byzantine.copies import PublicCopies


#: x̂ and s = Σ_j W_ij x̂_j are the paper's buffers (decent8 keeps u = s − x̂ as a float32 pair: 3);
#: robust rules mix the per-edge public copies (decent8.byzantine.copies)
INFO = AlgorithmInfo(display_name="Choco", state_buffers=2, robust_mixing=True)


@algorithms.register("choco", order=2, info=INFO)
class ChocoSGD(GossipAlgorithm):
    name = "choco"
    #: x̂, the residual pair (hi, lo) and the x½ − x̂ workspace: 16 B per parameter; with a robust
    #: rule (byzantine.*) one public copy per in-edge, 4 B per slot and parameter
    state = StateSpec({"x_hat": F32, "res_hi": F32, "res_lo": F32}, {"_diff": F32}, edge={"edge_copies": F32})
    _copies = None

    @classmethod
    def state_spec(cls, compressor=None) -> StateSpec:
        """A dense message is decoded (q, 4 B) and its increment formed in float64 (8 B)."""
        dense = compressor is not None and not compressor.sparse_messages()
        return StateSpec(cls.state.state, cls.state.workspace, step=12 if dense else 0, edge=cls.state.edge)

    def __init__(self, comm, *args, **kwargs) -> None:
        super().__init__(comm, *args, **kwargs)
        # s_i is the running sum Σ_t W_ij q_j^t, equal to Σ_j W_ij x̂_j only if W never changes
        if getattr(comm.topology, "time_varying", False):
            raise ConfigError("topology", f"choco keeps Σ_j W_ij x̂_j as a running sum, right only for a static W, but "
                                          f"{comm.topology.name!r} changes every round; use algorithm=dpsgd or "
                                          f"deepsqueeze, or a static topology")

    def init_state(self, x: torch.Tensor) -> None:
        super().init_state(x)
        self.x_hat = torch.zeros_like(x)
        #: u = s − x̂ = Σ_j W_ij x̂_j − x̂_i as a float32 pair u ≈ hi + lo (see the module docstring)
        self.res_hi = torch.zeros_like(x, dtype=torch.float32)
        self.res_lo = torch.zeros_like(x, dtype=torch.float32)
        self._diff = torch.empty_like(x)   # workspace for x½ − x̂ (no [k, d] allocation per step)
        self._copies = None                # the per-edge public copies of a Byzantine run (decent8.byzantine.copies)

    def buffers(self) -> dict[str, torch.Tensor]:
        out = {**super().buffers(), "x_hat": self.x_hat, "res_hi": self.res_hi, "res_lo": self.res_lo}
        if self._copies is not None and self._copies.copies is not None:
            out["edge_copies"] = self._copies.copies
        return out

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        super().load_state_dict(state)
        if self.robust is not None and "edge_copies" in state:
            self._public_copies().copies = state["edge_copies"].clone()
        if "res_hi" not in state and "residual" in state:         # older checkpoints: u in float64
            compensated.split_(self.res_hi, self.res_lo, state["residual"])
        elif "res_hi" not in state and "neighbour_sum" in state:  # the oldest checkpoints kept s
            compensated.split_(self.res_hi, self.res_lo, state["neighbour_sum"].double() - self.x_hat.double())

    @property
    def residual(self) -> torch.Tensor:
        """u_i = s_i − x̂_i (float64, computed from the pair)."""
        return compensated.value(self.res_hi, self.res_lo)

    @property
    def neighbour_sum(self) -> torch.Tensor:
        """s_i = Σ_j W_ij x̂_j (= u_i + x̂_i, float64; computed, not stored)."""
        return self.residual + self.x_hat

    def _public_copies(self):
        if self._copies is None:
            self._copies = PublicCopies(self.robust, self.compressor, getattr(self.robust.attack, "seed", 0))
        return self._copies

    def _robust_gossip(self, z: torch.Tensor, step: int) -> None:
        """x ← x½ + γ (AGG(x̂_i; {x̂_j}) − x̂_i) over the per-edge public copies (module docstring)."""
        payload = self._encode(torch.sub(z, self.x_hat, out=self._diff))
        q = self.compressor.decode(payload)
        self.x_hat += q
        msgs = self.comm.exchange_messages(payload, self.compressor, step, decoded=q)
        mixed = self._public_copies().mix(self.x_hat, msgs, step)
        z.add_(mixed - self.x_hat, alpha=self.gamma)

    def _gossip(self, z: torch.Tensor, step: int) -> None:
        if self.robust is not None:
            return self._robust_gossip(z, step)
        payload = self._encode(torch.sub(z, self.x_hat, out=self._diff))
        sparse = self.compressor.decode_sparse(payload)
        if sparse is None:
            q = self.compressor.decode(payload)
            self.x_hat += q
            inc = self.comm.exchange_increment(payload, self.compressor, step, decoded=q)
        else:
            cols, vals = sparse
            self.x_hat.scatter_add_(1, cols, vals)                 # x̂ ← x̂ + q at the K positions
            inc = self.comm.exchange_increment(payload, self.compressor, step, sparse=sparse)
        compensated.accumulate(self.res_hi, self.res_lo, inc)     # u ← u + Σ_j W_ij q_j − q_i
        z.add_(self.res_hi, alpha=self.gamma)                     # x ← x½ + γ u


@algorithms.register("choco_push", order=5, info=replace(INFO, display_name="Choco-push", forced_push_sum=True,
                                                                     robust_mixing=False))
class ChocoPush(ChocoSGD):
    """Choco-SGD under push-sum."""

    name = "choco_push"
