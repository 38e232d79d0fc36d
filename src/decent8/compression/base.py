"""Compressor interface (SPEC §4).

A compressor maps a flat ``[k, d]`` tensor (k nodes' messages) to a :class:`Payload`
and back. ``decode(encode(x))`` is the value the receivers see; compressors that keep
only part of the message (top-k, sign) rely on the algorithm's error feedback or
public copies for the rest.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar, Sequence

import torch

from ..layout import ParamLayout
from ..state_spec import NONE, StateSpec
from .payload import Payload

TensorSpec = tuple[tuple[int, ...], torch.dtype]


class Compressor(ABC):
    """Encode/decode messages layer-wise over a :class:`ParamLayout`."""

    name: str = "abstract"
    #: True when encode needs per-node random generators (random-k, stochastic rounding).
    stochastic: bool = False
    #: ``[k, d]`` tensors kept per node (none for the built-in ones) and the temporaries of one
    #: encode + decode (:class:`~decent8.state_spec.StateSpec`, read by the memory model)
    state: ClassVar[StateSpec] = NONE
    #: True when ``decode(encode(x)) == x`` (the identity): algorithms keep no public copies for it
    lossless: ClassVar[bool] = False

    @classmethod
    def suggest_gamma(cls, scale: float, ratio: float) -> float | None:
        """The consensus step γ this compressor suggests when ``algorithm.gamma`` is null, from
        its contraction δ (E‖C(x) − x‖² ≤ (1 − δ)‖x‖², Koloskova et al. 2019; SPEC §3): ``scale``
        is the algorithm's factor for a biased sparsifier, ``ratio`` the fraction dropped. None:
        no declared contraction (the run must set ``algorithm.gamma``)."""
        return None

    @classmethod
    def sparse_messages(cls) -> bool:
        """True when the class decodes to K entries per row (:meth:`decode_sparse` defined)."""
        return cls.decode_sparse is not Compressor.decode_sparse

    def __init__(self, layout: ParamLayout) -> None:
        self.layout = layout

    @abstractmethod
    def encode(self, x: torch.Tensor, generators: Sequence[torch.Generator] | None = None) -> Payload:
        """Compress ``x`` of shape ``[k, d]``; ``generators[i]`` drives node i's randomness."""

    @abstractmethod
    def decode(self, payload: Payload) -> torch.Tensor:
        """Dense ``[m, d]`` float32 reconstruction of m messages."""

    def decode_sparse(self, payload: Payload) -> tuple[torch.Tensor, torch.Tensor] | None:
        """``(columns int64 [m, K], values float32 [m, K])`` with ``decode(payload)[r, columns[r]]
        = values[r]`` and zeros elsewhere (columns distinct within a row), for compressors
        whose message is sparse; None for dense ones. Lets a caller update ``[k, d]`` state
        at the K received positions instead of decoding and passing over all d."""
        return None

    @abstractmethod
    def spec(self) -> dict[str, TensorSpec]:
        """Per-node shape and dtype of every payload tensor (what a receiver allocates)."""

    def check_received(self, payload: Payload) -> str | None:
        """Why a payload that arrived from another process cannot be decoded (None if it
        can): every tensor must have the spec's dtype and per-node shape. Compressors with
        index tensors also check their range (:class:`~decent8.compression.topk.SparseCompressor`)."""
        spec = self.spec()
        if sorted(payload.tensors) != sorted(spec):
            return f"tensors {sorted(payload.tensors)}, expected {sorted(spec)}"
        for name, (shape, dtype) in spec.items():
            t = payload.tensors[name]
            if tuple(t.shape[1:]) != tuple(shape) or t.dtype != dtype:
                return f"{name} is {tuple(t.shape[1:])} {t.dtype}, expected {tuple(shape)} {dtype}"
        return None

    def nbytes(self) -> int:
        """Bytes of one node's message, from the declared dtypes."""
        total = 0
        for shape, dtype in self.spec().values():
            n = 1
            for s in shape:
                n *= s
            total += n * torch.empty((), dtype=dtype).element_size()
        return total

    def roundtrip(self, x: torch.Tensor, generators: Sequence[torch.Generator] | None = None) -> torch.Tensor:
        return self.decode(self.encode(x, generators))

    @property
    def is_identity(self) -> bool:
        return False

    # -- small helpers shared by the concrete compressors ---------------------------

    def _check_input(self, x: torch.Tensor) -> None:
        """Raise ValueError unless ``x`` is a ``[k, d]`` floating tensor for this layout."""
        if x.dim() != 2 or x.shape[1] != self.layout.dim:
            raise ValueError(
                f"{self.name}: expected a [k, {self.layout.dim}] tensor, got shape {tuple(x.shape)}"
            )
        if not x.is_floating_point():
            raise ValueError(f"{self.name}: expected a floating tensor, got {x.dtype}")

    def _device_cached(self, key: str, device: torch.device, build) -> torch.Tensor:
        """A per-device cache for constant index tensors (segment ids, offsets, ...)."""
        cache = self.__dict__.setdefault("_tensor_cache", {})
        k = (key, str(device))
        if k not in cache:
            cache[k] = build(device)
        return cache[k]

    def _segment_ids(self, device: torch.device) -> torch.Tensor:
        """Cached ``layout.segment_ids(device)``: ``[d]`` int64 slot index per coordinate."""
        return self._device_cached("segment_ids", device, self.layout.segment_ids)

    def _numels(self, device: torch.device) -> torch.Tensor:
        """Cached ``[L]`` float32 tensor of slot sizes."""
        return self._device_cached(
            "numels", device, lambda dev: torch.tensor(self.layout.numels, dtype=torch.float32, device=dev)
        )


def require_generators(
    name: str, generators: Sequence[torch.Generator] | None, k: int
) -> Sequence[torch.Generator]:
    """Check that a stochastic compressor got one generator per local node."""
    if generators is None:
        raise ValueError(f"{name} is stochastic: encode() needs one torch.Generator per node")
    if len(generators) != k:
        raise ValueError(f"{name}: got {len(generators)} generators for {k} nodes")
    return generators


def per_node_uniform(
    generators: Sequence[torch.Generator], n: int, device: torch.device
) -> torch.Tensor:
    """``[k, n]`` float32 U[0, 1) draws, row i from ``generators[i]`` (on the generator's
    device, then moved to ``device``). The only per-node loop: drawing the numbers."""
    rows = [torch.rand(n, generator=g, device=g.device) for g in generators]
    return torch.stack(rows).to(device)
