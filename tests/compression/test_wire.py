"""``compression.wire=auto|fp32|int8``: the values on the wire, a choice separate from the
training precision (docs/algorithms.md §4). Bytes are those of the real payloads; the
resolved config records the concrete wire; fp32 messages while training in 8 bits run
for Choco, Deep-Squeeze and D-PSGD through the product path."""
from __future__ import annotations

import json

import pytest
import torch

import decent8
from decent8.config import load_config
from decent8.cost.communication import communication_volume
from decent8.errors import ConfigError
from decent8.layout import ParamLayout
from decent8.topology import make_topology
from decent8.train.build import build
from decent8.train.resolve import resolve
from tests.helpers import run_steps, small_config

#: (precision, compression.wire) → (resolved wire, the compressor of top-k / of a dense message)
CASES = {
    ("fp32", "auto"): ("fp32", "topk", "identity"),
    ("fp32", "fp32"): ("fp32", "topk", "identity"),
    ("fp32", "int8"): ("int8", "topk_int8", "quantize"),
    ("int8", "auto"): ("int8", "topk_int8", "quantize"),
    ("int8", "fp32"): ("fp32", "topk", "identity"),
    ("int8", "int8"): ("int8", "topk_int8", "quantize"),
}


def cfg(*overrides: str):
    return load_config(None, small_config(["sim.chunk=1", "topology=ring", *overrides]))


def hand_bytes(c) -> int:
    """One node's message from the payload layout (compression/topk.py, quantize.py):
    top-k K·(4 + index) fp32, K·(1 + index) + 8·L at 8 bits; dense 4·d, or d + 8·L."""
    comp, d, L = c.compressor, c.model.dim, len(c.model.layout)
    if comp.name in ("topk", "topk_int8"):
        index = torch.empty((), dtype=comp.index_dtype).element_size()
        return comp.num_kept * (4 + index) if comp.name == "topk" else comp.num_kept * (1 + index) + 8 * L
    return 4 * d if comp.name == "identity" else d + 8 * L


def payload_bytes(c) -> int:
    """Bytes of one node's real encoded message (the tensors the communicator moves)."""
    x = c.x0.reshape(1, -1).repeat(c.comm.k, 1) + 0.01 * torch.randn(c.comm.k, c.model.dim)
    gens = [torch.Generator().manual_seed(i) for i in range(c.comm.k)]
    return int(c.compressor.encode(x, gens).nbytes_per_node())


@pytest.mark.parametrize("precision,wire", sorted(CASES))
def test_each_wire_sends_its_format_and_counts_the_real_payload(precision, wire):
    resolved, topk_name, dense_name = CASES[(precision, wire)]
    for algorithm, compression, name in (("choco", "topk", topk_name), ("dpsgd", "identity", dense_name)):
        c = build(cfg(f"precision={precision}", f"compression.wire={wire}", f"algorithm={algorithm}",
                      f"compression={compression}", "compression.ratio=0.9"))
        assert c.cfg.compression.wire == resolved          # config.yaml: the concrete wire
        assert c.compressor.name == name
        assert payload_bytes(c) == hand_bytes(c) == c.compressor.nbytes()
        # the communicator counts what it moved: 3 steps on a ring, 2 sends per node a step
        before = c.comm.bytes_sent.clone()
        run_steps(c, c.model, 3)
        sent = (c.comm.bytes_sent - before).tolist()
        assert sent == [3 * 2 * c.algorithm.messages_per_step * hand_bytes(c)] * c.comm.k


def test_the_int8_wire_is_smaller_by_the_value_width():
    """Top-k: 3 B less per kept value, plus 8 B of scale/zero per tensor; dense: 3 B less per
    parameter, plus 8 B per tensor — at either training precision."""
    for precision in ("fp32", "int8"):
        f = build(cfg(f"precision={precision}", "compression.wire=fp32", "compression.ratio=0.9"))
        q = build(cfg(f"precision={precision}", "compression.wire=int8", "compression.ratio=0.9"))
        K, L = f.compressor.num_kept, len(f.model.layout)
        assert f.compressor.nbytes() - q.compressor.nbytes() == 3 * K - 8 * L
        assert q.compressor.num_kept == K


def test_resolve_records_the_wire_and_is_idempotent():
    r = resolve(cfg("precision=int8"))
    assert r.compression.wire == "int8" and resolve(r) is r
    again = resolve(load_config(None, small_config(["sim.chunk=1", "topology=ring", "precision=fp32",
                                                    "compression.wire=int8"])))
    assert again.compression.wire == "int8" and build(again).compressor.name == "topk_int8"
    # a compressor with one wire format keeps auto at both precisions
    for precision in ("fp32", "int8"):
        assert resolve(cfg(f"precision={precision}", "compression=randomk")).compression.wire == "auto"


def test_wires_that_cannot_be_honoured_are_one_line():
    cases = [
        (["compression.wire=fp16"], "compression.wire: unknown value 'fp16'"),
        (["compression=randomk", "compression.wire=int8"], "compression.wire: int8 applies to"),
        (["compression=quantize", "compression.wire=fp32"], "compression.wire: fp32 applies to"),
        (["compression.value_bits=8", "compression.wire=fp32"], "compression.wire: fp32 sends top-k values in 32"),
        (["algorithm=d2", "compression=identity", "compression.wire=int8"],
         "compression.wire: int8 is not defined for algorithm 'd2'"),
    ]
    for overrides, message in cases:
        with pytest.raises(ConfigError) as e:
            build(cfg(*overrides))
        assert str(e.value).startswith(message) and "\n" not in str(e.value)
    # D² at 8 bits: refused on the 8-bit wire, runs with fp32 messages
    with pytest.raises(ConfigError, match="compression.wire=fp32"):
        build(cfg("precision=int8", "algorithm=d2", "compression=identity"))
    c = build(cfg("precision=int8", "algorithm=d2", "compression=identity", "compression.wire=fp32"))
    assert c.compressor.name == "identity" and c.algorithm.compressor.name == "identity"


def test_the_cost_model_follows_the_wire():
    layout = ParamLayout([("w", (100, 10)), ("b", (10,))])
    topo = make_topology("ring", 8)
    vol = {w: communication_volume(layout, 8, topo, 1, 800, 10, compression="topk", ratio=0.9, precision="int8",
                                   wire=w) for w in ("auto", "fp32", "int8")}
    assert vol["auto"].wire_compression == vol["int8"].wire_compression == "topk_int8"
    assert vol["fp32"].wire_compression == "topk"
    K = 100 + 1   # ceil(10 % of each tensor): 100 of w, 1 of b
    assert vol["fp32"].real_message_bytes == K * (4 + 2)
    assert vol["int8"].real_message_bytes == K * (1 + 2) + 2 * 8


@pytest.mark.parametrize("algorithm,compression", [("choco", "topk"), ("deepsqueeze", "topk"),
                                                   ("dpsgd", "identity")])
def test_fp32_wire_at_int8_precision_trains(algorithm, compression):
    """The authors' setting (8-bit training, fp32 messages), built through build(load_config):
    it trains (finite, moving parameters) and each step sends the fp32 payload: 3 B more a
    kept value (top-k) or a parameter (dense) than the 8-bit wire, less its 8 B of
    scale/zero a tensor."""
    sent, params = {}, {}
    for wire in ("fp32", "int8"):
        c = build(cfg("precision=int8", f"compression.wire={wire}", f"algorithm={algorithm}",
                      f"compression={compression}", "compression.ratio=0.9"))
        params[wire] = run_steps(c, c.model, 4)
        assert torch.isfinite(params[wire]).all() and not torch.equal(params[wire], c.x0.expand_as(params[wire]))
        sent[wire] = c.comm.bytes_sent[0].item()
        assert sent[wire] == 4 * 2 * c.algorithm.messages_per_step * hand_bytes(c)
    kept = c.compressor.num_kept if compression == "topk" else c.model.dim
    assert sent["fp32"] - sent["int8"] == 4 * 2 * c.algorithm.messages_per_step * (3 * kept - 8 * len(c.model.layout))
    assert not torch.equal(params["fp32"], params["int8"])   # the wire changes what the nodes receive


def test_the_api_records_the_wire(tmp_path):
    """decent8.train at precision=int8 with fp32 messages: config.yaml and summary.json say so."""
    summary, folder = decent8.train("mlp", nodes=4, epochs=1, algorithm="choco", compression="topk",
                                    precision="int8", topology="ring", out_dir=str(tmp_path), name="run",
                                    compression__wire="fp32", data__subset=128, algorithm__consensus_rounds=0,
                                    progress=False, checkpoint=False, tensorboard="false")
    assert summary["wire"] == "fp32" and summary["wire_compression"] == "topk"
    assert "wire: fp32" in (folder / "config.yaml").read_text()
    assert json.loads((folder / "summary.json").read_text())["wire"] == "fp32"
