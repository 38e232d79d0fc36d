"""Memory per node during training and inference (paper Section 5, Table 10, Figure 7).

Training, one node, one iteration at batch b::

    weights + gradients + optimizer state + algorithm buffers   (model-sized, always FP32)
    + activations kept for the backward pass                     (4 B each FP32, 1 B each 8-bit)

* Master weights, weight gradients and the optimizer state stay FP32 in 8-bit training
  too (SPEC §5; the paper: "weights are stored in full precision during training").
* Optimizer state: the optimizer's declared checkpointed state
  (:meth:`~decent8.optim.LocalMomentum.state_spec`): local Nesterov momentum and quasi-global
  momentum one model-sized buffer (m, m̂), Adam two (m, v).
* Algorithm buffers (model-sized, FP32), the paper's accounting: Choco-SGD keeps its public
  copy x̂ and the neighbour sum s (2), Deep-Squeeze / Sparse-Push the error e (1), D-PSGD /
  SGP none; each algorithm's :attr:`~decent8.algorithms.AlgorithmInfo.state_buffers`.
* Activations: for every traced layer, :data:`ACTIVATION_TENSORS` tensors of the size of
  its output — the paper's accounting, worked out from Table 10 (docs/cost_model.md):
  a conv / linear layer keeps 1, a norm layer 3, Range BN / BN / GN + ReLU 2 more for
  the ReLU (none on a downsample shortcut, where the reference ResNets put the ReLU after
  the residual add instead, counted on the main path), a residual add 2, a max pool 2
  (output and arg-max), an average pool / dropout 1, the network input 1. In an 8-bit
  model every one of them is an 8-bit tensor.

A simulated run (:func:`run_memory`): all k local nodes in one process, each holding what
the components declare (:mod:`decent8.state_spec`), in bytes per node and parameter::

    kept       = 4 (model z) + optimizer + algorithm + compressor (state + workspace)
                 + m · the algorithm's per-edge state   (a run with per-edge mixing, m slots)
    step       = kept + 4 (gradient) + the optimizer's, algorithm's and compressor's step temporaries
    checkpoint = kept + 4 + optimizer state + algorithm state + m · per-edge state
                 (the copies state_dict makes)

and the run's peak is k·d·max(step, checkpoint) beyond what the process holds before the
nodes' state is allocated (the data set, torch). m (``edge_slots``) is the largest in-degree
of the k nodes when the run mixes the individual neighbour messages through a robust rule
(``byzantine.*``: Choco-SGD keeps a public copy per in-edge, 4m B per parameter), else 0.
The per-edge messages and the rule's temporaries of such a step are not counted.

Inference: the weights only ("For inference, we report the memory utilized by the
model weights"): 4 B per parameter in FP32, 1 B in 8 bits.

"MB" is 2^20 bytes (:data:`MB`): the paper's ResNet-20 weights, 273 k parameters × 4 B,
are "1.04 MB" (1.09 with 10^6).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..algorithms.registry import DEFAULT_ALGORITHM
from ..errors import ConfigError, choice_error
from .counts import RELU_NORMS, Layer, ModelCounts
from ..algorithms import algorithm_class, algorithm_info
from ..optim import optimizer_class
from ..compression import compressor_class

#: The paper's "MB" (binary megabyte).
MB = 2**20
#: Bytes per activation / weight value.
BYTES = {"fp32": 4, "int8": 1}
#: Bytes of model-sized training state (master weights, gradients, optimizer, buffers): FP32 at both precisions.
STATE_BYTES = 4

#: Activation tensors kept per layer, in multiples of the layer's output size.
ACTIVATION_TENSORS: dict[str, int] = {
    "input": 1, "conv": 1, "linear": 1,
    "range_bn": 3, "range_evonorm": 3, "evonorm": 3, "bn": 3, "gn": 3,
    "relu": 2, "skip": 2, "max_pool": 2, "avg_pool": 1, "dropout": 1,
    "act_quant": 0, "weight_quant": 0,
}
#: Extra tensors of the ReLU in a "norm + ReLU" layer (Range BN, BN, GN), main path only.
RELU_TENSORS = 2

COMPONENTS = ("weights", "gradients", "optimizer", "algorithm_buffers", "activations")


def check_precision(precision: str) -> str:
    if precision not in BYTES:
        raise choice_error("precision", precision, tuple(BYTES))
    return precision


def activation_tensors(layer: Layer) -> int:
    """Tensors of the output size that ``layer`` keeps for the backward pass (paper's accounting)."""
    n = ACTIVATION_TENSORS.get(layer.kind, 0)
    if layer.kind in RELU_NORMS and not layer.shortcut:
        n += RELU_TENSORS
    return n


def activation_elements(layer: Layer) -> int:
    """Activation elements ``layer`` keeps for the backward pass."""
    return activation_tensors(layer) * layer.out_elems


def activation_bytes(counts: ModelCounts, precision: str | None = None) -> int:
    prec = check_precision(precision or counts.precision)
    return BYTES[prec] * sum(activation_elements(layer) for layer in counts.layers)


@dataclass(frozen=True)
class MemoryBreakdown:
    """Bytes per component (:data:`COMPONENTS`)."""

    weights: int
    gradients: int = 0
    optimizer: int = 0
    algorithm_buffers: int = 0
    activations: int = 0

    @property
    def total(self) -> int:
        return self.weights + self.gradients + self.optimizer + self.algorithm_buffers + self.activations

    def mb(self) -> dict[str, float]:
        """Components and ``total`` in MB (2^20 B)."""
        out = {c: getattr(self, c) / MB for c in COMPONENTS}
        out["total"] = self.total / MB
        return out


def buffers_for(algorithm: str, optimizer: str = "local") -> tuple[int, int]:
    """``(optimizer buffers, algorithm buffers)`` for the named optimizer kind and algorithm
    (a registered name or ``pkg.module:Class``): the optimizer's declared checkpointed state in
    FP32 buffers, and the algorithm's published ``state_buffers`` (the paper's accounting, its
    :class:`~decent8.algorithms.AlgorithmInfo`)."""

    buffers = algorithm_info(algorithm).state_buffers
    return optimizer_class(optimizer).state_spec().state_bytes // STATE_BYTES, buffers


@dataclass(frozen=True)
class RunMemory:
    """Bytes per node and parameter of a simulated run (see the module docstring), and its size."""

    nodes: int
    parameters: int
    #: model, optimizer, algorithm and compressor: held between steps
    kept: int
    #: at a training step's peak
    step: int
    #: at a checkpoint's peak (0: no checkpoints)
    checkpoint: int
    #: bytes per node and parameter of each part at the peak (model, gradient, optimizer, ...)
    parts: dict

    @property
    def per_parameter(self) -> int:
        return max(self.step, self.checkpoint)

    @property
    def total(self) -> int:
        """Bytes of all nodes' state at the run's peak."""
        return self.nodes * self.parameters * self.per_parameter

    def describe(self) -> str:
        """``48 B per parameter and node: model 4, gradient 4, …``"""
        parts = ", ".join(f"{k} {v:g}" for k, v in self.parts.items() if v)
        return f"{self.per_parameter} B per parameter and node: {parts}"


def run_memory(parameters: int, nodes: int, algorithm: str = DEFAULT_ALGORITHM, optimizer: str = "local",
               compression: str = "topk", momentum: float = 0.9, weight_decay: float = 1e-4,
               checkpoint: bool = True, edge_slots: int = 0) -> RunMemory:
    """Memory of the nodes' state in a simulated run of ``nodes`` local nodes of ``parameters``
    parameters, from the components' declarations (:mod:`decent8.state_spec`); nothing is built.
    ``edge_slots``: the in-edge slots m of a run with per-edge mixing (module docstring), else 0."""

    alg_type = algorithm_class(algorithm)
    comp = compressor_class(compression).state
    alg = alg_type.state_spec(compressor_class(compression))
    kind = algorithm_info(algorithm).optimizer_for(algorithm, optimizer)
    opt = optimizer_class(kind).state_spec(momentum=momentum, weight_decay=weight_decay)
    edge = int(edge_slots) * alg.edge_bytes
    kept = STATE_BYTES + opt.kept_bytes + alg.kept_bytes + comp.kept_bytes + edge
    step = kept + STATE_BYTES + opt.step + alg.step + comp.step
    ckpt = kept + STATE_BYTES + opt.state_bytes + alg.state_bytes + comp.state_bytes + edge if checkpoint else 0
    parts = {"model": STATE_BYTES, "optimizer": opt.kept_bytes, "algorithm": alg.kept_bytes + comp.kept_bytes,
             **({"per-edge copies": edge} if edge else {})}
    if step >= ckpt:
        parts.update(gradient=STATE_BYTES, temporaries=opt.step + alg.step + comp.step)
    else:
        parts["checkpoint copy"] = ckpt - kept
    return RunMemory(nodes, parameters, kept, step, ckpt, parts)


def training_memory(counts: ModelCounts, algorithm: str = DEFAULT_ALGORITHM, optimizer: str = "local",
                    precision: str | None = None) -> MemoryBreakdown:
    """Memory of one node during a training iteration (the paper's Table 10 "Training" rows use Choco-SGD)."""
    prec = check_precision(precision or counts.precision)
    opt, alg = buffers_for(algorithm, optimizer)
    model = STATE_BYTES * counts.parameters
    return MemoryBreakdown(weights=model, gradients=model, optimizer=opt * model, algorithm_buffers=alg * model,
                           activations=activation_bytes(counts, prec))


def inference_memory(parameters: int, precision: str) -> MemoryBreakdown:
    """The weights only: 4 B (FP32) or 1 B (8-bit) per parameter."""
    if isinstance(parameters, bool) or not isinstance(parameters, int) or parameters < 0:
        raise ConfigError("parameters", f"must be a non-negative integer, got {parameters!r}")
    return MemoryBreakdown(weights=BYTES[check_precision(precision)] * parameters)


def activation_by_kind_mb(counts: ModelCounts, precision: str | None = None) -> dict[str, float]:
    """Activation memory per layer kind (MB), zero kinds left out."""
    prec = check_precision(precision or counts.precision)
    out: dict[str, float] = {}
    for layer in counts.layers:
        b = activation_elements(layer) * BYTES[prec]
        if b:
            out[layer.kind] = out.get(layer.kind, 0.0) + b / MB
    return out


__all__ = ["MB", "BYTES", "STATE_BYTES", "ACTIVATION_TENSORS", "RELU_TENSORS",
           "COMPONENTS", "RunMemory", "run_memory", "MemoryBreakdown", "activation_tensors", "activation_elements",
           "activation_bytes", "buffers_for", "training_memory", "inference_memory", "activation_by_kind_mb"]
