"""Seeded fuzz of whole `decent8` commands run to their end (issue 36).

`train --check` cannot see what fails after validation. Here seeded commands run to their
end in-process: `train` on tiny sizes (user models, losses and tensor files included),
`report` of damaged folders, `launch` argument handling (its processes replaced by a stub:
everything up to starting them runs), `--resume` of damaged or crafted run folders.
Every command ends with exit 0, or with exactly one `decent8: error:` line and exit 1 or 2
(`decent8: warning:` lines aside); exit 2 writes nothing; no code from a run folder runs.
It has its own file so that pytest-xdist runs it beside the configuration fuzz.
"""
from __future__ import annotations

import json
import random
import shutil
import time
from pathlib import Path

import pytest
import torch

from .fuzzing import SEED, _call, _damages

USER_CODE = '''
import torch
from torch import nn
import torch.nn.functional as F

def _flat(input_shape):
    f = 1
    for s in input_shape:
        f *= s
    return f

def make_cls(input_shape, num_classes):
    return nn.Sequential(nn.Flatten(), nn.Linear(_flat(input_shape), num_classes))

def make_reg(input_shape, num_classes):
    return nn.Sequential(nn.Flatten(), nn.Linear(_flat(input_shape), num_classes))

def make_lazy(num_classes):
    return nn.Sequential(nn.Flatten(), nn.LazyLinear(num_classes))

def make_three(input_shape):
    return nn.Sequential(nn.Flatten(), nn.Linear(_flat(input_shape), 3))

def not_a_module():
    return 3

def raises():
    raise ValueError("the factory is broken")

def no_params():
    return nn.Identity()

class NaN(nn.Module):
    def __init__(self, f, c):
        super().__init__()
        self.lin = nn.Linear(f, c)
    def forward(self, x):
        return self.lin(x.flatten(1)) * float("nan")

def make_nan(input_shape, num_classes):
    return NaN(_flat(input_shape), num_classes)

def loss_ok(outputs, targets):
    return F.cross_entropy(outputs, targets)

def loss_vector(outputs, targets):
    return outputs

def loss_raises(outputs, targets):
    raise RuntimeError("the loss is broken")

def loss_none(outputs, targets):
    return None
'''

#: option -> values (valid and invalid; tiny sizes), for commands that run to the end
RUN_VALUES: dict[str, list[str]] = {
    "nodes": ["2", "3", "4", "1", "0"],
    "epochs": ["1", "2", "0"],
    "skew": ["0", "0.5", "1", "1.5"],
    "algorithm": ["choco", "dpsgd", "deepsqueeze", "marsit", "psgd", "signsgd", "ef_signsgd", "x"],
    "compression": ["topk", "identity", "randomk", "quantize", "sign", "x"],
    "compression.ratio": ["0.5", "0.99", "1.2"],
    "topology": ["directed_ring", "ring", "complete", "star", "exponential", "torus"],
    "precision": ["fp32", "int8"],
    "optimizer.kind": ["local", "adam", "qgm"],
    "optimizer.lr": ["0.1", "0", "nan", "1e308", "100"],
    "optimizer.betas": ["[0.9, 0.999]", "[[1]]", "[0.9]", "{a: 1}"],
    "data.batch_size": ["8", "16", "500", "0"],
    "eval_every": ["1", "2", "0"],
    "checkpoint": ["true", "false"],
    "algorithm.consensus_rounds": ["0", "2"],
    "name": ["n1", "n2", "../x", " "],
    "network.links": ["LINKS", "BINARY", "/nonexistent"],
    "model": ["mlp", "cnn", "USER:make_cls", "USER:make_reg", "USER:make_lazy", "USER:make_three",
              "USER:not_a_module", "USER:raises", "USER:no_params", "USER:make_nan", "USER:missing", "nosuchmod:f",
              "os:getcwd"],
    "loss": ["cross_entropy", "mse", "logistic", "USER:loss_ok", "USER:loss_vector", "USER:loss_raises",
             "USER:loss_none", "torch.nn.functional:huber_loss", "torch.nn.functional:cross_entropy"],
    "data": ["digits", "TENSORS:reg.npz", "TENSORS:cls.pt", "TENSORS:dict.pt", "TENSORS:garbage.pt",
             "TENSORS:notzip.npz", "TENSORS:ids.pt", "TENSORS:nan.npz", "TENSORS:missing.pt",
             "LEAF:good", "LEAF:deep", "LEAF:x_int", "LEAF:huge_label", "LEAF:nan_x"],
    "topology.degree": ["1", "nan", "inf", "-inf", "2.5"],
}


def _whole_command_fixtures(root: Path) -> dict[str, Path]:
    import numpy as np

    files = root / "files"
    files.mkdir()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(120, 5)).astype("float32")
    np.savez(files / "reg.npz", x=x, y=(x @ np.ones(5)).astype("float32"))
    nan = x.copy()
    nan[3, 2] = np.nan
    np.savez(files / "nan.npz", x=nan, y=np.zeros(120, "int64"))
    g = torch.Generator().manual_seed(0)
    torch.save({"x": torch.randn(120, 16, generator=g), "y": torch.randint(0, 4, (120,), generator=g)}, files / "cls.pt")
    torch.save({"x": {"a": torch.randn(120, 4, generator=g), "b": torch.randn(120, 4, generator=g)},
                "y": torch.randint(0, 3, (120,), generator=g)}, files / "dict.pt")
    torch.save({"x": torch.randint(1, 50, (120, 8), generator=g), "y": torch.randint(0, 4, (120,), generator=g)},
               files / "ids.pt")
    (files / "garbage.pt").write_bytes(bytes(range(256)) * 8)
    (files / "notzip.npz").write_bytes(b"PK\x03\x04 not really")
    (files / "links.csv").write_text("src,dst,latency_s,bandwidth_mbit_s\n0,1,0.01,100\n")
    (files / "links.bin").write_bytes(bytes(range(256)) * 4)
    users = ["u1", "u2", "u3"]
    good = {"users": users, "user_data": {u: {"x": [[float(i), float(i % 3)] for i in range(8)],
                                              "y": [i % 2 for i in range(8)]} for u in users}}
    deep = '{"users": ["u"], "user_data": {"u": {"x": ' + "[" * 100_000 + "]" * 100_000 + ', "y": [0]}}}'
    crafted = {"good": json.dumps(good), "deep": deep,
               "x_int": json.dumps({"users": ["u"], "user_data": {"u": {"x": 5, "y": 3}}}),
               "huge_label": json.dumps(good).replace('"y": [0, 1, 0', '"y": [1000000000000, 1, 0', 1),
               "nan_x": json.dumps(good).replace("[0.0, 0.0]", "[NaN, 0.0]", 1)}
    for name, text in crafted.items():
        for split in ("train", "test"):
            (files / f"leaf_{name}" / split).mkdir(parents=True)
            (files / f"leaf_{name}" / split / "a.json").write_text(text if split == "train" else json.dumps(good))
    pkgs = root / "pkgs"
    pkgs.mkdir()
    (pkgs / "d8fuzzuser.py").write_text(USER_CODE)
    return {"files": files, "pkgs": pkgs}


def _run_argv(rng: random.Random, fx: dict[str, Path], out: Path) -> list[str]:
    argv = ["device=cpu", "progress=false", "model.width=4", "data.subset=150", "nodes=3", "epochs=1",
            f"out_dir={out}"]
    for key in rng.sample(sorted(RUN_VALUES), rng.randint(1, 4)):
        value = rng.choice(RUN_VALUES[key])
        if value.startswith("USER:"):
            value = "d8fuzzuser:" + value[5:]
        elif value.startswith("TENSORS:"):
            argv += ["data.name=tensors", f"data.path={fx['files'] / value[8:]}"]
            continue
        elif value.startswith("LEAF:"):
            argv += ["data.name=leaf", f"data.root={fx['files'] / ('leaf_' + value[5:])}"]
            continue
        elif key == "topology.degree":
            argv += [f"topology={rng.choice(['random_k_out', 'base', 'erdos_renyi'])}", f"topology.degree={value}"]
            continue
        value = {"LINKS": str(fx["files"] / "links.csv"), "BINARY": str(fx["files"] / "links.bin")}.get(value, value)
        argv.append(f"{key}={value}")
    return argv + rng.choice([[], ["--quiet"], ["--quiet"], ["--print-config"]])


def _report_damages(run: Path) -> list[tuple[str, object]]:
    """(label, damage of a copied run folder) for `report`."""
    def put(name, data):
        def f(d: Path):
            (d / name).write_bytes(data) if isinstance(data, bytes) else (d / name).write_text(data)
        return f

    summary = json.loads((run / "summary.json").read_text())

    def edit_summary(mutate):
        def f(d: Path):
            s = dict(summary)
            mutate(s)
            (d / "summary.json").write_text(json.dumps(s))
        return f

    return [
        ("intact", lambda d: None),
        ("metrics binary", put("metrics.jsonl", bytes(range(256)) * 8)),
        ("metrics rows of text", put("metrics.jsonl", '{"epoch": "1", "train_loss": "x"}\n[1, 2]\n"s"\n')),
        ("metrics missing", lambda d: (d / "metrics.jsonl").unlink()),
        ("summary without bytes", edit_summary(lambda s: s.pop("bytes_sent_per_node"))),
        ("summary accuracy text", edit_summary(lambda s: s.update(mean_node_accuracy="x", wall_time_s=[1]))),
        ("summary a list", put("summary.json", "[1, 2]")),
        ("summary garbage", put("summary.json", b"\xff\xfe{")),
        ("config binary", put("config.yaml", b"\xff\xfe\x00")),
        ("config a list", put("config.yaml", "- 1\n")),
        ("partition garbage", put("partition.csv", "node,a\n0,x,y\n")),
        ("stale temporaries", lambda d: ((d / ".curves.png.abc12.tmp").write_bytes(b"x"),
                                         (d / ".time.png.q_1.tmp").write_bytes(b"x"))),
    ]


def _sweep_json_damages() -> list[str]:
    return ['{"cells": [{"name": "../../etc", "labels": {}}], "command": []}', "[1]", "{",
            '{"cells": "x", "axes": 3, "report": [1]}', '{"cells": [{"name": "c0", "labels": {"a": [1]}}], '
            '"command": [], "scale": "x", "paper": [1, {"a": 1}], "report": {"columns": {"x": {"algorithm": 1}}}}']


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for p in root.rglob("*"):
        try:
            st = p.lstat()
        except OSError:
            continue
        out[str(p)] = (st.st_size, st.st_mtime_ns) if p.is_file() else (-1, 0)
    return out


class _StubNodes:
    """`decent8 launch`'s processes, not started: the fuzz checks everything before them."""

    started: list[list[str]] = []

    def __init__(self, nodes, command, **kwargs):
        self.nodes = nodes
        _StubNodes.started.append(list(command))

    def wait(self, grace_s):
        return [0] * self.nodes, None, []

    def stop(self, which=None):
        pass

    def close(self):
        pass


def _whole_commands(tmp_path: Path, monkeypatch, n_commands: int, seed: int) -> dict[str, int]:
    import decent8.cli.launch_cmd as launch_cmd

    monkeypatch.chdir(tmp_path)
    fx = _whole_command_fixtures(tmp_path)
    monkeypatch.syspath_prepend(str(fx["pkgs"]))
    monkeypatch.setattr(launch_cmd, "LocalNodes", _StubNodes)
    marker = tmp_path / "PWNED"
    runs = tmp_path / "runs"
    base = tmp_path / "base"
    rc, _, err = _call(["train", "device=cpu", "progress=false", "model=mlp", "model.width=4", "data.subset=150",
                        "nodes=3", "epochs=2", "algorithm.consensus_rounds=2", f"out_dir={base}", "name=cls", "--quiet"])
    assert rc == 0, err
    rc, _, err = _call(["train", "device=cpu", "progress=false", "model=d8fuzzuser:make_reg", "data.name=tensors",
                        f"data.path={fx['files'] / 'reg.npz'}", "loss=mse", "nodes=3", "epochs=1", f"out_dir={base}",
                        "name=reg", "--quiet"])
    assert rc == 0, err
    # a crafted run folder naming a factory shipped inside it
    evil = base / "evil"
    shutil.copytree(base / "cls", evil)
    (evil / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    (evil / "payload.py").write_text(f"open({str(marker)!r}, 'w').write('x')\n" + USER_CODE)
    (base / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    (evil / "config.yaml").write_text((evil / "config.yaml").read_text().replace("  name: mlp",
                                                                                   "  name: base.evil.payload:make_cls"))
    damages = _report_damages(base / "cls")
    resume_damages = _damages(base / "cls", random.Random(seed))
    rng = random.Random(seed)
    codes = {0: 0, 1: 0, 2: 0}
    kinds: dict[str, int] = {}
    problems: list[str] = []
    for i in range(n_commands):
        kind = rng.choices(["train", "report", "launch", "resume"], weights=[40, 20, 15, 25])[0]
        kinds[kind] = kinds.get(kind, 0) + 1
        if kind == "train":
            argv = ["train", *_run_argv(rng, fx, runs / f"c{i}")]
        elif kind == "report":
            folders = []
            for j in range(rng.choice([1, 1, 2])):
                label, damage = rng.choice(damages)
                d = tmp_path / f"rep{i}" / f"cell{j}"
                shutil.copytree(base / rng.choice(["cls", "reg"]), d)
                damage(d)
                folders.append(str(d))
            if rng.random() < 0.4:   # the folder above them as a sweep folder
                if rng.random() < 0.5:
                    (tmp_path / f"rep{i}" / "sweep.json").write_text(rng.choice(_sweep_json_damages()))
                folders = [str(tmp_path / f"rep{i}")]
            argv = ["report", *folders, *rng.choice([[], ["--no-figures"], ["--metric", "averaged"]]),
                    "--out", str(tmp_path / f"cmp{i}")]
        elif kind == "launch":
            argv = ["launch"]
            if rng.random() < 0.7:
                argv += ["--nodes", rng.choice(["2", "3", "1", "0", "-1", "x", "100000"])]
            if rng.random() < 0.3:
                argv += ["--grace", rng.choice(["1", "-1", "nan", "x"])]
            if rng.random() < 0.25:
                argv += ["--resume", str(base / rng.choice(["cls", "evil", "reg", "missing"]))]
                argv += rng.choice([[], ["--trust-config"], ["model=mlp"]])
            else:
                argv += _run_argv(rng, fx, runs / f"c{i}")[:-1]
        else:
            d = tmp_path / f"res{i}"
            src = rng.choice(["cls", "reg", "evil", "evil", "damaged", "damaged", "damaged"])
            if src == "damaged":
                shutil.copytree(base / "cls", d)
                label, damage = rng.choice(resume_damages)
                damage(d)
            else:
                shutil.copytree(base / src, d)
                if src == "evil":   # the copy names its own payload
                    cfg = (d / "config.yaml").read_text().replace("base.evil.payload", f"res{i}.payload")
                    (d / "config.yaml").write_text(cfg)
            argv = ["train", "--resume", str(d), *rng.choice([[], [], ["--check"], ["--trust-config"], ["nodes=3"],
                                                              ["--quiet"], ["model=d8fuzzuser:make_reg"]])]
        before = _snapshot(tmp_path)
        try:
            rc, stdout, stderr = _call(argv)
        except BaseException as e:  # noqa: BLE001 - the point of the test
            problems.append(f"command {i}: {argv} raised {type(e).__name__}: {e}")
            continue
        lines = [ln for ln in stderr.splitlines() if ln.strip() and not ln.startswith("decent8: warning: ")]
        why = None
        if "Traceback" in stderr or "Exception ignored" in stderr:
            why = "a traceback"
        elif rc not in (0, 1, 2):
            why = f"exit {rc}"
        elif rc and not (len(lines) == 1 and lines[0].startswith("decent8: error: ")):
            why = f"exit {rc} with {len(lines)} lines"
        elif rc == 2:   # refused: nothing new, nothing changed (a stale temporary may be gone)
            after = _snapshot(tmp_path)
            changed = sorted(p for p, v in after.items() if before.get(p) != v)
            why = f"exit 2 wrote {changed[:3]}" if changed else None
        if marker.exists():
            why = "code from a run folder ran"
            marker.unlink()
        if why:
            problems.append(f"command {i}: {argv}: {why}: {stderr[-600:]}")
        codes[rc] = codes.get(rc, 0) + 1
    assert not problems, "\n".join(problems[:10])
    print(f"whole-command fuzz: {n_commands} commands {kinds}, exits {codes}, {len(_StubNodes.started)} launches "
          f"reached their processes")
    return codes


def test_fuzz_whole_commands_fast_subset(tmp_path, monkeypatch):
    codes = _whole_commands(tmp_path, monkeypatch, 16, SEED + 36)
    assert codes[0] >= 3 and codes[2] >= 3, codes


@pytest.mark.slow   # minutes on the 2-core CI machine: every command runs to its end
def test_fuzz_whole_commands_220(tmp_path, monkeypatch):
    t0 = time.perf_counter()
    codes = _whole_commands(tmp_path, monkeypatch, 220, SEED)
    assert codes[0] >= 40 and codes[2] >= 40, codes
    print(f"{time.perf_counter() - t0:.0f} s")
