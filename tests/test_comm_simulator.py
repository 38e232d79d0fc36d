"""Simulator communicator: mixing is W @ messages; bytes are the payload bytes per out-edge."""
from __future__ import annotations

import torch

from decent8.comm import SimulatorCommunicator
from decent8.compression import make_compressor
from decent8.layout import ParamLayout
from decent8.topology import make_topology


def test_exchange_mixes_with_w_and_counts_payload_bytes_per_out_edge(tmp_path):
    path = tmp_path / "g.txt"
    path.write_text("0 1\n0 2\n1 2\n2 0\n")      # out-degrees 2, 1, 1
    topo = make_topology("edge_list", 3, path=str(path))
    comm = SimulatorCommunicator(topo)
    layout = ParamLayout([("w", (10, 10)), ("b", (10,))])
    comp = make_compressor("topk", layout, ratio=0.9)
    x = torch.randn(3, layout.dim)
    payload = comp.encode(x)
    mixed = comm.exchange(payload, comp, step=0)
    w = topo.weights(0)
    assert torch.allclose(mixed, w @ comp.decode(payload), atol=1e-6)
    # top-k 90 %: 10 of 100 and 1 of 10 kept, fp32 values + int16 indices
    per_message = (10 + 1) * (4 + 2)
    assert payload.nbytes_per_node() == per_message == comp.nbytes()
    assert comm.bytes_sent.tolist() == [2 * per_message, per_message, per_message]


def test_sparse_mixing_for_many_nodes_matches_dense():
    topo = make_topology("ring", 24)
    comm = SimulatorCommunicator(topo)
    comp = make_compressor("identity", ParamLayout.single(5))
    x = torch.randn(24, 5)
    mixed = comm.exchange(comp.encode(x), comp, step=0)
    assert torch.allclose(mixed, topo.weights(0) @ x, atol=1e-6)


def test_time_varying_weights_follow_the_step():
    topo = make_topology("exponential", 8, time_varying=True)
    comm = SimulatorCommunicator(topo)
    comp = make_compressor("identity", ParamLayout.single(1))
    x = torch.arange(8.0).unsqueeze(1)
    z = x.clone()
    for t in range(topo.period):
        z = comm.exchange(comp.encode(z), comp, step=t)
    assert torch.allclose(z, torch.full_like(z, x.mean().item()), atol=1e-6)   # exact average after one period


def test_ring_pass_rolls_and_counts():
    topo = make_topology("directed_ring", 4)
    comm = SimulatorCommunicator(topo)
    chunk = torch.arange(4, dtype=torch.uint8).unsqueeze(1).repeat(1, 3)
    out = comm.ring_pass(chunk)
    assert out[:, 0].tolist() == [3, 0, 1, 2]
    assert comm.bytes_sent.tolist() == [3.0] * 4
