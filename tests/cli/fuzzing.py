"""What the two fuzz files share: the CLI called in-process, the seed, and the ways to
damage a finished run folder (tests/cli/test_fuzz_cli.py, tests/cli/test_fuzz_whole_commands.py)."""
from __future__ import annotations

import contextlib
import io
import os
import random
from pathlib import Path

import torch

from decent8.cli.main import main

SEED = 11


def _call(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as e:  # argparse's own usage errors (one line, exit 2)
            rc = e.code if isinstance(e.code, int) else 2
    return rc, out.getvalue(), err.getvalue()


# ------------------------------------------------------------------ damaged run folders
def _finished_run(root: Path) -> Path:
    rc, _, err = _call(["train", "epochs=1", "nodes=4", "model=mlp", "model.width=4", "device=cpu", "progress=false",
                        "algorithm.consensus_rounds=2", f"out_dir={root}", "name=good", "--quiet"])
    assert rc == 0, err
    return root / "good"


def _damages(run: Path, rng: random.Random):
    """(label, function that damages a copy of the run folder) pairs."""
    ckpt = (run / "checkpoint.pt").read_bytes()
    cfg = (run / "config.yaml").read_text()
    metrics = (run / "metrics.jsonl").read_text()

    def write(name, data):
        def f(d: Path):
            p = d / name
            if isinstance(data, bytes):
                p.write_bytes(data)
            else:
                p.write_text(data)
        return f

    out = []
    for n in sorted({0, 1, 10, 100, len(ckpt) // 3, len(ckpt) // 2, len(ckpt) - 100, len(ckpt) - 1}
                    | {rng.randrange(len(ckpt)) for _ in range(12)}):
        out.append((f"checkpoint cut at {n}", write("checkpoint.pt", ckpt[:n])))
    for _ in range(12):
        b = bytearray(ckpt)
        for _ in range(rng.randint(1, 20)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        out.append(("checkpoint bytes flipped", write("checkpoint.pt", bytes(b))))
    out.append(("checkpoint garbage", write("checkpoint.pt", os.urandom(5000))))
    good = torch.load(run / "checkpoint.pt", weights_only=True)

    def state(mutate):
        def f(d: Path):
            s = torch.load(run / "checkpoint.pt", weights_only=True)
            torch.save(mutate(s), d / "checkpoint.pt")
        return f

    def drop(path):
        def m(s):
            node = s
            for k in path[:-1]:
                node = node[k]
            del node[path[-1]]
            return s
        return m

    def put(path, value):
        def m(s):
            node = s
            for k in path[:-1]:
                node = node[k]
            node[path[-1]] = value
            return s
        return m

    out += [
        ("checkpoint is a list", state(lambda s: [1, 2])),
        ("checkpoint without engine", state(drop(["engine"]))),
        ("checkpoint without z", state(drop(["engine", "z"]))),
        ("checkpoint without step", state(drop(["engine", "step"]))),
        ("checkpoint epoch -1", state(put(["epoch"], -1))),
        ("checkpoint epoch 99", state(put(["epoch"], 99))),
        ("checkpoint epoch text", state(put(["epoch"], "1"))),
        ("checkpoint wall nan", state(put(["wall_time_s"], float("nan")))),
        ("checkpoint z wrong shape", state(put(["engine", "z"], torch.zeros(3, 7)))),
        ("checkpoint z wrong width", state(put(["engine", "z"], good["engine"]["z"][:, :-1].clone()))),
        ("checkpoint algorithm state wrong shape",
         state(lambda s: (s["engine"]["algorithm"].update({k: torch.zeros(1) for k in s["engine"]["algorithm"]}), s)[1])),
        ("checkpoint optimizer state not tensors",
         state(lambda s: (s["engine"]["optimizer"].update({k: "x" for k in s["engine"]["optimizer"]}), s)[1])),
        ("checkpoint bytes_sent wrong shape", state(put(["engine", "bytes_sent"], torch.zeros(99, dtype=torch.float64)))),
        ("checkpoint generators garbage", state(put(["engine", "generators"], [torch.zeros(3, dtype=torch.uint8)] * 4))),
        ("checkpoint torch_rng garbage", state(put(["engine", "torch_rng"], torch.zeros(3, dtype=torch.uint8)))),
        ("checkpoint model buffers garbage", state(put(["engine", "model_buffers"], torch.zeros(2)))),
        ("checkpoint missing", lambda d: (d / "checkpoint.pt").unlink()),
        ("checkpoint is a folder", lambda d: ((d / "checkpoint.pt").unlink(), (d / "checkpoint.pt").mkdir())),
    ]
    for n in sorted({0, 1, len(metrics) // 2, len(metrics) - 2} | {rng.randrange(len(metrics)) for _ in range(4)}):
        out.append((f"metrics cut at {n}", write("metrics.jsonl", metrics[:n])))
    out += [
        ("metrics garbage", write("metrics.jsonl", "not json\n{]\n")),
        ("metrics non-utf8", write("metrics.jsonl", b"\xff\xfe\n")),
        ("metrics rows without epoch", write("metrics.jsonl", '{"a": 1}\n[1]\n')),
        ("metrics missing", lambda d: (d / "metrics.jsonl").unlink()),
        ("summary garbage", write("summary.json", "{")),
        ("stale tmp files", lambda d: ((d / ".checkpoint.pt.abc123.tmp").write_bytes(b"x"),
                                       (d / ".metrics.jsonl.x_9.tmp").write_text("x"))),
    ]
    for n in sorted({0, 1, 10, len(cfg) // 2, len(cfg) - 5} | {rng.randrange(len(cfg)) for _ in range(6)}):
        out.append((f"config cut at {n}", write("config.yaml", cfg[:n])))
    out += [
        ("config garbage", write("config.yaml", "{{{: [")),
        ("config a list", write("config.yaml", "- 1\n- 2\n")),
        ("config non-utf8", write("config.yaml", b"nodes: \xff\n")),
        ("config recursive", write("config.yaml", "a: &a [*a]\n")),
        ("config unknown option", write("config.yaml", cfg + "bogus: 1\n")),
        ("config bad value", write("config.yaml", cfg.replace("nodes: 4", "nodes: -4"))),
        ("config other width", write("config.yaml", cfg.replace("width: 4", "width: 6"))),
        ("config other nodes", write("config.yaml", cfg.replace("nodes: 4", "nodes: 5"))),
        ("config python tag", write("config.yaml", "!!python/object/apply:os.system ['touch PWNED']\n")),
        ("config interpolation", write("config.yaml", cfg.replace("name: good", "name: ${oc.env:HOME}"))),
        ("config missing", lambda d: (d / "config.yaml").unlink()),
        ("config is a folder", lambda d: ((d / "config.yaml").unlink(), (d / "config.yaml").mkdir())),
    ]
    return out
