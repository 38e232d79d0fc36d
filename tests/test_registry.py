"""decent8.registry: one registry type for every component kind.

A built-in-style algorithm, compressor, topology and model are each one new file in a
temporary package (registered by decorator when imported) and train through
``decent8.train(...)``; a user's compressor and topology named by import path receive their
own options from the command line (``compression.<kwarg>=value``); the registry's names,
aliases, one-line errors and the constructor-keyword checks."""
from __future__ import annotations

import contextlib
import importlib
import io
import json
import sys
import textwrap

import pytest

import decent8
from decent8 import registry as reg
from decent8.errors import ConfigError

FILES = {
    # a new algorithm: D-PSGD that moves half way to the neighbour average (x ← x½ + γ/2 (W x½ − x½))
    "half_dpsgd.py": '''
        import decent8
        from decent8.algorithms import DPSGD, AlgorithmInfo

        @decent8.register("algorithm", "half_dpsgd", info=AlgorithmInfo())   # a gossip algorithm that may compress
        class HalfDPSGD(DPSGD):
            name = "half_dpsgd"

            def _gossip(self, z, step):
                mixed = self.comm.exchange(self._encode(z), self.compressor, step)
                z.add_(mixed - z, alpha=0.5 * self.gamma)
        ''',
    # a new compressor with an option of its own: values as float16 (2 bytes) or float32 (4 bytes)
    "cast.py": '''
        import torch
        import decent8
        from decent8.compression import Compressor, Payload

        @decent8.register("compression", "cast")
        class Cast(Compressor):
            def __init__(self, layout, bytes_per_value: int = 4):
                super().__init__(layout)
                if bytes_per_value not in (2, 4):
                    raise ValueError(f"bytes_per_value must be 2 or 4, got {bytes_per_value}")
                self.dtype = torch.float16 if bytes_per_value == 2 else torch.float32

            @classmethod
            def suggest_gamma(cls, scale, ratio):
                return 1.0      # rounding only: delta = 1 up to float16's 2^-11

            def encode(self, x, generators=None):
                return Payload({"values": x.to(self.dtype)})

            def decode(self, payload):
                return payload.tensors["values"].to(torch.float32)

            def spec(self):
                return {"values": ((self.layout.dim,), self.dtype)}
        ''',
    # a new topology with an option of its own: node i sends to i + hop (mod n)
    "skip_ring.py": '''
        import numpy as np
        import decent8

        @decent8.register("topology", "skip_ring")
        def skip_ring(n: int, hop: int = 1):
            a = np.zeros((n, n), dtype=bool)
            for i in range(n):
                a[(i + hop) % n, i] = True          # a[receiver, sender]
            return a
        ''',
    # a new model: one linear layer
    "linear_model.py": '''
        import math
        from torch import nn
        from decent8.models import ModelArgs, register_model

        @register_model("one_linear", norms=("none",))
        def one_linear(a: ModelArgs) -> nn.Module:
            return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(a.input_shape), a.num_classes))
        ''',
}

BASE = dict(nodes=4, epochs=1, device="cpu", progress=False, checkpoint=False, tensorboard="false", seed=3,
            **{"data.name": "digits", "data.subset": 0.25, "algorithm.consensus_rounds": 2, "sim.chunk": "1",
               "sim.compile": "false"})


@pytest.fixture()
def package(tmp_path, monkeypatch):
    """``regpkg``: the four files, importable from ``tmp_path``; imported (so registered)."""
    pkg = tmp_path / "regpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for name, text in FILES.items():
        (pkg / name).write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(tmp_path))
    modules = [importlib.import_module(f"regpkg.{n[:-3]}") for n in FILES]
    yield tmp_path
    for kind, name in (("algorithm", "half_dpsgd"), ("compression", "cast"), ("topology", "skip_ring"),
                       ("model", "one_linear")):
        reg.registry(kind).unregister(name)
    for m in modules:
        sys.modules.pop(m.__name__, None)
    sys.modules.pop("regpkg", None)


def _train(tmp_path, name, **options):
    result = decent8.train(out_dir=str(tmp_path / "runs"), name=name, **{**BASE, **options})
    return result[0], result


@pytest.mark.slow   # two training runs (> 10 s on the shared 2 cores)
def test_one_new_file_each_trains_through_the_api(package):
    for kind, name in (("algorithm", "half_dpsgd"), ("compression", "cast"), ("topology", "skip_ring"),
                       ("model", "one_linear")):
        assert name in reg.registry(kind).names() and name == reg.registry(kind).names()[-1]   # after the built-ins
    s, _ = _train(package, "new", algorithm="half_dpsgd", compression="cast", topology="skip_ring",
                  model="one_linear", **{"compression.bytes_per_value": 4, "topology.hop": 3,
                                         "algorithm.gamma": 1.0, "algorithm.push_sum": "false"})
    d = 64 * 10 + 10                                              # one linear layer on 8 x 8 digits, 10 classes
    assert s["parameters"] == d and s["message_bytes"] == 4 * d   # float32 values on the wire
    assert s["algorithm"] == "half_dpsgd" and s["topology"] == "skip_ring" and s["steps"] > 5
    # the new rule is what ran: half_dpsgd at γ = 1 with exact float32 messages is D-PSGD at γ = 1/2
    ref, _ = _train(package, "ref", algorithm="dpsgd", compression="identity", topology="skip_ring",
                    model="one_linear", **{"topology.hop": 3, "algorithm.gamma": 0.5, "algorithm.push_sum": "false"})
    assert s["node_accuracies"] == ref["node_accuracies"] and s["mean_node_loss"] == pytest.approx(ref["mean_node_loss"], rel=1e-6)


def test_the_topology_receives_its_option(package):
    from decent8.config import load_config
    from decent8.topology import topology_from_config

    cfg = load_config(None, ["topology=skip_ring", "topology.hop=3", "nodes=5"])
    assert cfg.topology.params == {"hop": 3}
    topo = topology_from_config(cfg.topology, cfg.nodes, cfg.seed)
    assert [topo.in_neighbors(i) for i in range(5)] == [[2], [3], [4], [0], [1]]   # i receives from i − 3
    with pytest.raises(ConfigError, match=r"^topology: node 1 cannot be reached from node 0"):   # hop 2 on 4 nodes: two cycles
        topology_from_config(load_config(None, ["topology=skip_ring", "topology.hop=2", "nodes=4"]).topology, 4)


CLI = ["train", "nodes=4", "epochs=1", "device=cpu", "model=mlp", "model.width=8", "data.subset=0.25",
       "algorithm=choco", "compression=regpkg.cast:Cast", "topology=regpkg.skip_ring:skip_ring",
       "algorithm.push_sum=false", "algorithm.consensus_rounds=0", "sim.chunk=1", "sim.compile=false", "out_dir=runs",
       "--quiet"]


def _cli(package, monkeypatch, *args: str) -> tuple[int, list[str]]:
    """``decent8 train`` in-process from ``package``'s folder, the compressor and topology named by
    import path (not by their registered names): exit code and stderr lines."""
    from decent8.cli.main import main

    monkeypatch.chdir(package)
    reg.compressors.unregister("cast")
    reg.topologies.unregister("skip_ring")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main([*CLI, *args])
    return code, err.getvalue().strip().splitlines()


@pytest.mark.slow   # a training run (> 10 s on the shared 2 cores)
def test_user_components_get_their_own_options_from_the_command_line(package, monkeypatch):
    code, err = _cli(package, monkeypatch, "compression.bytes_per_value=2", "topology.hop=3", "name=cli")
    assert code == 0, err
    s = json.loads((package / "runs" / "cli" / "summary.json").read_text())
    assert s["message_bytes"] == 2 * s["parameters"]                     # float16 values: the option arrived
    saved = (package / "runs" / "cli" / "config.yaml").read_text()
    assert "bytes_per_value: 2" in saved and "hop: 3" in saved         # config.yaml reruns with them


def test_a_user_components_options_are_checked_against_its_signature(package, monkeypatch):
    for bad, says in [("compression.bytes_per_value=two", "compression.bytes_per_value: must be int"),
                      ("compression.bytes_per_valu=2", "compression.bytes_per_valu: unknown option of compression="
                                                       "regpkg.cast:Cast (did you mean 'bytes_per_value'?)"),
                      ("compression.bytes_per_value=3", "compression: regpkg.cast:Cast failed: ValueError: "
                                                        "bytes_per_value must be 2 or 4, got 3"),
                      ("topology.hops=3", "topology.hops: unknown option of topology=regpkg.skip_ring:skip_ring")]:
        code, lines = _cli(package, monkeypatch, bad, "name=bad")
        assert code == 2 and len(lines) == 1 and says in lines[0], lines
    assert not (package / "runs" / "bad").exists()


def test_builtin_components_refuse_options_their_constructors_lack():
    from decent8.config import load_config

    with pytest.raises(ConfigError, match=r"^compression.bitz: unknown option \(did you mean 'bits'\?\); allowed in "
                                          r"compression \(compression=topk\)"):
        load_config(None, ["compression.bitz=4"])
    with pytest.raises(ConfigError, match=r"^topology.weigths: unknown option \(did you mean 'weights'\?\)"):
        load_config(None, ["topology=ring", "topology.weigths=uniform"])


def test_a_compressor_without_a_declared_contraction_needs_gamma(package):
    from decent8.compression import Compressor
    from decent8.train.resolve import default_gamma

    class Bare(Compressor):
        def encode(self, x, generators=None): ...
        def decode(self, payload): ...
        def spec(self): ...

    decent8.register("compression", "bare", Bare)
    try:
        with pytest.raises(ConfigError, match=r"^algorithm.gamma: the compressor Bare declares no contraction"):
            default_gamma("choco", "bare", 0.99)
    finally:
        reg.compressors.unregister("bare")
    assert default_gamma("choco", "cast", 0.0) == 1.0                  # declared: δ = 1
    assert default_gamma("choco", "topk", 0.99) == 0.05 and default_gamma("deepsqueeze", "topk", 0.99) == 0.01
    assert default_gamma("choco", "randomk", 0.9) == pytest.approx(0.1) and default_gamma("choco", "sign", 0.5) == 0.1


def test_names_aliases_and_one_line_errors():
    r = reg.Registry("widget", "widget.name")
    r.register("b", lambda: 2, order=1)

    @r.register("a", aliases=("alpha",), colour="red")
    def make_a():
        return 1

    assert r.names() == ("b", "a") and r.lookup("alpha")() == 1 and r["a"].colour == "red"
    assert "alpha" in r and "c" not in r and r.get("c") is None
    with pytest.raises(ConfigError) as e:
        r.lookup("aa")
    assert str(e.value) == "widget.name: unknown value 'aa' (did you mean 'a'?); allowed: a, alpha, b, pkg.module:Name"
    assert reg.algorithms.lookup("choco").__name__ == "ChocoSGD"
    with pytest.raises(ConfigError, match="'choco' is a built-in algorithm; register yours under another name"):
        decent8.register("algorithm", "choco", type("Mine", (reg.algorithms.lookup("dpsgd"),), {}))
    with pytest.raises(ConfigError, match=r"^kind: unknown value 'widgets'"):
        decent8.register("widgets", "x", object)
    # built-ins in their documented order; every kind registered at import of its subpackage
    assert reg.algorithms.names()[:3] == ("dpsgd", "deepsqueeze", "choco")
    assert reg.compressors.names() == ("identity", "topk", "topk_int8", "randomk", "quantize", "sign")
    assert reg.compressors.aliases() == {"none": "identity", "int8": "quantize"}
    assert reg.optimizers.names() == ("local", "qgm", "adam", "adamw")
    assert reg.losses.names() == ("cross_entropy", "logistic", "mse")
    assert reg.datasets.names()[0] == "digits" and "mnist" in reg.datasets
    assert reg.attacks.names()[0] == "none" and reg.aggregators.names()[0] == "mean"
    assert reg.topologies.names()[:2] == ("directed_ring", "ring") and "resnet20" in reg.models


def test_constructor_keywords_are_checked_against_type_hints():
    def make(n: int, *, rate: float = 0.5, mode: str = "a", flag: bool = False, size: "int | None" = None):
        return (n, rate, mode, flag, size)

    assert reg.construct(make, 3, given={"rate": 1, "size": None}, group="g", what="g=make") == (3, 1.0, "a", False, None)
    assert reg.construct(make, 3, config={"mode": "b", "unused": 1}, group="g", what="g=make")[2] == "b"
    for given, says in [({"rate": "fast"}, "g.rate: must be float"), ({"flag": 1}, "g.flag: must be bool"),
                        ({"size": 1.5}, "g.size: must be int | None"), ({"colour": 1}, "g.colour: unknown option")]:
        with pytest.raises(ConfigError, match="^" + says.replace("|", r"\|")):
            reg.construct(make, 3, given=given, group="g", what="g=make")


def test_a_registry_finds_every_module_of_its_package(tmp_path, monkeypatch):
    """How a new built-in is one new file: the registry imports each module of its subpackage
    on first lookup (``discover``), so a file that registers itself needs no other edit."""
    (tmp_path / "things.py").write_text("from decent8.registry import Registry\n"
                                        "THINGS = Registry('thing', package='thingpkg', discover=True)\n")
    (tmp_path / "thingpkg").mkdir()
    (tmp_path / "thingpkg" / "__init__.py").write_text("")
    for name in ("first", "second"):
        (tmp_path / "thingpkg" / f"{name}.py").write_text(f"from things import THINGS\n"
                                                            f"THINGS.register('{name}', lambda: '{name}')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        import things
        assert "thingpkg.first" not in sys.modules
        assert things.THINGS.names() == ("first", "second") and things.THINGS.lookup("second")() == "second"
    finally:
        for m in ("things", "thingpkg", "thingpkg.first", "thingpkg.second"):
            sys.modules.pop(m, None)
