"""Layer-wise random-k sparsification (SPEC §4).

Per slot l keep ``k_l = max(1, floor(numel_l · (1 − ratio)))`` coordinates chosen
uniformly at random without replacement, independently per node, from
``generators[i]`` for node i. Payload as fp32 top-k: ``values`` float32 ``[K]`` and
``indices`` int16/int32 ``[K]`` (local index in the slot) → ``4·K + i·K`` bytes.

The values are sent unscaled (biased operator, as used by Choco-SGD and
Deep-Squeeze); the unbiased variant would multiply them by ``numel_l / k_l``.
"""
from __future__ import annotations

from typing import Sequence

import torch

from ..layout import ParamLayout
from .base import TensorSpec, per_node_uniform, require_generators
from ..state_spec import StateSpec
from .payload import Payload
from .topk import SparseCompressor
from ..registry import compressors


@compressors.register("randomk", order=3)
class RandomKCompressor(SparseCompressor):
    #: one encode: the float32 random scores of every entry
    state = StateSpec(step=4)
    """Random-k (biased, unscaled values); ``encode`` needs one generator per node."""

    name = "randomk"

    @classmethod
    def suggest_gamma(cls, scale: float, ratio: float) -> float | None:
        """δ = 1 − ratio (the kept fraction, unbiased draws): γ = δ, at least 10⁻³."""
        return max(1.0 - ratio, 1e-3)
    stochastic = True

    def __init__(self, layout: ParamLayout, ratio: float = 0.99, index_dtype: str = "auto") -> None:
        super().__init__(layout, ratio, index_dtype)

    def spec(self) -> dict[str, TensorSpec]:
        K = self.num_kept
        return {"values": ((K,), torch.float32), "indices": ((K,), self.index_dtype)}

    def _scores(self, x: torch.Tensor, keys: torch.Tensor | None) -> torch.Tensor:
        # The k_l largest of i.i.d. uniform keys: a uniform subset without replacement.
        assert keys is not None
        return keys

    def encode(self, x: torch.Tensor, generators: Sequence[torch.Generator] | None = None) -> Payload:
        self._check_input(x)
        require_generators(self.name, generators, x.shape[0])
        # One [d] draw per node (the only per-node loop), then vectorised selection.
        keys = per_node_uniform(generators, self.layout.dim, x.device)
        values, local = self._gather(x, keys)
        return Payload({"values": values, "indices": self._encode_indices(local)})

    def decode(self, payload: Payload) -> torch.Tensor:
        return self._scatter(payload.tensors["values"], payload.tensors["indices"])

    def decode_sparse(self, payload: Payload) -> tuple[torch.Tensor, torch.Tensor]:
        return self._sparse(payload.tensors["values"], payload.tensors["indices"])

    def __repr__(self) -> str:
        return (
            f"RandomKCompressor(ratio={self.ratio}, "
            f"index_dtype={str(self.index_dtype).replace('torch.', '')}, K={self.num_kept})"
        )
