"""Layer-wise top-k sparsification (SPEC §4), optionally with 8-bit values.

Per slot l (parameter tensor) keep ``k_l = max(1, floor(numel_l · (1 − ratio)))``
entries of largest magnitude (ratio 0.99 keeps 1 %). The payload per node is

* ``values``  — the kept signed values, float32 ``[K]`` with ``K = Σ_l k_l``; or with
  ``value_bits=8`` uint8 ``[K]`` plus ``scale`` and ``zero`` float32 ``[L]``: per-slot
  asymmetric min/max quantization of the kept values
  (``scale = max((max − min)/255, 1e-8)``, ``q = round((v − min)/scale)``);
* ``indices`` — the local index of each kept value inside its slot, int16 or int32.
  ``index_dtype="auto"`` picks int16 when every slot has ≤ 65536 elements (stored as
  ``idx − 32768``, decoded by adding 32768 back), else int32.

Bytes per node: ``4·K + i·K`` (fp32 values) or ``K + i·K + 8·L`` (8-bit values),
with ``i`` = 2 (int16) or 4 (int32).

The slot-structure (``k_l``, index encoding, scatter decode) is shared with random-k
through :class:`SparseCompressor`.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Sequence

import torch

from ..errors import ConfigError, choice_error
from ..layout import ParamLayout
from ..registry import compressors
from ..state_spec import StateSpec
from . import topk_kernel
from .base import Compressor, TensorSpec
from .payload import Payload
from .quantize import uint8_dequantize, uint8_quantize, uint8_scale

INDEX_DTYPES = ("auto", "int16", "int32")
#: Largest slot whose local indices fit in int16 (stored with an offset of -32768).
INT16_MAX_SLOT = 65536
_INT16_SHIFT = 32768


def check_ratio(ratio: float) -> float:
    """Validate a compression ratio: the dropped fraction, in ``[0, 1)``."""
    try:
        r = float(ratio)
    except (TypeError, ValueError):
        raise ConfigError("compression.ratio", f"must be a number in [0, 1), got {ratio!r}") from None
    if isinstance(ratio, bool) or not (0.0 <= r < 1.0):  # also rejects NaN
        raise ConfigError("compression.ratio", f"must be in [0, 1) (fraction dropped, e.g. 0.99), got {ratio!r}")
    return r


def keep_count(numel: int, ratio: float) -> int:
    """``max(1, floor(numel · (1 − ratio)))`` (0 for an empty tensor).

    The ratio is read as the decimal it was written as (0.9 is 9/10), so
    ``floor(1000 · (1 − 0.9))`` is 100, not 99 from binary rounding.
    """
    if numel <= 0:
        return 0
    keep = math.floor(numel * (1 - Fraction(repr(float(ratio)))))
    return min(numel, max(1, keep))


def resolve_index_dtype(layout: ParamLayout, index_dtype: str) -> torch.dtype:
    """``"auto"`` → int16 when every slot has ≤ 65536 elements, else int32."""
    if index_dtype not in INDEX_DTYPES:
        raise choice_error("compression.index_dtype", index_dtype, INDEX_DTYPES)
    biggest = max(layout.numels)
    if index_dtype == "int32":
        return torch.int32
    if index_dtype == "int16":
        if biggest > INT16_MAX_SLOT:
            raise ConfigError(
                "compression.index_dtype",
                f"int16 indices address at most {INT16_MAX_SLOT} elements per tensor, but the "
                f"largest tensor has {biggest}; use 'int32' or 'auto'",
            )
        return torch.int16
    return torch.int16 if biggest <= INT16_MAX_SLOT else torch.int32


#: the smallest slot the C loop selects from (below it ``torch.topk`` is as fast)
C_LOOP_MIN = 512
#: entries per group of the CPU selection's first stage (:func:`top_indices`)
SELECT_GROUP = 8


def _top_c(score: torch.Tensor, c: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The positions of the c largest entries of each row of ``score[.., n]`` (c < n), and
    which rows have a tied boundary (their (c+1)-th largest equals their c-th, so the c
    are not the only choice). One ``torch.topk`` of c + 1 entries; the smallest is dropped
    (its slot takes the last one)."""
    vals, idx = torch.topk(score, c + 1, dim=-1, sorted=False)
    low, drop = torch.min(vals, dim=-1, keepdim=True)
    tied = (vals == low).sum(dim=-1) > 1
    return idx.scatter_(-1, drop, idx[..., c:].clone())[..., :c], tied


def top_indices(s: torch.Tensor, c: int, magnitude: bool = False) -> torch.Tensor:
    """``torch.topk(s, c, dim=2, sorted=False).indices`` as a set, for scores ``s[k, G, n]``
    (with ``magnitude``: for the scores ``|s|``): the positions of each row's c largest
    entries, in no particular order. Scores are finite.

    **Ties.** Where a row's c-th and (c+1)-th largest scores are equal, several sets are
    "the c largest"; the one returned is always the one ``torch.topk`` returns for that row
    (torch's choice, which depends on the row's values, n and c — not on the other rows,
    the batch shape or a strided view — and may differ between torch versions and devices;
    on this CPU, for an all-zero row, the first c positions when n ≥ 64·c).

    On the CPU, with magnitude scores and slots of at least :data:`C_LOOP_MIN` entries, one C
    loop selects (:mod:`decent8.compression.topk_kernel`: a sampled threshold, one pass that
    collects the entries above it, an exact selection among them; about twice a read of the
    row) and flags the tied rows, which ``torch.topk`` then selects again. Without a C
    compiler, where ``torch.topk`` costs ~5–10 ns per entry, rows with n ≥ 32·c and n ≥
    4096 (e.g. 99 % top-k of a large layer) select in two stages: split the row into n/B
    strided groups of B = :data:`SELECT_GROUP` entries (group g: positions g, g + n/B, …),
    keep the c + 1 groups with the largest maxima and take the top c of their (c + 1)·B
    entries. Exact: an entry e among the row's c largest is ≥ the c-th largest group maximum
    M_c (c groups hold an entry ≥ M_c); if the (c+1)-th largest maximum is below M_c, every
    group outside the c largest has its maximum < M_c ≤ e, so e's group is kept, and the
    candidates hold every entry ≥ the row's c-th largest. Each stage's ``torch.topk`` takes
    c + 1 entries, so a tie — between the c-th and (c+1)-th group maxima, or at the
    candidates' boundary (then also the row's) — is seen, and those rows are selected again
    by ``torch.topk`` on the whole row (integer-valued or all-zero rows; never for distinct
    scores). With ``magnitude`` a group's largest |s| is max(max s, −min s), so |s| is
    never formed for the whole row. Timings: docs/results/gossip_speed.md, "Top-k selection and the
    8-bit operator count".
    """
    k, g, n = s.shape
    b = SELECT_GROUP
    if magnitude and 0 < c < n and n >= C_LOOP_MIN and topk_kernel.wanted(s):
        out, tied = topk_kernel.top_magnitude(s, c)
        if bool(tied.any()):
            rk, rg = tied.nonzero(as_tuple=True)
            out[rk, rg] = torch.topk(s[rk, rg].abs(), c, dim=1, sorted=False).indices
        return out
    if s.device.type != "cpu" or n % b or n < 32 * c or n < 4096:
        return torch.topk(s.abs() if magnitude else s, c, dim=2, sorted=False).indices
    m = n // b
    rows = s.reshape(k, g, b, m)
    if magnitude:
        gmax = torch.maximum(rows.amax(dim=2), rows.amin(dim=2).neg_())          # [k, G, m]
    else:
        gmax = rows.amax(dim=2)
    vals, groups = torch.topk(gmax, c + 1, dim=2, sorted=False)                 # [k, G, c + 1]
    tied = (vals == vals.amin(dim=2, keepdim=True)).sum(dim=2) > 1               # c-th group maximum = (c+1)-th
    pos = (groups.unsqueeze(-1) + torch.arange(0, n, m, device=s.device)).reshape(k, g, (c + 1) * b)
    cand = s.gather(2, pos)
    if magnitude:
        cand.abs_()
    sel, cand_tied = _top_c(cand, c)
    out = pos.gather(2, sel)
    tied |= cand_tied
    if bool(tied.any()):
        rk, rg = tied.nonzero(as_tuple=True)
        rows_tied = s[rk, rg]
        out[rk, rg] = torch.topk(rows_tied.abs() if magnitude else rows_tied, c, dim=1, sorted=False).indices
    return out


class SparseCompressor(Compressor):
    """Common part of top-k and random-k: per-slot keep counts, index encoding, decode.

    Subclasses implement :meth:`_scores` (each slot keeps its ``k_l`` highest-scoring entries)
    or set :attr:`by_magnitude` (the scores are |x|).
    """

    def __init__(self, layout: ParamLayout, ratio: float = 0.99, index_dtype: str = "auto") -> None:
        super().__init__(layout)
        self.ratio = check_ratio(ratio)
        self.keep: list[int] = [keep_count(n, self.ratio) for n in layout.numels]
        self.num_kept: int = sum(self.keep)
        starts = [0]
        for c in self.keep:
            starts.append(starts[-1] + c)
        #: Position in the ``[K]`` payload where each slot's kept entries start.
        self.kept_starts: list[int] = starts[:-1]
        self.index_dtype: torch.dtype = resolve_index_dtype(layout, index_dtype)
        #: ``(n, k_n, slots)`` per distinct slot size: the unit of the batched selection.
        self.size_groups: list[tuple[int, int, list[int]]] = self._size_groups()

    # -- constant index tensors (cached per device) ---------------------------------

    def _kept_segments(self, device: torch.device) -> torch.Tensor:
        """``[K]`` int64: the slot of each kept entry."""
        return self._device_cached(
            "kept_segments",
            device,
            lambda dev: torch.repeat_interleave(
                torch.arange(len(self.layout), device=dev), torch.tensor(self.keep, device=dev)
            ),
        )

    def _kept_offsets(self, device: torch.device) -> torch.Tensor:
        """``[K]`` int64: the slot offset of each kept entry (local → global index)."""
        return self._device_cached(
            "kept_offsets",
            device,
            lambda dev: torch.tensor(self.layout.offsets, device=dev)[self._kept_segments(dev)],
        )

    # -- selection ----------------------------------------------------------------------
    #
    # Slots of equal size have equal keep counts, so the selection runs once per distinct
    # slot size on a [k, G, n] view of the G slots of that size (a strided view when their
    # offsets are evenly spaced, else one gather) — a handful of batched top-k calls
    # instead of one per layer. The payload order is unchanged: slot l's entries sit at
    # positions kept_starts[l] … kept_starts[l] + k_l − 1.

    #: True: the score of an entry is its magnitude |x| (top-k; :meth:`_scores` unused)
    by_magnitude = False

    def _scores(self, x: torch.Tensor, keys: torch.Tensor | None) -> torch.Tensor:
        """``[k, d]``: each slot keeps the ``k_l`` entries of largest score."""
        raise NotImplementedError

    def _size_groups(self) -> list[tuple[int, int, list[int]]]:
        """``(n, k_n, slots)`` for every distinct slot size n with something to keep."""
        groups: dict[int, list[int]] = {}
        for li, (n, c) in enumerate(zip(self.layout.numels, self.keep)):
            if c > 0:
                groups.setdefault(n, []).append(li)
        return [(n, self.keep[slots[0]], slots) for n, slots in groups.items()]

    def _group_view(self, t: torch.Tensor, n: int, slots: list[int]) -> torch.Tensor:
        """``[k, G, n]``: the G slots' columns of ``t[k, d]`` (a view when evenly spaced)."""
        offsets = [self.layout.slots[li].offset for li in slots]
        step = offsets[1] - offsets[0] if len(offsets) > 1 else n
        if t.stride(1) == 1 and step >= n and all(b - a == step for a, b in zip(offsets, offsets[1:])):
            return t.as_strided((t.shape[0], len(slots), n), (t.stride(0), step, 1), t.storage_offset() + offsets[0])
        cols = self._device_cached(
            f"group_cols_{n}", t.device,
            lambda dev: (torch.tensor(offsets, device=dev).unsqueeze(1) + torch.arange(n, device=dev)).reshape(-1))
        return t.index_select(1, cols).view(t.shape[0], len(slots), n)

    def _group_positions(self, n: int, c: int, slots: list[int], device: torch.device) -> torch.Tensor | slice:
        """Where the group's ``[G, c]`` kept entries go in the ``[K]`` payload."""
        starts = [self.kept_starts[li] for li in slots]
        if all(b - a == c for a, b in zip(starts, starts[1:])):
            return slice(starts[0], starts[0] + c * len(slots))
        return self._device_cached(
            f"group_pos_{n}", device,
            lambda dev: (torch.tensor(starts, device=dev).unsqueeze(1) + torch.arange(c, device=dev)).reshape(-1))

    def _gather(self, x: torch.Tensor, keys: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Kept values (float32 ``[k, K]``) and local indices (int64 ``[k, K]``)."""
        k = x.shape[0]
        dev = x.device
        values = torch.empty(k, self.num_kept, dtype=torch.float32, device=dev)
        local = torch.empty(k, self.num_kept, dtype=torch.int64, device=dev)
        scores = None
        for n, c, slots in self.size_groups:
            xs = self._group_view(x, n, slots)
            if c == n:  # nothing dropped
                idx = torch.arange(n, device=dev).expand(k, len(slots), n)
            elif self.by_magnitude:  # top-k: scores |x|, formed per group (never a [k, d] |x|)
                idx = top_indices(xs, c, magnitude=True)
            else:
                if scores is None:
                    scores = self._scores(x, keys)
                idx = top_indices(self._group_view(scores, n, slots), c)
            pos = self._group_positions(n, c, slots, dev)
            local[:, pos] = idx.reshape(k, -1)
            values[:, pos] = xs.gather(2, idx).reshape(k, -1)
        return values, local

    def check_received(self, payload: Payload) -> str | None:
        """Also: every index lies inside its slot (``0 <= local < numel``), so a malformed
        message cannot scatter out of range."""
        why = super().check_received(payload)
        if why is not None:
            return why
        indices = payload.tensors["indices"]
        local = indices.to(torch.int64)
        if indices.dtype == torch.int16:
            local += _INT16_SHIFT
        numels = self._device_cached(
            "kept_numels", indices.device,
            lambda dev: torch.tensor(self.layout.numels, device=dev)[self._kept_segments(dev)])
        bad = (local < 0) | (local >= numels)
        if bool(bad.any()):
            row, pos = (int(v) for v in bad.nonzero()[0])
            return f"index {int(local[row, pos])} at position {pos} is outside its tensor"
        return None

    def _encode_indices(self, local: torch.Tensor) -> torch.Tensor:
        if self.index_dtype == torch.int16:
            return (local - _INT16_SHIFT).to(torch.int16)
        return local.to(torch.int32)

    def _global_indices(self, indices: torch.Tensor) -> torch.Tensor:
        idx = indices.to(torch.int64)
        if indices.dtype == torch.int16:
            idx += _INT16_SHIFT
        return idx + self._kept_offsets(indices.device)

    def _sparse(self, values: torch.Tensor, indices: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self._global_indices(indices), values.to(torch.float32)

    def _scatter(self, values: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
        """Dense float32 ``[m, d]`` with ``values`` at the kept positions, zeros elsewhere."""
        m = indices.shape[0]
        out = torch.zeros(m, self.layout.dim, dtype=torch.float32, device=indices.device)
        return out.scatter_(1, self._global_indices(indices), values.to(torch.float32))


@compressors.register("topk_int8", order=2, fixed={"value_bits": 8})
@compressors.register("topk", order=1)
class TopKCompressor(SparseCompressor):
    """Layer-wise top-k by magnitude, fp32 or 8-bit values (``value_bits`` 32 or 8)."""

    #: one encode: the selection's group maxima and candidates (about half a float32 per entry)
    state = StateSpec(step=2)

    @classmethod
    def suggest_gamma(cls, scale: float, ratio: float) -> float | None:
        """δ = 1 − ratio (the kept fraction bounds the top-k contraction); a biased
        sparsifier gossips at γ = scale·δ (the algorithm's scale), in [10⁻³, 1]."""
        return min(1.0, max(scale * (1.0 - ratio), 1e-3))

    def __init__(
        self, layout: ParamLayout, ratio: float = 0.99, value_bits: int = 32, index_dtype: str = "auto"
    ) -> None:
        super().__init__(layout, ratio, index_dtype)
        if isinstance(value_bits, bool) or value_bits not in (8, 32):
            raise ConfigError("compression.value_bits", f"must be 8 or 32, got {value_bits!r}")
        self.value_bits = int(value_bits)
        self.name = "topk_int8" if self.value_bits == 8 else "topk"

    def spec(self) -> dict[str, TensorSpec]:
        K, L = self.num_kept, len(self.layout)
        if self.value_bits == 32:
            return {"values": ((K,), torch.float32), "indices": ((K,), self.index_dtype)}
        return {
            "values": ((K,), torch.uint8),
            "indices": ((K,), self.index_dtype),
            "scale": ((L,), torch.float32),
            "zero": ((L,), torch.float32),
        }

    by_magnitude = True   # scores |x|, formed group by group in top_indices (no _scores)

    def encode(self, x: torch.Tensor, generators: Sequence[torch.Generator] | None = None) -> Payload:
        self._check_input(x)
        values, local = self._gather(x)
        indices = self._encode_indices(local)
        if self.value_bits == 32:
            return Payload({"values": values, "indices": indices})
        k, dev, L = x.shape[0], x.device, len(self.layout)
        seg = self._kept_segments(dev)
        idx = seg.expand(k, self.num_kept)
        # Slots with no kept entries (empty tensors) keep min = max = 0.
        mn = torch.zeros(k, L, device=dev).scatter_reduce_(1, idx, values, "amin", include_self=False)
        mx = torch.zeros(k, L, device=dev).scatter_reduce_(1, idx, values, "amax", include_self=False)
        scale = uint8_scale(mn, mx)
        q = uint8_quantize(values, seg, mn, scale)
        return Payload({"values": q, "indices": indices, "scale": scale, "zero": mn})

    def decode(self, payload: Payload) -> torch.Tensor:
        t = payload.tensors
        values = t["values"]
        if self.value_bits == 8:
            values = uint8_dequantize(values, self._kept_segments(values.device), t["zero"], t["scale"])
        return self._scatter(values, t["indices"])

    def decode_sparse(self, payload: Payload) -> tuple[torch.Tensor, torch.Tensor]:
        t = payload.tensors
        values = t["values"]
        if self.value_bits == 8:
            values = uint8_dequantize(values, self._kept_segments(values.device), t["zero"], t["scale"])
        return self._sparse(values, t["indices"])

    def __repr__(self) -> str:
        return (
            f"TopKCompressor(ratio={self.ratio}, value_bits={self.value_bits}, "
            f"index_dtype={str(self.index_dtype).replace('torch.', '')}, K={self.num_kept})"
        )
