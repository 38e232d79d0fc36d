"""Seeded fuzz of the `decent8 train` command line (issue 11).

Random configurations — valid and invalid values for every option, conflicting
combinations, malformed YAML files — go through the CLI entry point in-process with
``--check`` (build everything, train nothing). Every one must end with exit 0 or with
exactly one ``decent8: error:`` line and exit 2; no exception may escape ``main`` and
nothing may be written. The rejected ones are run once more without ``--check`` (a
real ``decent8 train``) to show that they fail before a run folder exists.

A second fuzz damages a finished run folder in many ways and resumes it.
"""
from __future__ import annotations

import random
import re
import shutil
import time
from pathlib import Path

import pytest

from .fuzzing import SEED, _call, _damages, _finished_run

N_CONFIGS = 1000
#: the warning for an option given twice on the command line
REPEATED_KEY = re.compile(r"decent8: warning: [\w.]+ is given \d+ times \(")

#: option -> values to draw from (valid ones and invalid ones; strings are put on the command line as they are)
VALUES: dict[str, list[str]] = {
    "seed": ["0", "3", "-1", "4294967295", "4294967296", "1.5", "abc", "", "[1]", "1e400"],
    "nodes": ["2", "4", "8", "1", "0", "-3", "1200", "100000", "2.5", "x", "null"],
    "skew": ["0", "0.5", "1", "1.5", "-0.1", "nan", "inf", "x"],
    "epochs": ["1", "3", "0", "-1", "1e9", "2.5", "1000001"],
    "device": ["cpu", "auto", "cpu:1", "cpu:0", "cuda:7", "tpu", "", "cuda:-1", "meta", "cpu:x"],
    "backend": ["simulator", "distributed", "mpi", ""],
    "eval_every": ["1", "0", "-2"],
    "checkpoint": ["true", "false", "maybe", "2"],
    "precision": ["fp32", "int8", "fp16", "", "INT8"],
    "dist_timeout_s": ["60", "0", "-1", "inf", "nan", "1e308", "604800"],
    "name": ["run", "../../x", "/abs", "..", ".", " ", "a/b", "${oc.env:HOME}", "*x", "%s", "x" * 300,
             "ok-name_1", "tab\there", "back\\slash", "&a [*a]", "!!python/object:os.system x", "null", "'quoted'"],
    "out_dir": ["OUT", "OUT/sub/dir", "/etc/hostname", "", "${oc.env:HOME}"],
    "data.name": ["digits", "cifar10", "mnist", "imagenette", "agnews", "imagenet", "", "[1,2]"],
    "data.root": ["/nonexistent", "", "null", "/etc/hostname"],
    "data.batch_size": ["1", "16", "0", "-1", "1000000000", "3.5"],
    "data.eval_batch_size": ["1", "1024", "0", "-1", "1e3"],
    "data.test_fraction": ["0.2", "0", "1", "-0.5", "nan"],
    "data.subset": ["0.5", "100", "0", "-1", "1.5", "nan", "null"],
    "data.image_size": ["8", "4", "null", "-1"],
    "data.augment": ["true", "false", "x"],
    "partition.name": ["skew", "dirichlet", "shards", "random", ""],
    "partition.alpha": ["0.5", "0", "-1", "nan", "inf"],
    "partition.shards_per_node": ["2", "0", "-1", "100000"],
    "model.name": ["cnn", "mlp", "resnet20", "transformer", ""],
    "model.width": ["4", "8", "0", "-1", "1000000", "null", "2.5"],
    "model.norm": ["null", "none", "bn", "gn", "evonorm", "range_bn", "batchnorm"],
    "model.pretrained": ["null", "/nonexistent", "no-such-package"],
    "quant.bits": ["8", "2", "16", "1", "17", "0", "-8"],
    "quant.grad_bits": ["8", "1", "32"],
    "topology.name": ["directed_ring", "ring", "torus", "complete", "exponential", "star", "edge_list", "hypercube",
                      "%s", "*x"],
    "topology.weights": ["uniform", "metropolis", "random"],
    "topology.rows": ["2", "3", "0", "-1", "null"],
    "topology.cols": ["2", "4", "0", "null"],
    "topology.path": ["EDGES", "BADUTF8", "/nonexistent", "null"],
    "topology.undirected": ["true", "false"],
    "topology.time_varying": ["true", "false"],
    "algorithm.name": ["choco", "dpsgd", "deepsqueeze", "sparse_push", "marsit", "psgd", "signsgd", "ef_signsgd",
                       "gossip_magic"],
    "algorithm.gamma": ["0.05", "1", "2.5", "0", "-1", "1e308", "nan", "inf", "null"],
    "algorithm.push_sum": ["auto", "true", "false", "yes", "maybe"],
    "algorithm.consensus_rounds": ["0", "51", "-1", "10000000"],
    "compression.name": ["topk", "identity", "randomk", "quantize", "sign", "zip", "topk_int8"],
    "compression.ratio": ["0.99", "0", "0.5", "1", "1.2", "-0.1", "nan"],
    "compression.value_bits": ["32", "8", "16", "0"],
    "compression.bits": ["8", "4", "1", "0", "33"],
    "compression.index_dtype": ["auto", "int16", "int32", "int64"],
    "optimizer.kind": ["local", "qgm", "adam", "adamw", "lamb"],
    "optimizer.betas": ["[0.9, 0.999]", "[0.9]", "[0.9, 1]", "[nan, 0.9]", "x"],
    "optimizer.eps": ["1e-8", "0", "-1", "nan"],
    "optimizer.lr": ["0.1", "1e-3", "0", "-0.1", "1e308", "nan", "inf", "x"],
    "optimizer.momentum": ["0.9", "0", "1", "-0.5", "nan"],
    "optimizer.weight_decay": ["1e-4", "0", "-1", "inf"],
    "optimizer.schedule": ["step", "cosine", "constant", "linear"],
    "optimizer.warmup_epochs": ["1", "0", "-1", "nan", "inf"],
    "optimizer.warmup_lr": ["0.01", "0", "-1", "nan"],
    "optimizer.milestones": ["[30, 45]", "[]", "[[1]]", "[-1]", "[inf]", "[nan]", "{a: 1}", "x", "[1, [2]]"],
    "optimizer.decay": ["0.1", "0", "1", "1.5", "nan"],
    "optimizer.decay_every": ["0", "1", "1e-310", "-1", "nan", "inf"],
    "allreduce.K": ["0", "5", "-1", "2.5"],
    "allreduce.eta_s": ["0.005", "0", "-1", "nan", "1e308"],
    "allreduce.reset": ["apply", "drop", "keep"],
    "no_such_option": ["1"],
    "optimizer.no_such": ["1"],
    "data": ["digits", "[1, 2]", "{name: digits}"],
    "topology": ["ring", "%s", "{name: ring, weights: metropolis}"],
}

#: option groups drawn together (conflicting combinations)
COMBOS = [
    ["algorithm.name=marsit", "topology.name=star"],
    ["algorithm.name=psgd", "topology.name=torus", "topology.rows=3", "topology.cols=3", "nodes=8"],
    ["topology.name=directed_ring", "topology.weights=metropolis"],
    ["topology.name=star", "algorithm.push_sum=false"],
    ["precision=int8", "model.name=mlp"],
    ["compression.name=topk", "compression.index_dtype=int16", "model.name=mlp", "model.width=1100"],
    ["data.name=digits", "data.image_size=16"],
    ["topology.name=exponential", "topology.time_varying=true", "nodes=8"],
    ["optimizer.warmup_epochs=2", "optimizer.warmup_lr=0"],
    ["nodes=1437"], ["nodes=4096", "model.name=mlp", "model.width=4"],
]

#: malformed or odd YAML files (content, or None for a binary file)
YAMLS = [
    "nodes: 8\n  skew: [0.1,\n",                       # syntax error
    "- 1\n- 2\n",                                       # a list, not a mapping
    "a: &a [*a]\n",                                     # recursive alias
    "optimizer:\n  milestones: {a: 1}\n",              # a mapping where a list belongs
    "optimizer: [1, 2]\n",                              # a list where a group belongs
    "nodes: *undefined\n",
    "%YAML 9.9\n---\nnodes: 4\n",
    "name: ${oc.env:HOME}\nepochs: 1\n",
    "!!python/object/apply:os.system ['touch PWNED']\n",
    "nodes: !!python/object/apply:os.system ['touch PWNED']\n",
    "lol: &a [x, x, x, x, x, x, x, x, x]\nlol2: &b [*a, *a, *a, *a, *a, *a, *a, *a]\nlol3: &c [*b, *b, *b, *b, *b, *b]\n",
    "topology: ring\nnodes: 4\nepochs: 1\n",            # a valid one
    "data:\n  name: digits\n  batch_size: 8\nmodel: {name: mlp, width: 4}\n",
    "",                                                 # empty
    "\x00\x01binary",
    None,                                               # non-UTF-8 bytes
    "nodes: 8\nnodes: 4\n",                             # duplicate key
    "1: 2\n",                                           # non-text key
]


def _draw(rng: random.Random, tmp: Path, edges: Path, bad_utf8: Path, out: Path) -> list[str]:
    argv: list[str] = []
    r = rng.random()
    if r < 0.12:
        text = rng.choice(YAMLS)
        f = tmp / f"cfg{rng.randrange(10**9)}.yaml"
        if text is None:
            f.write_bytes(b"nodes: \xff\xfe\n")
        else:
            f.write_text(text)
        argv.append(str(f))
    elif r < 0.14:
        argv.append(str(tmp / "missing.yaml"))
    overrides = ["device=cpu", "model.width=4", "progress=false", f"out_dir={out}"]
    if rng.random() < 0.15:
        overrides += rng.choice(COMBOS)
    for key in rng.sample(sorted(VALUES), rng.randint(1, 4)):
        value = rng.choice(VALUES[key])
        value = {"OUT": str(out), "OUT/sub/dir": str(out / "sub" / "dir"), "EDGES": str(edges),
                 "BADUTF8": str(bad_utf8)}.get(value, value)
        overrides.append(f"{key}={value}")
    if rng.random() < 0.03:
        overrides.append(rng.choice(["=3", "nodes", "a..b=1", "[0]=1", "nodes==3"]))
    return argv + overrides


@pytest.mark.slow   # > 20 s on the 2-core CI machine
def test_fuzz_train_check_1000_configurations(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    edges = tmp_path / "edges.txt"
    edges.write_text("0 1\n1 2\n2 3\n3 0\n")
    bad_utf8 = tmp_path / "bad_edges.txt"
    bad_utf8.write_bytes(b"0 1\n\xff\xfe 2\n")
    out = tmp_path / "runs"
    rng = random.Random(SEED)
    t0 = time.perf_counter()
    outcomes = {0: 0, 2: 0}
    rejected: list[list[str]] = []
    for i in range(N_CONFIGS):
        argv = _draw(rng, tmp_path, edges, bad_utf8, out)
        try:
            rc, stdout, stderr = _call(["train", "--check", *argv])
        except BaseException as e:  # noqa: BLE001 - the point of the test
            pytest.fail(f"config {i}: {argv} raised {type(e).__name__}: {e}")
        # a key drawn twice is named in one warning line of its own (the last value is used)
        lines = [ln for ln in stderr.splitlines() if ln.strip() and not REPEATED_KEY.match(ln)]
        assert rc in (0, 2), (i, argv, rc, stderr)
        if rc == 2:
            assert len(lines) == 1 and lines[0].startswith("decent8: error: "), (i, argv, stderr)
            assert "Traceback" not in stderr
            rejected.append(argv)
        else:
            assert "config OK" in stdout, (i, argv, stdout, stderr)
        outcomes[rc] += 1
        assert not out.exists(), (i, argv, "--check wrote something")
        assert not (tmp_path / "PWNED").exists()
    elapsed = time.perf_counter() - t0
    # both kinds must be well represented, or the fuzz tests little
    assert outcomes[0] >= 100 and outcomes[2] >= 300, outcomes
    # the rejected ones fail the same way without --check, before any folder exists
    for argv in random.Random(SEED + 1).sample(rejected, 40):
        rc, _, stderr = _call(["train", *argv])
        lines = [ln for ln in stderr.splitlines() if ln.strip() and not REPEATED_KEY.match(ln)]
        assert rc == 2 and len(lines) == 1 and lines[0].startswith("decent8: error: "), (argv, stderr)
        assert not out.exists() or not any(out.rglob("*")), (argv, sorted(out.rglob("*")))
    print(f"fuzz: {N_CONFIGS} configurations, {outcomes[0]} valid, {outcomes[2]} rejected, {elapsed:.1f} s")


@pytest.mark.slow   # > 20 s on the 2-core CI machine
def test_fuzz_resume_of_damaged_run_folders(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = _finished_run(tmp_path / "src")
    rng = random.Random(SEED)
    damages = _damages(run, rng)
    assert len(damages) >= 80
    codes = {0: 0, 1: 0, 2: 0}
    for i, (label, damage) in enumerate(damages):
        d = tmp_path / f"case{i}"
        shutil.copytree(run, d)
        damage(d)
        before = sorted(p.name for p in d.iterdir()) if d.is_dir() else []
        for argv in (["train", "--check", "--resume", str(d)], ["train", "--resume", str(d), "--quiet"]):
            try:
                rc, _, stderr = _call(argv)
            except BaseException as e:  # noqa: BLE001
                pytest.fail(f"{label}: {argv} raised {type(e).__name__}: {e}")
            lines = [ln for ln in stderr.splitlines() if ln.strip()]
            # flipped bytes may leave a well-formed checkpoint of non-finite or huge values:
            # resuming it then diverges, which is one line and exit 1
            diverged = rc == 1 and label == "checkpoint bytes flipped" and len(lines) == 1 and "diverged" in lines[0]
            assert rc in (0, 2) or diverged, (label, argv, rc, stderr)
            if rc == 2:
                assert len(lines) == 1 and lines[0].startswith("decent8: error: "), (label, stderr)
                if "--check" in argv:  # a rejected folder is left as it was
                    assert sorted(p.name for p in d.iterdir()) == before, label
            codes[rc] += 1
        assert not (d / ".checkpoint.pt.abc123.tmp").exists() or "--check" in argv
        assert not (tmp_path / "PWNED").exists()
        shutil.rmtree(d)
    assert codes[0] >= 10 and codes[2] >= 60, codes
