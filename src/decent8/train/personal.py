"""Per-node ("personalized") evaluation on non-IID data.

Node i's test distribution is taken to be its own training label distribution π_i: the
global test set is reweighted so that each test sample of class c counts w_i(c) = π_i(c)/q(c),
q the test label distribution. Node i's personalized accuracy is then

    acc_i = Σ_s w_i(y_s)·[node i classifies s right] / Σ_s w_i(y_s) = Σ_c π_i(c)·acc_i(c) / Σ_{c: q(c)>0} π_i(c),

its per-class test accuracy averaged with its own label shares — the importance-weighting
view of a "local test set drawn from the node's distribution" used for personalized FL
(e.g. the per-client evaluation of LEAF, Caldas et al. 2018, and of FedRep, Collins et al.
ICML 2021), computed from the logits the global evaluation already has, at no extra cost.
"""
from __future__ import annotations

import numpy as np
import torch

__all__ = ["class_weights"]


def class_weights(parts, y_train: torch.Tensor, y_test: torch.Tensor) -> torch.Tensor | None:
    """``[n, C]`` float64: w_i(c) = π_i(c)/q(c) (0 for classes absent from the test set), with
    π_i node i's training label shares over ``parts`` and q the test label shares; None
    when the labels are not one class index per sample."""
    if y_train.dim() != 1 or y_test.dim() != 1 or y_train.dtype.is_floating_point or y_test.dtype.is_floating_point:
        return None
    ytr, yte = y_train.cpu().numpy(), y_test.cpu().numpy()
    if len(yte) == 0 or ytr.min(initial=0) < 0 or yte.min(initial=0) < 0:
        return None
    C = int(max(ytr.max(initial=0), yte.max(initial=0))) + 1
    q = np.bincount(yte, minlength=C) / len(yte)
    out = np.zeros((len(parts), C))
    for i, p in enumerate(parts):
        idx = np.asarray(p, dtype=np.int64)
        if len(idx) == 0:
            continue
        pi = np.bincount(ytr[idx], minlength=C) / len(idx)
        out[i] = np.divide(pi, q, out=np.zeros(C), where=q > 0)
    return torch.from_numpy(out)
