"""What a component keeps for every node, per model parameter, declared without building it.

Algorithms, local optimizers and compressors each declare the model-sized tensors
(``[k, d]``: k local nodes, d parameters) they allocate, name → dtype, in a
:class:`StateSpec`. The memory model of a run (:func:`decent8.cost.memory.run_memory`), and
through it the pre-flight check of ``decent8 train`` and ``decent8 cost``, reads these
declarations and nothing else; a test builds every algorithm and optimizer and compares the
bytes of the ``[k, d]`` tensors it holds with the declaration (tests/cost/test_state_spec.py).

* ``state``: kept across steps and checkpointed (``state_dict``);
* ``workspace``: kept across steps so that a step allocates no fresh ``[k, d]`` tensor, not
  checkpointed;
* ``step``: bytes per parameter of the temporaries one update holds at its peak (freed
  after the step; measured: tests/cost/test_run_memory.py);
* ``edge``: kept across steps and checkpointed *per in-edge* (``[k, m, d]``, m the largest
  in-degree of the k nodes, padded slots included), only in a run that mixes the individual
  neighbour messages through a robust rule (``byzantine.*``; Choco-SGD's per-edge public
  copies, :mod:`decent8.byzantine.copies`).

Bytes per node and parameter: Σ of the element sizes (float32 4, float64 8); k nodes of d
parameters hold k·d times that, plus k·m·d times :attr:`StateSpec.edge_bytes` in a run with
per-edge mixing.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import torch


def itemsize(dtype: torch.dtype) -> int:
    """Bytes of one element of ``dtype``."""
    return torch.empty((), dtype=dtype).element_size()


@dataclass(frozen=True)
class StateSpec:
    """Model-sized per-node tensors of one component (see the module docstring)."""

    state: Mapping[str, torch.dtype] = field(default_factory=dict)
    workspace: Mapping[str, torch.dtype] = field(default_factory=dict)
    step: int = 0
    edge: Mapping[str, torch.dtype] = field(default_factory=dict)

    @property
    def edge_bytes(self) -> int:
        """Checkpointed bytes per node, in-edge slot and parameter (per-edge mixing only)."""
        return sum(itemsize(d) for d in self.edge.values())

    @property
    def state_bytes(self) -> int:
        """Checkpointed bytes per node and parameter."""
        return sum(itemsize(d) for d in self.state.values())

    @property
    def kept_bytes(self) -> int:
        """Bytes per node and parameter held between steps (state + workspace)."""
        return self.state_bytes + sum(itemsize(d) for d in self.workspace.values())

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.state) + tuple(self.workspace)


NONE = StateSpec()

F32 = torch.float32
F64 = torch.float64

__all__ = ["StateSpec", "NONE", "F32", "F64", "itemsize"]
