"""Per-edge messages from the communicator, the choice of Byzantine nodes, and the one-line
refusals of ``byzantine.*`` (built through ``build(load_config(...))``)."""
from __future__ import annotations

import textwrap

import pytest
import torch

from decent8.byzantine import pick_nodes
from decent8.comm import SimulatorCommunicator
from decent8.compression import make_compressor
from decent8.config import load_config
from decent8.errors import ConfigError
from decent8.layout import ParamLayout
from decent8.topology import make_topology
from decent8.train.build import build


class Recorder:
    def __init__(self):
        self.seen = []

    def on_traffic(self, kind, step, nbytes, dst):
        self.seen.append((kind, step, nbytes))


@pytest.mark.parametrize("name,n,extra", [("edge_list", 3, "0 1\n0 2\n1 2\n2 0\n"), ("torus", 20, None),
                                          ("ring", 24, None)])
def test_exchange_messages_are_the_terms_of_exchange_and_cost_the_same_bytes(tmp_path, name, n, extra):
    kw = {}
    if extra:
        (tmp_path / "g.txt").write_text(extra)
        kw["path"] = str(tmp_path / "g.txt")
    if name == "torus":
        kw.update(rows=4, cols=5)
    topo = make_topology(name, n, **kw)
    layout = ParamLayout.single(7)
    comp = make_compressor("quantize", layout, bits=8)
    x = torch.randn(n, 7)
    payload = comp.encode(x)
    plain, robust = SimulatorCommunicator(topo), SimulatorCommunicator(topo)
    rec_p, rec_r = plain.observe(Recorder()), robust.observe(Recorder())
    mixed = plain.exchange(payload, comp, step=0)
    msgs = robust.exchange_messages(payload, comp, step=0)
    q = comp.decode(payload)
    w = torch.tensor(topo.weights_np(0))
    for i in range(n):
        js = [j for j in range(n) if j != i and w[i, j] != 0]
        assert msgs.src[i][msgs.mask[i]].tolist() == js                       # in-neighbours, by id
        assert torch.equal(msgs.received[i][msgs.mask[i]], q[js])
        assert msgs.weight[i][msgs.mask[i]].tolist() == pytest.approx(w[i, js].tolist())
        assert msgs.self_weight[i].item() == pytest.approx(w[i, i].item())
    total = msgs.self_weight.float()[:, None] * msgs.own + (msgs.weight.float()[..., None] * msgs.received).sum(1)
    torch.testing.assert_close(total, mixed, rtol=1e-5, atol=1e-6)
    assert torch.equal(plain.bytes_sent, robust.bytes_sent) and rec_p.seen == rec_r.seen == [("gossip", 0, comp.nbytes())]
    assert robust.paths["messages"] == 1


def test_pick_nodes_count_fraction_and_list():
    a = pick_nodes(3, 16, seed=1)
    assert a == pick_nodes(3, 16, seed=1) and len(a) == 3 and a == sorted(a)
    assert a != pick_nodes(3, 16, seed=2)
    assert pick_nodes(0.25, 16, seed=1) == pick_nodes(4, 16, seed=1)
    assert pick_nodes([5, 1], 16, 0) == [1, 5] and pick_nodes("[5, 1]", 16, 0) == [1, 5]
    assert pick_nodes(0, 16, 0) == []
    for bad, what in [(16, "0..15"), ([3, 20], "outside"), (1.5, "fraction"), ("many", "count")]:
        with pytest.raises(ConfigError, match=what):
            pick_nodes(bad, 16, 0)


BASE = ["data.name=digits", "model=mlp", "model.width=8", "nodes=8", "device=cpu", "epochs=1", "algorithm=dpsgd",
        "compression=identity", "checkpoint=false", "progress=false", "tensorboard=false", "skew=0"]


def one_line(overrides, match):
    with pytest.raises(ConfigError, match=match) as e:
        build(load_config(None, [*BASE, *overrides]))
    assert "\n" not in str(e.value)


def test_a_graph_that_violates_the_rule_is_refused_in_one_line():
    one_line(["topology=ring", "byzantine.nodes=1", "byzantine.aggregator=trimmed_mean", "byzantine.b=1"],
             r"byzantine.aggregator: trimmed_mean assumes in-degree ≥ 2b \+ 1 = 3 \(b = 1\), but honest node \d+ "
             r"has in-degree 2 on topology 'ring'")
    # the node is named by its id, not by its place among the honest nodes: Byzantine 0, 2 and 4
    # leave node 1 with in-degree 2 on the ring, and honest node 1 is the first one refused
    one_line(["topology=ring", "byzantine.nodes=[0,2,4]", "byzantine.aggregator=trimmed_mean", "byzantine.b=1"],
             r"but honest node 1 has in-degree 2")


@pytest.mark.parametrize("overrides,match", [
    (["algorithm=deepsqueeze", "compression=topk", "byzantine.nodes=1", "byzantine.attack=sign_flip"],
     "'deepsqueeze' mixes what no rule is defined on .*: use algorithm=dpsgd or choco"),
    (["algorithm=sgp", "byzantine.aggregator=median"], "use algorithm=dpsgd or choco"),
    (["algorithm=choco_push", "compression=topk", "byzantine.aggregator=median"], "use algorithm=dpsgd or choco"),
    (["byzantine.attack=fly"], "unknown attack 'fly'"),
    (["byzantine.aggregator=krum"], "unknown rule 'krum'"),
    (["topology=ring", "byzantine.aggregator=median", "algorithm.consensus=exact"], "algorithm.consensus"),
    (["topology=ring", "byzantine.aggregator=median", "algorithm.push_sum=true"], "push-sum"),
])
def test_what_is_not_defined_is_refused_in_one_line(overrides, match):
    one_line(overrides, match)


def test_user_attack_and_rule_by_import_path(tmp_path, monkeypatch):
    (tmp_path / "lies.py").write_text(textwrap.dedent("""
        import torch

        class Zeros:
            def craft(self, messages, byzantine, step):
                return torch.where(byzantine[..., None], torch.zeros(()), messages.received)

        class Plain:
            def __init__(self, b, tau):
                self.b = b

            def aggregate(self, m):
                w = m.weight.float() * m.mask.float()
                return m.self_weight.float()[:, None] * m.own + (w[..., None] * m.received).sum(1)
    """))
    monkeypatch.chdir(tmp_path)
    c = build(load_config(None, [*BASE, "topology=ring", "byzantine.nodes=[2]", "byzantine.attack=lies:Zeros",
                                 "byzantine.aggregator=lies:Plain"]))
    z = torch.randn(8, c.model.dim)
    w = torch.tensor(c.topology.weights_np(0), dtype=torch.float32)
    sent = z.clone()
    expect = w @ sent
    for i in (1, 3):                                                 # node 2's neighbours receive zeros from it
        expect[i] = expect[i] - w[i, 2] * z[2]
    c.algorithm.step(z, 0)
    torch.testing.assert_close(z, expect, rtol=1e-5, atol=1e-5)
    assert c.byzantine.record() == {"nodes": [2], "attack": "lies:Zeros", "aggregator": "lies:Plain", "b": 1}


def test_label_flip_trains_the_byzantine_nodes_on_flipped_labels(monkeypatch):
    from decent8.train.engine import Engine
    c = build(load_config(None, [*BASE, "topology=ring", "byzantine.nodes=[1, 6]", "byzantine.attack=label_flip"]))
    assert c.byzantine.robust is None and c.byzantine.flips_labels    # honest messages: plain gossip
    engine = Engine(c.model, c.algorithm, c.optimizer, c.comm, c.x0)
    engine.honest = c.byzantine.honest_mask(c.comm.local_nodes, c.device)
    engine.flip_labels = (~engine.honest, 10)
    seen = []
    real = c.model.loss_and_grad
    monkeypatch.setattr(c.model, "loss_and_grad", lambda x, xb, yb, **kw: (seen.append(yb.clone()), real(x, xb, yb, **kw))[1])
    y = torch.arange(8 * 3).reshape(8, 3) % 10
    engine.train_step(torch.zeros(8, 3, 1, 8, 8), y, lr=0.0)
    expect = y.clone()
    expect[[1, 6]] = 9 - y[[1, 6]]
    assert torch.equal(seen[0], expect)


def test_a_resumed_run_imports_a_users_attack_or_rule_only_when_named_again(tmp_path):
    from decent8.train.resume_trust import check_resume_code, restated_code
    cfg = load_config(None, ["byzantine.attack=lies:Zeros", "byzantine.aggregator=lies:Plain"])
    with pytest.raises(ConfigError, match=r"names code \(byzantine.attack=lies:Zeros\)"):
        check_resume_code(cfg, tmp_path, {}, trust=False)
    named = restated_code(["byzantine.attack=lies:Zeros", "byzantine.aggregator=lies:Plain"], tmp_path)
    check_resume_code(cfg, tmp_path, named, trust=False)
