"""A topology's options are its function's keyword arguments (``topology.<kwarg>=value``, kept in
``topology.params``); the config schema holds only ``name``, ``weights`` (W of every graph) and
``params``. The names the group's schema once had (``rows``, ``cols``, ``path``, ``undirected``,
``time_varying``, ``degree``) keep working from the command line, YAML, the Python API, stored
config.yaml files and the presets, and a stored config resolves to the graph it ran on."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from decent8.config import SHARED_OPTIONS, TopologyConfig, apply_options, from_dict, load_config, to_dict
from decent8.errors import ConfigError
from decent8.registry import keyword_options, topologies
from decent8.topology import topology_from_config, topology_options
from decent8.train.resolve import resolve, resolved_topology

ROOT = Path(__file__).resolve().parents[2]
EDGES = "configs/paper/byzantine_er16.edges"
OPTIONS = SHARED_OPTIONS["topology"]


def _W(topo, rounds: int = 3) -> list[np.ndarray]:
    return [np.asarray(topo.weights_np(t)) for t in range(rounds)]


def test_the_schema_has_no_field_of_one_topology():
    assert [f.name for f in dataclasses.fields(TopologyConfig)] == ["name", "weights", "params"]
    assert set(OPTIONS) == {"rows", "cols", "path", "undirected", "time_varying", "degree"}


@pytest.mark.parametrize("given, expected", [
    ([], {}),                                                                      # directed_ring takes none
    (["topology=torus"], {"rows": None, "cols": None}),                            # the squarest shape
    (["topology=torus", "nodes=16", "topology.rows=2"], {"rows": 2, "cols": None}),
    (["topology=erdos_renyi"], {"degree": 4.0}),                                   # the function's default
    (["topology=erdos_renyi", "topology.degree=3"], {"degree": 3.0}),             # an int read as float
    (["topology=base", "topology.degree=null"], {"degree": 1}),                   # null: not set
    (["topology=exponential", "topology.time_varying=true"], {"time_varying": True}),
    (["topology=ring", "topology.rows=null", "topology.undirected=false"], {}),   # "not set" values: dropped
    (["topology=edge_list", f"topology.path={EDGES}", "topology.undirected=true", "nodes=16",
      "topology.weights=metropolis"], {"path": EDGES, "undirected": True}),
])
def test_options_land_in_the_functions_keyword_arguments(given, expected, monkeypatch):
    monkeypatch.chdir(ROOT)
    cfg = load_config(None, ["model=mlp", *given])
    r = resolve(cfg)
    assert dict(r.topology.params) == expected
    assert [type(v) for v in r.topology.params.values()] == [type(v) for v in expected.values()]
    assert resolve(from_dict(to_dict(r))) == r                        # config.yaml resolves to itself
    a, b = topology_from_config(cfg.topology, cfg.nodes, cfg.seed), topology_from_config(r.topology, r.nodes, r.seed)
    assert a.description == b.description
    assert all(np.array_equal(x, y) for x, y in zip(_W(a), _W(b)))   # the same graph, round by round


def test_a_yaml_group_and_the_python_api_land_there_too(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("nodes: 16\ntopology: {name: torus, rows: 4, weights: metropolis}\n")
    cfg = load_config(str(f))
    assert (cfg.topology.weights, cfg.topology.params) == ("metropolis", {"rows": 4})
    api = apply_options(load_config(None, ["nodes=16"]), {"topology": {"name": "torus", "rows": 4}})
    assert api.topology.params == {"rows": 4}
    assert apply_options(load_config(None, ["nodes=16"]), {"topology__rows": 4}).topology.params == {"rows": 4}
    assert topology_from_config(api.topology, 16).description == "torus 4x4"


def test_a_shared_option_a_graph_does_not_take_is_refused_in_one_line():
    """Unlike a compressor, which drops such an option, a topology refuses it at any value but
    its "not set" one (topology.rows=4 for a ring is a mistake)."""
    with pytest.raises(ConfigError, match=r"^topology.rows: only used with topology=torus, not topology=ring$"):
        resolve(load_config(None, ["model=mlp", "topology=ring", "topology.rows=4"]))
    with pytest.raises(ConfigError, match=r"^topology.time_varying: only topology=exponential and hypercube"):
        topology_options("ring", {"time_varying": True})
    with pytest.raises(ConfigError, match=r"^topology.rows: must be int \| None \(topology=torus\), got 'abc'$"):
        resolve(load_config(None, ["model=mlp", "topology=torus", "topology.rows=abc"]))
    with pytest.raises(ConfigError, match=r"^topology.rowz: unknown option \(did you mean 'rows'\?\)"):
        load_config(None, ["topology=torus", "topology.rowz=4"])


def test_the_signature_gives_the_defaults():
    for name in topologies.names():
        options = topology_options(name)
        takes = keyword_options(topologies[name].obj, skip=1)
        assert set(options) == set(takes) - {"weights", "seed"}
        assert all(options[k] == takes[k].default for k in options)


def _group(text: str, key: str) -> str:
    """The lines of top-level option ``key`` in a config.yaml's text (its group's block)."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith(f"{key}:")), None)
    if start is None:
        return ""
    end = next((i for i in range(start + 1, len(lines)) if lines[i][:1] not in (" ", "")), len(lines))
    return "\n".join(lines[start:end])


def _stored_kinds() -> list[tuple[Path, dict]]:
    """One config.yaml per distinct topology group and node count (read as text first: loading
    all of them as YAML takes seconds)."""
    kinds: dict[str, Path] = {}
    for f in sorted((ROOT / "docs" / "results").rglob("config.yaml")):
        text = f.read_text()
        kinds.setdefault(_group(text, "topology") + _group(text, "nodes"), f)
    return [(f, yaml.safe_load(f.read_text())) for f in kinds.values()]


def test_every_stored_config_resolves_to_the_graph_options_it_recorded(monkeypatch):
    """docs/results: every run's topology group (the schema's former six fields at its top level)
    loads, and resolves to the value it recorded for each option its graph takes (null: the
    function's default); the graph built from the resolved options is the one built from the file."""
    monkeypatch.chdir(ROOT)
    kinds = _stored_kinds()
    assert len(kinds) > 10
    for f, raw in kinds:
        old = raw.get("topology") or {}
        cfg = from_dict({k: raw[k] for k in ("topology", "nodes", "seed") if k in raw})
        params = resolved_topology(cfg.topology)
        takes = keyword_options(topologies[cfg.topology.name].obj, skip=1)
        assert set(params) == set(takes) - {"weights", "seed"}, f
        for key in OPTIONS:
            if key in params and key in old:
                assert params[key] == (takes[key].default if old[key] is OPTIONS[key] else old[key]), (f, key)
        if cfg.nodes <= 64:
            resolved = dataclasses.replace(cfg.topology, params=params)
            a, b = topology_from_config(cfg.topology, cfg.nodes, cfg.seed), topology_from_config(resolved, cfg.nodes,
                                                                                                  cfg.seed)
            assert a.description == b.description and all(np.array_equal(x, y) for x, y in zip(_W(a), _W(b))), f


def test_every_preset_cell_names_a_graph_it_can_build(monkeypatch):
    """configs/: the presets' topology groups and cell overrides (topology.rows: 4 …) load."""
    from decent8.experiments.presets import cell_config, list_presets, make_plan, resolve_config_arg

    monkeypatch.chdir(ROOT)
    seen, cells = set(), set()
    for name in list_presets():
        text = resolve_config_arg(name).read_text()
        if not any(o in text for o in ("topology.", "rows:")):
            continue   # names a graph only (planning a preset takes ~0.2 s)
        plan = make_plan(name, [])
        for cell in plan.cells:   # one cell per distinct graph setting (loading a config takes ~0.1 s)
            mine = json.dumps([name, [o for o in cell.overrides if o.startswith(("topology", "nodes"))]])
            if mine in cells:
                continue
            cells.add(mine)
            cfg = cell_config(plan, cell)
            key = json.dumps([cfg.topology.name, cfg.topology.weights, cfg.topology.params, cfg.nodes], sort_keys=True)
            if key in seen:
                continue
            seen.add(key)
            options = topology_options(cfg.topology.name, cfg.topology.params)
            assert all(options[k] == v for k, v in cfg.topology.params.items() if v is not OPTIONS.get(k)), key
            if cfg.nodes <= 64:
                topology_from_config(cfg.topology, cfg.nodes, cfg.seed)
    assert any('"torus"' in k and '"rows": 4' in k for k in seen) and any('"edge_list"' in k for k in seen)


def test_decent8_list_shows_each_topologys_options_with_their_defaults():
    from decent8.cli.inspect_cmds import topology_option_list
    shown = topology_option_list()
    assert shown["torus"] == "rows=None cols=None" and shown["ring"] == "(none)"
    assert shown["erdos_renyi"] == "degree=4.0" and shown["edge_list"] == "path=None undirected=False"
    assert shown["exponential"] == "time_varying=False"


def test_a_saved_config_run_on_another_graph_or_algorithm_leaves_the_old_ones_options(tmp_path):
    """A resolved run records every option of its graph and algorithm (erdos_renyi: degree 4.0;
    gut: mu 0.1). Rerunning its config.yaml with another graph or algorithm on the command line
    starts that group's options afresh; the same name, or options given beside it, keep them."""
    from decent8.config import to_yaml

    saved = tmp_path / "config.yaml"
    saved.write_text(to_yaml(resolve(load_config(None, ["model=mlp", "nodes=8", "topology=erdos_renyi",
                                                         "algorithm=gut", "compression=identity"]))))
    stored = load_config(str(saved), [])
    assert stored.topology.params == {"degree": 4.0} and stored.algorithm.params == {"mu": 0.1}
    cfg = load_config(str(saved), ["topology=ring", "algorithm=dpsgd"])
    assert cfg.topology.params == {} and cfg.algorithm.params == {}
    assert resolve(cfg).topology.name == "ring"
    assert load_config(str(saved), ["topology=erdos_renyi"]).topology.params == {"degree": 4.0}
    assert load_config(str(saved), ["topology.degree=3", "topology=random_k_out"]).topology.params == {"degree": 3}
    with pytest.raises(ConfigError, match="topology.rows"):
        resolve(load_config(str(saved), ["topology=ring", "topology.rows=2"]))
    api = apply_options(stored, {"topology": "ring", "algorithm__name": "dpsgd"})   # the Python API's options
    assert api.topology.params == {} and api.algorithm.params == {}
