"""An algorithm's own options are its constructor's keyword arguments (``algorithm.<kwarg>=value``,
kept in ``algorithm.params``; gut and qg_gutm: ``algorithm.mu``), checked against its signature
and type hints; the config schema has no field of one algorithm. Older configs
(``algorithm: {mu: null}``) load, and ``algorithm.mu`` for an algorithm without μ is one line."""
from __future__ import annotations

import dataclasses

import pytest

from decent8.algorithms import algorithm_class
from decent8.algorithms.dpsgd import DPSGD
from decent8.config import AlgorithmConfig, apply_options, from_dict, load_config, to_dict
from decent8.errors import ConfigError
from decent8.train.resolve import resolve

BASE = ["model=mlp", "nodes=4", "compression=identity", "topology=ring"]


def test_the_schema_has_no_field_of_one_algorithm():
    assert [f.name for f in dataclasses.fields(AlgorithmConfig)] == [
        "name", "gamma", "push_sum", "consensus_rounds", "consensus", "params"]


@pytest.mark.parametrize("given, expected", [
    (["algorithm=gut"], {"mu": 0.1}),                               # the constructor's default, recorded
    (["algorithm=gut", "algorithm.mu=0.3"], {"mu": 0.3}),
    (["algorithm=qg_gutm", "algorithm.mu=1"], {"mu": 1.0}),         # an int read as float
    (["algorithm=gut", "algorithm.mu=null"], {"mu": 0.1}),          # null: not set
    (["algorithm=dpsgd", "algorithm.mu=null"], {}),                 # ... and dropped where there is no μ
    (["algorithm=choco", "compression=topk"], {}),
])
def test_mu_lands_in_the_constructors_keyword_arguments(given, expected):
    r = resolve(load_config(None, [*BASE, *given]))
    assert dict(r.algorithm.params) == expected
    assert [type(v) for v in r.algorithm.params.values()] == [type(v) for v in expected.values()]
    assert resolve(from_dict(to_dict(r))) == r                        # config.yaml resolves to itself


def test_the_built_algorithm_has_the_configured_mu():
    from decent8.train.build import build

    c = build(resolve(load_config(None, [*BASE, "algorithm=gut", "algorithm.mu=0.3", "epochs=1"])))
    assert type(c.algorithm).__name__ == "GUT" and c.algorithm.mu == 0.3


def test_an_older_config_yaml_a_yaml_group_and_the_python_api(tmp_path):
    old = to_dict(load_config(None, BASE))
    old["algorithm"] = {"name": "gut", "gamma": None, "push_sum": "auto", "consensus_rounds": 51,
                        "consensus": "compressed", "mu": None, "params": {}}   # as every older run stored it
    assert resolve(from_dict(old)).algorithm.params == {"mu": 0.1}
    old["algorithm"].update(name="dpsgd")
    assert resolve(from_dict(old)).algorithm.params == {}
    f = tmp_path / "c.yaml"
    f.write_text("algorithm: {name: gut, mu: 0.3}\n")
    assert load_config(str(f)).algorithm.params == {"mu": 0.3}
    assert apply_options(load_config(None, BASE), {"algorithm": {"name": "gut", "mu": 0.3}}).algorithm.params == \
        {"mu": 0.3}


def test_mu_for_an_algorithm_without_it_is_one_line_naming_its_options():
    with pytest.raises(ConfigError) as e:
        resolve(load_config(None, [*BASE, "algorithm=dpsgd", "algorithm.mu=0.5"]))
    assert str(e.value) == ("algorithm.mu: 'dpsgd' has no parameter 'mu'; its parameters: none (mu is an option "
                            "of algorithm=gut, qg_gutm)")
    with pytest.raises(ConfigError, match=r"^algorithm.mu: must be float \(algorithm=gut\), got 'x'$"):
        resolve(load_config(None, [*BASE, "algorithm=gut", "algorithm.mu=x"]))
    with pytest.raises(ConfigError, match=r"^algorithm.mu: the tracking scale μ must be in \[0, 1\]"):
        from decent8.train.build import build
        build(resolve(load_config(None, [*BASE, "algorithm=gut", "algorithm.mu=1.5", "epochs=1"])))


class _Periodic(DPSGD):
    """A user's algorithm: a constructor keyword (``hop``) and a declared option (``period``)."""
    name = "periodic"
    params = {"period": 4}

    def __init__(self, *args, hop: int = 2, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.hop = hop


def test_constructor_keywords_and_declared_params_are_told_apart():
    assert _Periodic.split_params({"hop": 3, "period": 8}) == ({"hop": 3}, {"period": 8})
    assert _Periodic.split_params({}) == ({"hop": 2}, {})             # the default, as config.yaml records it
    with pytest.raises(ConfigError, match=r"^algorithm.hop: must be int \(algorithm=periodic\), got 2.5$"):
        _Periodic.split_params({"hop": 2.5})
    with pytest.raises(ConfigError, match=r"^algorithm.perod: 'periodic' has no parameter 'perod'; its parameters: "
                                          r"hop, period \(did you mean 'period'\?\)$"):
        _Periodic.split_params({"perod": 8})
    assert algorithm_class("marsit").split_params({}) == ({}, {})    # η_s, K …: read from the allreduce group


def test_decent8_list_shows_the_algorithms_own_options():
    from decent8.cli.inspect_cmds import algorithm_option_list
    assert algorithm_option_list() == {"gut": "mu=0.1", "qg_gutm": "mu=0.1"}
