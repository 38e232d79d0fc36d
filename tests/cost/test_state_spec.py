"""The declared per-node state (decent8.state_spec) is what the components allocate.

Each run is built through the product path (``build(load_config(...))``) and trained for
two engine steps; then every ``[k, d]`` tensor the algorithm and the optimizer hold is
summed, byte for byte, and compared with the declaration, read from the classes alone.
"""
from __future__ import annotations

import pytest
import torch

from decent8.algorithms import algorithm_class
from decent8.compression import compressor_class
from decent8.config import load_config
from decent8.optim import optimizer_class
from decent8.state_spec import F32, F64, StateSpec
from decent8.train.build import build

from tests.helpers import run_steps, small_config

# algorithm, compression and the options it needs to run on the small config
CASES = [
    ("dpsgd", "identity", []),
    ("sgp", "identity", []),
    ("choco", "topk", []),
    ("choco", "identity", []),
    ("choco_push", "topk", []),
    ("deepsqueeze", "topk", []),
    ("sparse_push", "topk", []),
    ("d2", "identity", ["topology=ring", "topology.weights=metropolis"]),
    ("gt", "identity", ["topology=ring", "topology.weights=metropolis"]),
    ("gt", "topk", ["topology=ring", "topology.weights=metropolis"]),
    ("gut", "identity", ["topology=ring", "topology.weights=metropolis"]),
    ("qg_gutm", "identity", ["topology=ring", "topology.weights=metropolis"]),
    ("relaysgd", "identity", ["topology=ring", "topology.weights=metropolis"]),
    ("psgd", "identity", ["topology=ring"]),
    ("marsit", "identity", ["topology=ring"]),
    ("signsgd", "identity", ["topology=ring"]),
    ("ef_signsgd", "identity", ["topology=ring"]),
]


def model_sized_bytes(obj, k: int, d: int) -> dict[str, int]:
    """Bytes of every ``[k, d]`` tensor among ``obj``'s attributes, by name."""
    return {name: v.numel() * v.element_size() for name, v in vars(obj).items()
            if isinstance(v, torch.Tensor) and tuple(v.shape) == (k, d)}


def built(algorithm: str, compression: str, extra: list[str]):
    cfg = load_config(None, small_config([f"algorithm={algorithm}", f"compression={compression}", *extra]))
    c = build(cfg)
    run_steps(c, c.model, 2)
    return c


@pytest.mark.parametrize("algorithm,compression,extra", CASES, ids=[f"{a}-{c}" for a, c, _ in CASES])
def test_algorithm_allocates_what_it_declares(algorithm, compression, extra):
    c = built(algorithm, compression, extra)
    k, d = c.comm.k, c.model.dim
    spec = algorithm_class(algorithm).state_spec(compressor_class(compression))
    held = model_sized_bytes(c.algorithm, k, d)
    assert sorted(held) == sorted(spec.names), (held, spec)
    assert sum(held.values()) == k * d * spec.kept_bytes
    # what is checkpointed is the declared state (workspaces are not)
    saved = sum(t.numel() * t.element_size() for t in c.algorithm.state_dict().values() if tuple(t.shape) == (k, d))
    assert saved == k * d * spec.state_bytes


@pytest.mark.parametrize("kind,momentum,expected", [
    ("local", 0.9, StateSpec({"buf": F32}, {"_d": F32})),
    ("local", 0.0, StateSpec({"buf": F32}, step=4)),
    ("qgm", 0.9, StateSpec({"buf": F32}, step=8)),
    ("adam", 0.9, StateSpec({"m": F32, "v": F32}, step=4)),
    ("adamw", 0.9, StateSpec({"m": F32, "v": F32}, step=4)),
])
def test_optimizer_allocates_what_it_declares(kind, momentum, expected):
    c = built("dpsgd", "identity", [f"optimizer.kind={kind}", f"optimizer.momentum={momentum}"])
    k, d = c.comm.k, c.model.dim
    spec = optimizer_class(kind).state_spec(momentum=momentum, weight_decay=1e-4)
    assert spec == expected
    held = model_sized_bytes(c.optimizer, k, d)
    assert sorted(held) == sorted(spec.names)
    assert sum(held.values()) == k * d * spec.kept_bytes
    assert {n for n, t in c.optimizer.state_dict().items() if t.shape == (k, d)} == set(spec.state)


def test_bytes_per_parameter_from_dtypes():
    s = StateSpec({"a": F32, "b": F64}, {"w": F32}, step=12)
    assert (s.state_bytes, s.kept_bytes, s.step) == (12, 16, 12)
    # Choco: x̂ and the residual pair are checkpointed, x½ − x̂ is a workspace: 12 + 4 B
    choco = algorithm_class("choco").state_spec(compressor_class("topk"))
    assert (choco.state_bytes, choco.kept_bytes, choco.step) == (12, 16, 0)
    assert algorithm_class("choco").state_spec(compressor_class("identity")).step == 12
    # built-in compressors keep nothing between steps
    for name in ("identity", "topk", "randomk", "quantize", "sign"):
        assert compressor_class(name).state.kept_bytes == 0


def test_robust_choco_keeps_one_public_copy_per_in_edge(monkeypatch):
    """A robust rule makes Choco-SGD keep a public copy per in-edge, ``[k, m, d]`` with m the
    largest in-degree (padded slots included): on a 5-node star m = 4 (the centre), although a
    leaf has one in-neighbour. The declaration (4 B per slot and parameter), the memory model and
    the pre-flight estimate count exactly the bytes the built run holds and checkpoints."""
    from decent8.cost.memory import run_memory
    from decent8.errors import ConfigError
    from decent8.train import build as build_module
    from decent8.train.byzantine import edge_slots

    robust = ["algorithm=choco", "compression=topk", "topology=star", "topology.weights=metropolis", "nodes=5", "byzantine.nodes=[1]",
              "byzantine.attack=sign_flip", "byzantine.aggregator=clipped_gossip", "byzantine.b=0"]
    c = build(load_config(None, small_config(robust)))
    run_steps(c, c.model, 2)
    k, d = c.comm.k, c.model.dim
    spec = algorithm_class("choco").state_spec(compressor_class("topk"))
    assert spec.edge == {"edge_copies": F32} and spec.edge_bytes == 4
    m = edge_slots(c.byzantine, c.topology, c.comm.local_nodes)
    assert (k, m) == (5, 4)
    copies = c.algorithm._copies.copies
    assert tuple(copies.shape) == (k, m, d) and copies.dtype == F32
    # the [k, d] state is as declared; the per-edge copies come on top, and are checkpointed
    held = model_sized_bytes(c.algorithm, k, d)
    assert sorted(held) == sorted(spec.names) and sum(held.values()) == k * d * spec.kept_bytes
    saved = {n: t.numel() * t.element_size() for n, t in c.algorithm.state_dict().items()}
    assert saved["edge_copies"] == k * m * d * spec.edge_bytes
    assert sum(saved.values()) == k * d * (spec.state_bytes + m * spec.edge_bytes)
    # the memory model: model z + optimizer + algorithm [k, d] buffers + the copies, byte for byte
    opt = sum(model_sized_bytes(c.optimizer, k, d).values())
    mem = build_module.estimate_memory(c.cfg, d, k, m)
    assert mem.kept * k * d == 4 * k * d + opt + sum(held.values()) + copies.numel() * copies.element_size()
    assert mem.parts["per-edge copies"] == 16
    assert mem.kept == run_memory(d, k, "choco", compression="topk").kept + 16
    assert mem.checkpoint - run_memory(d, k, "choco", compression="topk").checkpoint == 2 * 16
    # the pre-flight check counts them: with too little memory the one line names them
    monkeypatch.setattr(build_module, "_memory_bytes", lambda device: build_module._process_bytes() + 1)
    with pytest.raises(ConfigError, match="per-edge copies 16"):
        build(load_config(None, small_config(robust)))
