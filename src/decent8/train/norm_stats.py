"""Which running statistics (BatchNorm-style buffers) node models and the averaged model use.

A model's floating-point buffers — BatchNorm running mean/variance, the 8-bit
activation ranges — are kept per node, ``b[k, nb]`` (:class:`~decent8.models.stacked.StackedModel`).
In training a BatchNorm layer normalises with the batch's own statistics and only
*updates* its running ones, so the buffers matter at evaluation. ``model.norm_stats``
says which buffers a node model is evaluated with (docs/algorithms.md "Normalisation
statistics"; SPEC §8):

==========  ============================================================================
``local``   each node keeps its own, estimated on its own data (FedBN-style; the
            default, the behaviour before this option). Under skewed data a node's
            statistics describe its few classes; after the final consensus rounds its
            parameters are (nearly) the average, but its statistics are still its own,
            so a node model can end *worse* than before the rounds.
``gossip``  the statistics travel with the parameters: after every gossip step and
            every final consensus round each node mixes its buffers with the same
            weights, ``b_i ← Σ_j W_ij b_j / Σ_j W_ij`` (exact, uncompressed:
            4·(nb + 1) bytes per out-edge, counted in ``bytes_sent``; the row
            normalisation keeps push-sum graphs, whose W is only column-stochastic,
            at a convex combination). After the rounds the nodes' buffers agree, like
            their parameters. The recommended option for skewed data.
``average`` nodes keep their own buffers in training; at evaluation every node model
            uses the node average ``b̄ = 1/n Σ_i b_i`` (one all-reduce per evaluation,
            like the averaged model's parameters).
==========  ============================================================================

Under every option the averaged model ``x̄ = 1/n Σ_i x_i`` is evaluated with ``b̄``.
"""
from __future__ import annotations

import warnings

import torch
from torch import nn

from .validate import NORM_STATS, check_norm_stats


def has_running_stats(module: nn.Module) -> bool:
    """True when a layer of ``module`` keeps BatchNorm-style running statistics (a
    ``running_mean`` / ``running_var`` buffer: ``nn.BatchNorm*``, ``norm=bn``/``range_bn``)."""
    for m in module.modules():
        names = {n for n, _ in m.named_buffers(recurse=False)}
        if names & {"running_mean", "running_var"}:
            return True
    return False


def skewed(partition: str, skew: float) -> bool:
    """Whether the partition gives nodes different label distributions (skew > 0, Dirichlet, shards)."""
    return partition != "skew" or skew > 0


def warn_if_skewed(module: nn.Module, norm_stats: str, partition: str, skew: float) -> bool:
    """One warning when a model with running statistics meets skewed data under
    ``model.norm_stats=local`` (returns whether it warned)."""
    if norm_stats != "local" or not skewed(partition, skew) or not has_running_stats(module):
        return False
    warnings.warn("the model has BatchNorm running statistics and the data is skewed across nodes: with "
                  "model.norm_stats=local each node's statistics describe its own classes and the final consensus "
                  "rounds can make node models worse; model.norm_stats=gossip mixes them with the parameters "
                  "(docs/algorithms.md, Normalisation statistics)", UserWarning, stacklevel=2)
    return True


@torch.no_grad()
def mix_buffers(comm, buffers: torch.Tensor, step: int) -> None:
    """``b_i ← Σ_j W_ij b_j / Σ_j W_ij`` in place (``model.norm_stats=gossip``): the buffers
    ``[k, nb]`` and a column of ones go out uncompressed through ``comm.mix_scalars``."""
    ones = torch.ones(buffers.shape[0], 1, dtype=torch.float32, device=buffers.device)
    mixed = comm.mix_scalars(torch.cat([buffers.to(torch.float32), ones], 1), step).to(buffers.device)
    buffers.copy_((mixed[:, :-1] / mixed[:, -1:]).to(buffers.dtype))


__all__ = ["NORM_STATS", "check_norm_stats", "has_running_stats", "skewed", "warn_if_skewed", "mix_buffers"]
