"""Batched, on-device augmentation and normalization of ``[k, b, C, H, W]`` batches.

The whole batch of all k local nodes is transformed with a handful of tensor ops (one
pad + one gather for crop + flip, one ``grid_sample`` for a random resized crop); only
the few random numbers per node are drawn in a loop over k. Node i's numbers at
iteration t come from a CPU generator seeded with ``derive_seed(seed, "augment", i, t)``,
so the simulator (k = n) and a distributed rank (k = 1) draw the same crops for node i,
on CPU or GPU alike, and a resumed run draws what the uninterrupted one would have.

Kinds (``ArrayDataset.augment``; ``data.augment=false`` turns them off):

* ``crop_flip`` — CIFAR-10: zero-pad H/8 px (4 at 32 px; 2 at ``data.image_size=16``), random
  HxW crop, horizontal flip with probability ½ (torchvision's RandomCrop(32, 4) +
  RandomHorizontalFlip at the native size).
* ``resized_crop_flip`` — Imagenette: torchvision's RandomResizedCrop(scale=(0.08, 1),
  ratio=(3/4, 4/3)) box rule (10 tries, then a center crop), resampled bilinearly to the
  stored size, + horizontal flip. (No antialiasing when the box is larger than the output.)
* ``none`` — normalization only.

Pixels (uint8) are normalized as (x/255 − mean)/std per channel with the train split's
statistics; data that is already float (digits) or token ids (text) passes unchanged.
"""
from __future__ import annotations

import math
from typing import Sequence

import torch
import torch.nn.functional as F

from ..seeding import derive_seed, node_generators
from .dataset import ArrayDataset
from ..errors import choice_error

AUGMENTS = ("none", "crop_flip", "resized_crop_flip")


class BatchTransform:
    """``transform(xb, step)`` for training batches ``[k, b, C, H, W]``; ``prepare_eval(x)`` for the test split."""

    def __init__(self, kind: str, mean: Sequence[float] | None, std: Sequence[float] | None, seed: int,
                 local_nodes: Sequence[int], device: torch.device | str = "cpu", pad: int = 4,
                 scale: tuple[float, float] = (0.08, 1.0), ratio: tuple[float, float] = (3 / 4, 4 / 3)) -> None:
        if kind not in AUGMENTS:
            raise choice_error("augment", kind, AUGMENTS)
        self.kind = kind
        self.seed = int(seed)
        self.local_nodes = list(local_nodes)
        self.device = torch.device(device)
        self.pad = int(pad)
        self.scale = scale
        self.ratio = ratio
        self.generators = node_generators(self.seed, "augment", self.local_nodes)
        if mean is not None and std is not None:
            m = torch.tensor(list(mean), dtype=torch.float32)
            s = torch.tensor(list(std), dtype=torch.float32)
            # (x/255 − mean)/std = x · a + c
            self._a = (1.0 / (255.0 * s)).view(-1, 1, 1).to(self.device)
            self._c = (-m / s).view(-1, 1, 1).to(self.device)
        else:
            self._a = self._c = None

    @property
    def active(self) -> bool:
        return self._a is not None or self.kind != "none"

    # ---------------------------------------------------------------- randomness
    def _node_generators(self, step: int) -> list[torch.Generator]:
        for g, node in zip(self.generators, self.local_nodes):
            g.manual_seed(derive_seed(self.seed, "augment", node, int(step)))
        return self.generators

    def crop_flip_params(self, step: int, b: int, limit: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Offsets dy, dx in [0, limit] and flip flags, each ``[k, b]`` (CPU)."""
        dy, dx, flip = [], [], []
        for g in self._node_generators(step):
            r = torch.randint(0, limit + 1, (2, b), generator=g)
            dy.append(r[0])
            dx.append(r[1])
            flip.append(torch.rand(b, generator=g) < 0.5)
        return torch.stack(dy), torch.stack(dx), torch.stack(flip)

    def resized_crop_params(self, step: int, b: int, h: int, w: int) -> tuple[torch.Tensor, ...]:
        """Boxes (top, left, height, width) and flip flags, each ``[k, b]`` (CPU), torchvision's rule."""
        area = float(h * w)
        lo, hi = math.log(self.ratio[0]), math.log(self.ratio[1])
        tries = 10
        out = []
        for g in self._node_generators(step):
            u = torch.rand(4, tries, b, generator=g, dtype=torch.float64)
            target = area * (self.scale[0] + (self.scale[1] - self.scale[0]) * u[0])
            aspect = torch.exp(lo + (hi - lo) * u[1])
            cw = torch.round(torch.sqrt(target * aspect))
            ch = torch.round(torch.sqrt(target / aspect))
            ok = (cw > 0) & (cw <= w) & (ch > 0) & (ch <= h)
            first = torch.argmax(ok.to(torch.int8), dim=0)            # first valid try (0 if none)
            any_ok = ok.any(dim=0)
            pick = lambda t: t.gather(0, first.view(1, -1)).view(-1)
            bw, bh = pick(cw), pick(ch)
            top = torch.floor(pick(u[2]) * (h - bh + 1))
            left = torch.floor(pick(u[3]) * (w - bw + 1))
            # fallback: the whole image, clamped to the ratio range, centered
            in_ratio = w / h
            if in_ratio < self.ratio[0]:
                fw, fh = w, int(round(w / self.ratio[0]))
            elif in_ratio > self.ratio[1]:
                fw, fh = int(round(h * self.ratio[1])), h
            else:
                fw, fh = w, h
            bw = torch.where(any_ok, bw, torch.full_like(bw, fw))
            bh = torch.where(any_ok, bh, torch.full_like(bh, fh))
            top = torch.where(any_ok, top, torch.full_like(top, (h - fh) // 2))
            left = torch.where(any_ok, left, torch.full_like(left, (w - fw) // 2))
            flip = torch.rand(b, generator=g) < 0.5
            out.append((top, left, bh, bw, flip))
        return tuple(torch.stack(t) for t in zip(*out))

    # ---------------------------------------------------------------- image ops
    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        """uint8 pixels ``[..., C, H, W]`` → normalized float32."""
        if self._a is None:
            return x
        return torch.addcmul(self._c, x.to(torch.float32), self._a)

    def crop_flip(self, x: torch.Tensor, dy: torch.Tensor, dx: torch.Tensor, flip: torch.Tensor) -> torch.Tensor:
        """Random crop of a zero-padded image + flip, for ``x [N, C, H, W]`` and ``[N]`` parameters: one gather."""
        n, c, h, w = x.shape
        p = self.pad
        xp = F.pad(x, (p, p, p, p)) if p > 0 else x
        hp, wp = h + 2 * p, w + 2 * p
        ar_h = torch.arange(h, device=x.device)
        ar_w = torch.arange(w, device=x.device)
        rows = dy.view(n, 1) + ar_h.view(1, h)                                   # [N, H]
        cols = dx.view(n, 1) + torch.where(flip.view(n, 1), (w - 1 - ar_w).view(1, w), ar_w.view(1, w))  # [N, W]
        lin = (rows.view(n, h, 1) * wp + cols.view(n, 1, w)).view(n, 1, h * w).expand(n, c, h * w)
        return torch.gather(xp.reshape(n, c, hp * wp), 2, lin).view(n, c, h, w)

    def resized_crop(self, x: torch.Tensor, top: torch.Tensor, left: torch.Tensor, bh: torch.Tensor,
                     bw: torch.Tensor, flip: torch.Tensor) -> torch.Tensor:
        """Resample box (top, left, bh, bw) of each ``x [N, C, H, W]`` (float) to H x W, flipped where asked."""
        n, c, h, w = x.shape
        sx = (bw / w) * torch.where(flip, -1.0, 1.0).to(bw.dtype)
        sy = bh / h
        cx = (2 * left + bw) / w - 1
        cy = (2 * top + bh) / h - 1
        theta = torch.zeros(n, 2, 3, dtype=torch.float32)
        theta[:, 0, 0], theta[:, 0, 2] = sx.float(), cx.float()
        theta[:, 1, 1], theta[:, 1, 2] = sy.float(), cy.float()
        grid = F.affine_grid(theta.to(x.device), [n, c, h, w], align_corners=False)
        return F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)

    # ---------------------------------------------------------------- entry points
    def __call__(self, xb: torch.Tensor, step: int) -> torch.Tensor:
        """Augment and normalize a training batch ``[k, b, C, H, W]`` of iteration ``step``."""
        if not self.active or isinstance(xb, dict) or xb.dim() != 5:
            return xb
        k, b, c, h, w = xb.shape
        x = xb.reshape(k * b, c, h, w)
        if self.kind == "crop_flip":
            dy, dx, flip = (t.view(-1).to(x.device) for t in self.crop_flip_params(step, b, 2 * self.pad))
            x = self.normalize(self.crop_flip(x, dy, dx, flip))
        elif self.kind == "resized_crop_flip":
            top, left, bh, bw, flip = (t.reshape(-1) for t in self.resized_crop_params(step, b, h, w))
            x = self.resized_crop(self.normalize(x), top, left, bh, bw, flip)
        else:
            x = self.normalize(x)
        return x.view(k, b, c, h, w)

    @torch.no_grad()
    def prepare_eval(self, x: torch.Tensor, chunk: int = 4096) -> torch.Tensor:
        """The test split ``[N, C, H, W]`` normalized once (chunked; no augmentation)."""
        if self._a is None or x.dtype != torch.uint8:
            return x
        out = torch.empty(x.shape, dtype=torch.float32, device=x.device)
        for i in range(0, x.shape[0], chunk):
            out[i:i + chunk] = self.normalize(x[i:i + chunk])
        return out


def make_batch_transform(dataset: ArrayDataset, augment: bool, seed: int, local_nodes: Sequence[int],
                         device: torch.device | str = "cpu") -> BatchTransform:
    """The batch transform of ``dataset`` (its standard augmentation unless ``augment`` is False)."""
    kind = dataset.augment if augment else "none"
    shape = dataset.input_shape
    pad = crop_pad(shape[-2]) if isinstance(shape, tuple) and len(shape) == 3 else 4
    return BatchTransform(kind, dataset.mean, dataset.std, seed, local_nodes, device, pad=pad)


def crop_pad(height: int) -> int:
    """Zero padding of ``crop_flip``: H/8 pixels, rounded (the standard 4 at CIFAR's 32 px)."""
    return max(1, int(round(height / 8)))
