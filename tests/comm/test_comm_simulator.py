"""Simulator communicator: mixing is W @ messages; bytes are the payload bytes per out-edge."""
from __future__ import annotations

import pytest
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


# ---------------------------------------------------------------- issue 32: sparse mixing increments
def _irregular_graph(tmp_path, n=7):
    path = tmp_path / "g.txt"
    path.write_text("0 1\n0 2\n0 3\n1 2\n2 3\n2 4\n3 4\n4 5\n5 6\n6 0\n1 5\n")
    return make_topology("edge_list", n, path=str(path))


def test_edge_slots_rebuild_w_minus_identity_and_never_repeat_a_destination(tmp_path):
    import numpy as np
    for topo in (_irregular_graph(tmp_path), make_topology("ring", 20), make_topology("directed_ring", 5)):
        comm = SimulatorCommunicator(topo)
        m = np.zeros((topo.n, topo.n))
        for dst, src, w in comm.edge_slots(0):
            assert len(set(dst.tolist())) == len(dst)
            m[dst.numpy(), src.numpy()] += w.numpy()
        assert np.array_equal(m, np.asarray(topo.weights_np(0), dtype=np.float64) - np.eye(topo.n))


@pytest.mark.parametrize("name", ["topk", "randomk", "topk_int8"])
def test_sparse_increment_equals_the_dense_one(tmp_path, name, monkeypatch):
    from decent8.algorithms import compensated
    from decent8.compression import make_compressor
    from decent8.layout import ParamLayout
    topo = _irregular_graph(tmp_path)
    comm = SimulatorCommunicator(topo)
    comp = make_compressor(name, ParamLayout([("a", (30,)), ("b", (4, 5))]), ratio=0.8)
    x = torch.randn(7, 50, generator=torch.Generator().manual_seed(3))
    payload = comp.encode(x, [torch.Generator().manual_seed(i) for i in range(7)])
    dense = comm.exchange_increment(payload, comp, 0)
    assert torch.allclose(dense, comm.exchange(payload, comp, 0, dtype=torch.float64) - comp.decode(payload).double(),
                          atol=1e-12)
    hi, lo = torch.zeros(7, 50), torch.zeros(7, 50)
    compensated.accumulate(hi, lo, comm.exchange_increment(payload, comp, 0, sparse=comp.decode_sparse(payload)))
    assert (compensated.value(hi, lo) - dense).abs().max().item() < 1e-13
    # the dense form, accumulated in blocks that do not divide k·d, gives the same pair
    h2, l2 = torch.zeros(7, 50), torch.zeros(7, 50)
    monkeypatch.setattr(compensated, "BLOCK", 16)
    compensated.accumulate(h2, l2, dense.clone())
    compensated.accumulate(h2, l2, dense.clone())
    compensated.accumulate(hi, lo, comm.exchange_increment(payload, comp, 0, sparse=comp.decode_sparse(payload)))
    assert torch.equal(h2, hi) and (compensated.value(h2, l2) - 2 * dense).abs().max().item() < 1e-13
    assert comm.bytes_sent.tolist() == (4 * payload.nbytes_per_node() * torch.as_tensor(topo.out_degree(0))).tolist()


def test_choco_sparse_path_follows_the_dense_path(tmp_path):
    """Choco-SGD with top-k: the scatter path (decode_sparse) and the dense decode + W @ q path
    give the same iterates until a top-k tie breaks differently (1-ulp differences in u), and
    the same consensus point after 3,000 push-sum rounds."""
    from decent8.algorithms import make_algorithm
    from decent8.compression import make_compressor
    from decent8.layout import ParamLayout
    topo = _irregular_graph(tmp_path)
    out = []
    for sparse in (True, False):
        comp = make_compressor("topk", ParamLayout.single(40), ratio=0.9)
        if not sparse:
            comp.decode_sparse = lambda payload: None
        algo = make_algorithm("choco", SimulatorCommunicator(topo), comp, 0.2, True)
        z = torch.randn(7, 40, generator=torch.Generator().manual_seed(0)) + 3.0
        algo.init_state(z)
        early = None
        for t in range(3000):
            algo.step(z, t)
            if t == 9:
                early = (z.clone(), algo.residual)
        out.append((early, algo.debiased(z), algo.residual))
    (ea, xa, ua), (eb, xb, ub) = out
    assert (ea[0] - eb[0]).abs().max().item() < 1e-6 and (ea[1] - eb[1]).abs().max().item() < 1e-12
    assert (xa - xa.mean(0)).abs().max().item() < 1e-5 and (xa - xb).abs().max().item() < 5e-5
    assert ua.sum(0).abs().max().item() < 1e-12 and ub.sum(0).abs().max().item() < 1e-12   # Σ_i u_i = 0
