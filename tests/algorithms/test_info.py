"""An algorithm's facts are its registered :class:`~decent8.algorithms.AlgorithmInfo` record
(decent8.algorithms.info), not class attributes: the readers (resolve, the catalogue, the
reports, the cost model) read the record, and an algorithm registered without one, or named
by import path, gets its nearest registered base class's (without the display name) or its
family's."""
from __future__ import annotations

import dataclasses

import pytest

import decent8
from decent8.algorithms import AlgorithmInfo, algorithm_class, algorithm_info, display_name, names_of
from decent8.algorithms.allreduce import AllReduceAlgorithm
from decent8.algorithms.dpsgd import DPSGD
from decent8.algorithms.info import ALLREDUCE, GOSSIP
from decent8.config import load_config
from decent8.cost.memory import buffers_for
from decent8.errors import ConfigError
from decent8.registry import algorithms
from decent8.train.resolve import resolve_with_defaults

FACTS = {f.name for f in dataclasses.fields(AlgorithmInfo)}


@pytest.fixture
def registered():
    names: list[str] = []

    def add(name, cls, **kw):
        decent8.register("algorithm", name, cls, **kw)
        names.append(name)
        return cls
    yield add
    for n in names:
        algorithms.unregister(n)


def test_no_builtin_algorithm_class_carries_a_fact():
    """The update-rule classes hold no record field (nor the hooks that read them)."""
    hooks = {"label", "run_label", "headline", "wire_label", "divergence_knobs", "int8_wire", "optimizer_for",
             "default_gamma", "topology_gamma", "resolve_push_sum", "check_compression", "own_wire_format"}
    for name in algorithms.names():
        for klass in algorithms[name].obj.__mro__:
            if klass.__module__.startswith("decent8.algorithms"):
                assert not (set(vars(klass)) & (FACTS | hooks)), (name, klass, set(vars(klass)) & (FACTS | hooks))


def test_builtin_records_say_what_the_readers_used_to_read():
    sgp, dpsgd = algorithm_info("sgp"), algorithm_info("dpsgd")
    assert (dpsgd.display_name, dpsgd.forced_push_sum, dpsgd.robust_mixing, dpsgd.int8_models) == ("D-PSGD", None, True, True)
    assert (sgp.display_name, sgp.forced_push_sum, sgp.robust_mixing, sgp.supports_compression) == ("SGP", True, False, False)
    assert algorithm_info("marsit").defaults == {"optimizer.momentum": 0.0}
    assert algorithm_info("marsit").wire_format == "sign-bits" and algorithm_info("psgd").wire_format == "fp32"
    assert algorithm_info("qg_gutm").optimizer_for("qg_gutm", "local") == "qgm"
    assert algorithm_info("gut").options == {} and algorithm_info("adpsgd").options == {"seed": "seed"}
    assert list(algorithm_class("gut").constructor_options()) == ["mu"]   # algorithm.mu: a constructor keyword
    assert algorithm_class("dpsgd").constructor_options() == {} and algorithm_class("marsit").constructor_options() == {}
    assert buffers_for("choco")[1] == 2 and buffers_for("dpsgd")[1] == 0 and buffers_for("marsit")[1] == 1
    assert names_of("ring all-reduce") == ("psgd", "marsit", "signsgd", "ef_signsgd")
    assert display_name("deepsqueeze") == "DS" and display_name("gt") == "gt" and display_name("a.b:C") == "a.b:C"


def test_record_methods():
    g = algorithm_info("choco")
    assert g.run_label("choco", "topk") == "choco/topk" and g.wire_label("topk") == "topk"
    assert ALLREDUCE.run_label("psgd", "topk", "-") == "psgd" and ALLREDUCE.wire_label("topk") == "fp32"
    assert g.divergence_knobs(True) == ["algorithm.gamma"]
    assert algorithm_info("signsgd").divergence_knobs(False) == ["optimizer.lr", "allreduce.eta_s"]
    assert g.headline({"algorithm": "choco", "push_sum": True, "gamma": 0.05, "compression": "topk"}) \
        == "choco (push-sum, γ=0.05) · topk"
    assert g.resolve_push_sum("choco", "auto", False) is True and g.resolve_push_sum("choco", "auto", True) is False
    with pytest.raises(ConfigError, match=r"^algorithm.push_sum: 'psgd' is an all-reduce algorithm"):
        ALLREDUCE.resolve_push_sum("psgd", "true", True)
    with pytest.raises(ConfigError, match=r"^optimizer.kind: quasi-global momentum is not defined for 'gt'"):
        algorithm_info("gt").optimizer_for("gt", "qgm")
    with pytest.raises(ConfigError, match=r"^precision: algorithm 'd2' exchanges exact fp32 models"):
        algorithm_info("d2").int8_wire("d2", "identity")
    assert algorithm_info("dpsgd").int8_wire("dpsgd", "identity") and not g.int8_wire("choco", "topk")
    with pytest.raises(ConfigError, match=r"^algorithm: AlgorithmInfo.family must be one of gossip, ring all-reduce"):
        AlgorithmInfo(family="tree")


def test_a_user_algorithm_without_a_record_gets_its_bases_or_its_familys(registered):
    """A subclass of D-PSGD registered without a record has D-PSGD's facts but not its display
    name; a new all-reduce algorithm gets the family's record."""
    class Half(DPSGD):
        name = "half"

    class Ring(AllReduceAlgorithm):
        name = "ring_mean"

        def aggregate(self, update, step, lr):
            return self.allreduce.mean(update)
    registered("half", Half)
    registered("ring_mean", Ring)
    assert algorithm_info("half") == dataclasses.replace(algorithm_info("dpsgd"), display_name="")
    assert not algorithm_info("half").supports_compression and display_name("half") == "half"
    assert algorithm_info("ring_mean") is ALLREDUCE and "ring_mean" in names_of("ring all-reduce")
    assert "half" in names_of("gossip") and "half" not in decent8.algorithms.display_order()


def test_a_user_record_is_what_resolve_and_the_reports_read(registered):
    class Mine(DPSGD):
        name = "mine"
    registered("mine", Mine, info=AlgorithmInfo(display_name="Mine", defaults={"optimizer.momentum": 0.25},
                                                topk_gamma_scale=3.0))
    cfg = load_config(None, ["algorithm=mine", "compression=topk", "compression.ratio=0.9", "model=mlp", "nodes=4"])
    resolved, filled = resolve_with_defaults(cfg)
    assert filled["optimizer.momentum"] == 0.25 and resolved.optimizer.momentum == 0.25
    assert resolved.algorithm.gamma == pytest.approx(3.0 * (1 - 0.9))     # its scale for top-k, not the default 5
    assert display_name("mine") == "Mine" and "mine" in decent8.algorithms.display_order()


def test_a_record_of_the_wrong_type_is_one_line(registered):
    class Odd(DPSGD):
        name = "odd"
    registered("odd", Odd, info={"display_name": "Odd"})
    with pytest.raises(ConfigError, match=r"^algorithm: 'odd' is registered with info=dict, not an "):
        algorithm_info("odd")


def test_an_import_path_finds_the_record_its_class_is_registered_with(tmp_path, monkeypatch):
    assert algorithm_info("decent8.algorithms.dpsgd:DPSGD") is algorithm_info("dpsgd")
    (tmp_path / "infopkg_alg.py").write_text("from decent8.algorithms.choco import ChocoSGD\n"
                                             "class Periodic(ChocoSGD):\n    name = 'periodic'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    periodic = algorithm_info("infopkg_alg:Periodic")          # not registered: Choco's facts, not its name
    assert periodic == dataclasses.replace(algorithm_info("choco"), display_name="") and periodic.state_buffers == 2
    (tmp_path / "infopkg_new.py").write_text("from decent8.algorithms.base import GossipAlgorithm\n"
                                             "class New(GossipAlgorithm):\n    name = 'new'\n")
    assert algorithm_info("infopkg_new:New") is GOSSIP           # a new gossip algorithm: the family's record
