"""A compressor's options are its constructor's keyword arguments (``compression.<kwarg>=value``,
kept in ``compression.params``); the config schema has no field of one compressor. The names the
group's schema once had (``compression.ratio``, ``value_bits``, ``bits``, ``index_dtype``,
``stochastic``) keep working, and every stored config.yaml resolves to the options it ran with."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml

from decent8.compression import OPTIONS, compressor_options, make_compressor
from decent8.config import CompressionConfig, from_dict, load_config, to_dict
from decent8.errors import ConfigError
from decent8.layout import ParamLayout
from decent8.registry import compressors, keyword_options
from decent8.train.resolve import resolve, resolved_compression

ROOT = Path(__file__).resolve().parents[2]
LAYOUT = ParamLayout([("w", (20, 10)), ("b", (10,))])


def test_the_schema_has_no_field_of_one_compressor():
    assert [f.name for f in dataclasses.fields(CompressionConfig)] == ["name", "wire", "params"]


@pytest.mark.parametrize("given, name, expected", [
    ([], "topk", {"ratio": 0.99, "value_bits": 32, "index_dtype": "auto"}),
    (["compression.ratio=0.9"], "topk", {"ratio": 0.9, "value_bits": 32, "index_dtype": "auto"}),
    (["compression.ratio=0"], "topk", {"ratio": 0.0, "value_bits": 32, "index_dtype": "auto"}),   # an int read as float
    (["compression=identity", "compression.ratio=0.5"], "identity", {}),           # not identity's: dropped
    (["precision=int8"], "topk", {"ratio": 0.99, "value_bits": 32, "index_dtype": "auto"}),  # topk_int8 on the wire
    (["compression=identity", "precision=int8"], "identity", {}),
    (["compression=identity", "precision=int8", "compression.stochastic=true", "compression.ratio=0.5"], "identity",
     {"stochastic": True}),                                       # what quantize, its 8-bit wire, takes
    (["compression=randomk", "compression.index_dtype=int32"], "randomk", {"ratio": 0.99, "index_dtype": "int32"}),
    (["compression=quantize", "compression.stochastic=true"], "quantize", {"bits": 8, "stochastic": True}),
])
def test_options_land_in_the_constructors_keyword_arguments(given, name, expected):
    cfg = load_config(None, ["model=mlp", "nodes=4", *given])
    assert cfg.compression.name == name
    r = resolve(cfg)
    assert dict(r.compression.params) == expected and r.compression.wire in ("fp32", "int8", "auto")
    assert resolve(from_dict(to_dict(r))) == r                        # config.yaml resolves to itself


def test_a_yaml_group_and_the_python_api_land_there_too(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("compression: {name: topk, ratio: 0.9, value_bits: 8}\n")
    assert load_config(str(f)).compression.params == {"ratio": 0.9, "value_bits": 8}


def test_a_wrong_option_is_one_line():
    with pytest.raises(ConfigError, match=r"^compression.ration: unknown option"):
        load_config(None, ["compression.ration=0.9"])
    with pytest.raises(ConfigError, match=r"^compression.ratio: must be float \(compression=topk\)"):
        resolve(load_config(None, ["model=mlp", "nodes=4", "compression.ratio=abc"]))
    with pytest.raises(ConfigError, match=r"^compression.ratio: must be in \[0, 1\)"):
        make_compressor("topk", LAYOUT, params={"ratio": 1.5})


def test_shared_names_keep_their_group_defaults_and_the_signature_gives_the_rest():
    for name in compressors.names():
        options = compressor_options(name)
        takes = keyword_options(compressors[name].obj, skip=1)
        assert set(options) == set(takes)
        for key, value in options.items():
            fixed = compressors[name].info.get("fixed", {})
            assert value == fixed.get(key, OPTIONS.get(key, takes[key].default))


def test_every_stored_config_resolves_to_the_options_it_ran_with():
    """docs/results: every run's config.yaml (the schema's five fields) resolves to the wire it
    ran on and, for each option its compressor takes, the value it recorded."""
    files = sorted((ROOT / "docs" / "results").rglob("config.yaml"))
    assert files
    kinds: dict[str, tuple[Path, dict]] = {}     # one file per distinct compression group and precision
    for f in files:
        raw = yaml.safe_load(f.read_text())
        kinds.setdefault(json.dumps([raw.get("compression"), raw.get("precision")], sort_keys=True), (f, raw))
    assert len(kinds) > 3
    for f, raw in kinds.values():
        old = raw.get("compression") or {}
        cfg = from_dict(raw)
        wire, params = resolved_compression(cfg.compression, cfg.precision)
        if old.get("wire") in ("fp32", "int8", "auto") and "wire" in old:
            assert wire == old["wire"], f
        for key in OPTIONS:
            if key in params and key in old:
                assert params[key] == old[key], (f, key)


def test_decent8_list_shows_each_compressors_options_with_their_defaults():
    from decent8.cli.inspect_cmds import compression_options
    shown = compression_options()
    assert shown["topk"] == "ratio=0.99 value_bits=32 index_dtype=auto" and shown["identity"] == "(none)"
    assert shown["quantize"] == "bits=8 stochastic=False" and shown["topk_int8"].startswith("ratio=0.99 value_bits=8")
