"""Issue 36: nothing lost, nothing run, no traceback — one test per cause the fuzz and the
hand checks found (the seeded whole-command fuzz is in tests/cli/test_fuzz_whole_commands.py)."""
from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.helpers import call, override

FAST = ["device=cpu", "model=mlp", "model.width=4", "nodes=4", "progress=false", "algorithm.consensus_rounds=2",
        "data.subset=200"]
ROOT = Path(__file__).resolve().parents[2]




def one_line(rc, lines, needle=None, code=2):
    assert rc == code, lines
    assert len(lines) == 1 and lines[0].startswith("decent8: error: "), lines
    assert "Traceback" not in lines[0]
    if needle is not None:
        assert needle in lines[0], lines


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


USER_MODULE = '''
import torch
from torch import nn

MARKER = {marker!r}

def make_reg(input_shape, num_classes):
    f = 1
    for s in input_shape:
        f *= s
    return nn.Sequential(nn.Flatten(), nn.Linear(f, num_classes))

def make_lazy(num_classes):
    return nn.Sequential(nn.Flatten(), nn.LazyLinear(num_classes))

def pwn(input_shape, num_classes):
    open(MARKER, "w").write("ran")
    return make_reg(input_shape, num_classes)
'''


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """An importable module of model factories (a unique name: imports are cached)."""
    name = f"d8user_{os.getpid()}_{time.monotonic_ns()}"
    folder = tmp_path / "pkgs"
    folder.mkdir()
    (folder / f"{name}.py").write_text(USER_MODULE.format(marker=str(tmp_path / "PWNED")))
    monkeypatch.syspath_prepend(str(folder))
    return name


def regression_npz(path: Path) -> Path:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(120, 5)).astype("float32")
    np.savez(path, x=x, y=(x @ np.ones(5)).astype("float32"))
    return path


# ------------------------------------------------------------------ 1. regression summary
@pytest.mark.slow   # > 6 s on 2 cores: kept out of the fast subset (issue 30)
def test_regression_run_prints_a_loss_summary(tmp_path, user_module):
    data = regression_npz(tmp_path / "xy.npz")
    rc, out, lines = call(["train", f"model={user_module}:make_reg", "data.name=tensors", f"data.path={data}",
                           "loss=mse", "nodes=4", "epochs=2", "device=cpu", "progress=false", f"out_dir={tmp_path}",
                           "name=reg"])
    assert rc == 0 and not lines, lines
    assert "mean node test loss" in out and "averaged-model test loss" in out and "accuracy" not in out
    s = json.loads((tmp_path / "reg" / "summary.json").read_text())
    assert s["mean_node_accuracy"] is None and f"{s['mean_node_loss']:.4g}" in out


def test_summary_table_copes_with_any_missing_metric():
    from decent8.cli.train_cmd import summary_table

    table = summary_table({})
    assert table.count("n/a") == 8
    full = summary_table({"mean_node_accuracy": 0.5, "averaged_model_accuracy": 0.25, "min_node_accuracy": 0.1,
                          "max_node_accuracy": None, "bytes_sent_per_node": 2000.0, "message_bytes": "x"})
    assert "50.00 %" in full and "25.00 %" in full and "2.0 KB" in full and full.count("n/a") == 5


# ------------------------------------------------------------------ 2., 5., 6., 7., 9.: one line, nothing written
def test_build_time_reproducers_are_one_line_and_write_nothing(tmp_path, user_module):
    torch.save({"x": {"a": torch.randn(60, 4), "b": torch.randn(60, 4)}, "y": torch.randint(0, 3, (60,))},
               tmp_path / "dict.pt")
    (tmp_path / "links.bin").write_bytes(bytes(range(256)) * 4)
    out = tmp_path / "runs"
    cases = [
        (["data.name=tensors", f"data.path={tmp_path / 'dict.pt'}", "nodes=2"], "named inputs"),
        ([f"model={user_module}:make_lazy", "nodes=2", "data.subset=200"], "lazy parameters"),
        (["optimizer.betas=[[1]]", *FAST], "optimizer.betas"),
        ([f"network.links={tmp_path / 'links.bin'}", *FAST], "not UTF-8"),
        (["loss=torch.nn.functional:huber_loss", *FAST], "cannot score this model"),
    ]
    for args, needle in cases:
        for check in ([], ["--check"]):
            rc, _, lines = call(["train", "device=cpu", "epochs=1", "progress=false", f"out_dir={out}", *args, *check])
            one_line(rc, lines, needle)
            assert not out.exists(), (args, sorted(out.rglob("*")))


# ------------------------------------------------------------------ 3., 4.: report of damaged folders
@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("finished")
    rc, _, lines = call(["train", *FAST, "epochs=2", f"out_dir={root}", "name=good", "--quiet"])
    assert rc == 0, lines
    return root / "good"


def test_report_of_a_sweep_whose_summary_lacks_bytes_and_of_binary_metrics(tmp_path, finished_run):
    import shutil

    sweep = tmp_path / "sweep"
    for i in range(2):
        shutil.copytree(finished_run, sweep / f"cell{i}")
        cfg = sweep / f"cell{i}" / "config.yaml"
        cfg.write_text(cfg.read_text().replace("seed: 0", f"seed: {i}"))
    s = json.loads((sweep / "cell0" / "summary.json").read_text())
    del s["bytes_sent_per_node"]
    s["mean_node_accuracy"] = "high"                     # not a number: counts as missing
    (sweep / "cell0" / "summary.json").write_text(json.dumps(s))
    (sweep / "cell1" / "metrics.jsonl").write_bytes(os.urandom(3000))
    rc, out, lines = call(["report", str(sweep)])
    assert rc == 0 and not [ln for ln in lines if "Warning" not in ln], lines
    assert (sweep / "report.md").is_file()
    rc, out, lines = call(["report", str(sweep / "cell0"), str(sweep / "cell1"), "--out", str(tmp_path / "cmp")])
    assert rc == 0 and (tmp_path / "cmp" / "report.md").is_file(), lines
    (sweep / "sweep.json").write_text('{"cells": [{"name": "../x", "labels": {}}], "axes": 3}')   # foreign plan
    rc, out, lines = call(["report", str(sweep), "--no-figures"])
    assert rc == 0, lines


def test_report_removes_a_killed_runs_temporaries_and_spares_a_live_ones(tmp_path, finished_run):
    import shutil

    run = tmp_path / "r"
    shutil.copytree(finished_run, run)
    old = [run / ".curves.png.k2j3x.tmp", run / ".partition.png.ab_12.tmp", run / ".time.png.zz9.tmp"]
    for f in old:
        f.write_bytes(b"half a png")
        os.utime(f, (time.time() - 3600, time.time() - 3600))
    live = run / ".curves.png.live1.tmp"
    live.write_bytes(b"being written")
    rc, _, lines = call(["report", str(run), "--no-figures", "--out", str(tmp_path / "cmp")])
    assert rc == 0, lines
    assert not any(f.exists() for f in old) and live.exists()
    rc, _, lines = call(["train", "--resume", str(run), "--quiet"])    # resume removes every temporary
    assert rc == 0 and not live.exists(), lines


# ------------------------------------------------------------------ 8. pretrained folders
def _hf_folder(path: Path) -> Path:
    from tests.hf_tiny import factory

    factory(4, 64).save_pretrained(path)
    return path


def _ids(path: Path) -> Path:
    g = torch.Generator().manual_seed(0)
    torch.save({"x": torch.randint(1, 60, (64, 8), generator=g), "y": torch.randint(0, 4, (64,), generator=g)}, path)
    return path


HF_ARGS = ["model=hf", "nodes=2", "epochs=1", "device=cpu", "progress=false", "data.name=tensors"]


def test_a_pretrained_folder_naming_custom_code_is_refused_without_a_prompt(tmp_path):
    folder = _hf_folder(tmp_path / "custom")
    marker = tmp_path / "PWNED"
    cfg = json.loads((folder / "config.json").read_text())
    cfg["auto_map"] = {"AutoConfig": "evil.EvilConfig", "AutoModelForSequenceClassification": "evil.EvilModel"}
    (folder / "config.json").write_text(json.dumps(cfg))
    (folder / "evil.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n"
                                    "from transformers import BertConfig as EvilConfig\n"
                                    "from transformers import BertForSequenceClassification as EvilModel\n")
    ids = _ids(tmp_path / "ids.pt")
    args = ["train", *HF_ARGS, f"model.pretrained={folder}", f"data.path={ids}", f"out_dir={tmp_path / 'runs'}"]
    rc, _, lines = call(args)
    one_line(rc, lines, "custom code")
    assert str(folder) in lines[0]
    # a terminal user answering "y" to transformers' prompt: there is no prompt, nothing runs
    p = subprocess.run([sys.executable, "-m", "decent8", *args], input="y\ny\n", capture_output=True, text=True,
                       cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, timeout=300)
    err = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2 and len(err) == 1 and "custom code" in err[0], p.stderr
    assert "[y/N]" not in p.stdout + p.stderr
    assert not marker.exists() and not (tmp_path / "runs").exists()


class _Exploit:
    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_pretrained_folder_with_a_malicious_pickle_is_one_line(tmp_path):
    folder = _hf_folder(tmp_path / "pickled")
    for f in folder.glob("*.safetensors"):
        f.unlink()
    marker = tmp_path / "PWNED"
    torch.save({"bert.embeddings.word_embeddings.weight": _Exploit(marker)}, folder / "pytorch_model.bin")
    rc, _, lines = call(["train", *HF_ARGS, f"model.pretrained={folder}", f"data.path={_ids(tmp_path / 'ids.pt')}",
                         f"out_dir={tmp_path / 'runs'}"])
    one_line(rc, lines, "not plain tensors")
    assert "\x1b" not in lines[0] and not marker.exists()


def test_library_messages_lose_terminal_escapes():
    from decent8.errors import first_line

    assert first_line(RuntimeError("\x1b[1mWeights only load failed\x1b[0m. Re-run\nsecond")) == \
        "Weights only load failed. Re-run"


# ------------------------------------------------------------------ resuming runs no code from the folder
def _evil_run(tmp_path: Path, backend: str = "simulator") -> tuple[Path, Path]:
    """runs/evil: a finished run whose config names a factory shipped inside the folder."""
    rc, _, lines = call(["train", *FAST, "epochs=1", "out_dir=runs", "name=evil", "--quiet"])
    assert rc == 0, lines
    run = tmp_path / "runs" / "evil"
    marker = tmp_path / "PWNED"
    (tmp_path / "runs" / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('init')\n")
    (run / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('init')\n")
    (run / "payload.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n" + USER_MODULE.format(marker=""))
    cfg = (run / "config.yaml").read_text().replace("  name: mlp", "  name: runs.evil.payload:make_reg")
    (run / "config.yaml").write_text(cfg.replace("backend: simulator", f"backend: {backend}"))
    return run, marker


@pytest.mark.slow   # > 6 s on 2 cores: kept out of the fast subset (issue 30)
def test_resume_does_not_run_code_inside_the_run_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    run, marker = _evil_run(tmp_path)
    for extra in ([], ["--trust-config"], ["model=runs.evil.payload:make_reg"], ["--check"]):
        rc, _, lines = call(["train", "--resume", "runs/evil", *extra])
        one_line(rc, lines, "never runs code from a run folder")
    assert not marker.exists()
    # the same folder for the distributed backend: `decent8 launch` refuses before starting anything
    cfg = run / "config.yaml"
    cfg.write_text(cfg.read_text().replace("backend: simulator", "backend: distributed"))
    import decent8.cli.launch_cmd as launch_cmd

    monkeypatch.setattr(launch_cmd, "LocalNodes", lambda *a, **k: pytest.fail("launch started processes"))
    rc, _, lines = call(["launch", "--nodes", "4", "--resume", "runs/evil"])
    one_line(rc, lines, "never runs code from a run folder")
    # and `python -m decent8 train --resume` (each rank under torchrun runs the same): marker stays absent
    p = subprocess.run([sys.executable, "-m", "decent8", "train", "--resume", "runs/evil", "--trust-config"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(ROOT / "src"), "RANK": "0", "WORLD_SIZE": "4"})
    err = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2 and len(err) == 1 and "never runs code from a run folder" in err[0], p.stderr
    assert not marker.exists()


@pytest.mark.slow   # > 6 s on 2 cores: kept out of the fast subset (issue 30)
def test_resume_imports_code_only_when_named_again(tmp_path, monkeypatch, user_module):
    monkeypatch.chdir(tmp_path)
    rc, _, lines = call(["train", *FAST, "epochs=2", f"model={user_module}:pwn", "out_dir=runs", "name=u",
                         "checkpoint=true", "--quiet"])
    assert rc == 0, lines
    marker = tmp_path / "PWNED"
    marker.unlink()
    state = torch.load(tmp_path / "runs" / "u" / "checkpoint.pt", weights_only=True)
    state["epoch"] = 1
    torch.save(state, tmp_path / "runs" / "u" / "checkpoint.pt")
    rc, _, lines = call(["train", "--resume", "runs/u"])
    one_line(rc, lines, f"--resume runs/u model.name={user_module}:pwn")
    assert "--trust-config" in lines[0] and not marker.exists()
    rc, _, lines = call(["train", "--resume", "runs/u", "model=other:thing"])
    one_line(rc, lines, "a resumed run keeps its config")
    rc, _, lines = call(["train", "--resume", "runs/u", "nodes=3"])
    one_line(rc, lines, "nodes=3")
    rc, _, lines = call(["train", "--trust-config", *FAST])
    one_line(rc, lines, "--trust-config")
    rc, _, lines = call(["train", "--resume", "runs/u", f"model={user_module}:pwn", "--quiet"])
    assert rc == 0 and marker.exists(), lines
    marker.unlink()
    rc, _, lines = call(["train", "--resume", "runs/u", "--trust-config", "--quiet"])
    assert rc == 0 and marker.exists(), lines


# ------------------------------------------------------------------ sweeps keep a user's files
def test_a_sweep_named_after_a_users_folder_leaves_it_byte_identical(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    mine = tmp_path / "X" / "results"
    (mine / "figures").mkdir(parents=True)
    for name in ("results.csv", "results.md", "report.md", "figures/curves.png"):
        (mine / name).write_bytes(os.urandom(64))
    (mine / "sweep.json").write_text('{"my": "own plan"}')
    before = tree(mine)
    for extra in ([], ["--plan-only"], ["--dry-run"]):
        rc, _, lines = call(["sweep", "epochs=1", *FAST, "out_dir=X", "--name", "results", *extra])
        one_line(rc, lines, "--name")
        assert tree(mine) == before
    # a cell folder of an own sweep that holds someone else's summary.json
    rc, _, lines = call(["sweep", "epochs=1", *FAST, "out_dir=X", "--name", "mine", "--plan-only"])
    assert rc == 0, lines
    cell = tmp_path / "X" / "mine" / "base"
    cell.mkdir()
    (cell / "summary.json").write_text('{"accuracy": 0.9}')
    before = tree(tmp_path / "X" / "mine")
    rc, _, lines = call(["sweep", "epochs=1", *FAST, "out_dir=X", "--name", "mine"])
    one_line(rc, lines, "not the summary of a decent8 run")
    assert tree(tmp_path / "X" / "mine") == before


# ------------------------------------------------------------------ signals are never lost
class _Bomb:
    """Raises the signal inside a finalizer: the handler's exception is swallowed there."""

    def __init__(self, sig: int) -> None:
        self.sig = sig

    def __del__(self):
        signal.raise_signal(self.sig)


@pytest.mark.slow   # three runs each (> 6 s on 2 cores): kept out of the fast subset (issue 30)
@pytest.mark.parametrize("sig,code,word", [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")])
def test_a_signal_swallowed_while_plots_are_written_still_stops_the_run(sig, code, word, tmp_path, monkeypatch):
    import decent8.train.loop as loop

    args = [*FAST, "epochs=3", "eval_every=1", f"out_dir={tmp_path}"]
    rc, _, lines = call(["train", *args, "name=full", "--quiet"])
    assert rc == 0, lines
    monkeypatch.setattr(loop, "PLOT_EVERY_S", 0.0)   # live figures after every epoch (a short run draws none)
    plot, calls = loop.plot_curves, []

    def plot_and_signal(*a, **k):
        plot(*a, **k)
        calls.append(1)
        if len(calls) == 2:
            _Bomb(sig)  # dropped at once: "Exception ignored in __del__"

    monkeypatch.setattr(loop, "plot_curves", plot_and_signal)
    rc, _, lines = call(["train", *args, "name=cut", "--quiet"])
    one_line(rc, lines, f"continue it with `decent8 train --resume {tmp_path / 'cut'}`", code=code)
    assert lines[0].startswith(f"decent8: error: {word}")
    monkeypatch.setattr(loop, "plot_curves", plot)
    rc, _, lines = call(["train", "--resume", str(tmp_path / "cut"), "--quiet"])
    assert rc == 0, lines
    a, b = (torch.load(tmp_path / n / "checkpoint.pt", weights_only=True)["engine"]["z"] for n in ("full", "cut"))
    assert torch.equal(a, b)


# ------------------------------------------------------------------ smaller ones
def test_start_failure_of_launch_is_one_line(tmp_path, monkeypatch):
    import decent8.cli.launch_cmd as launch_cmd

    real, started = subprocess.Popen, []

    def popen(*a, **k):
        if len(started) == 2:
            raise OSError(24, "Too many open files")
        p = real([sys.executable, "-c", "import time; time.sleep(30)"])
        started.append(p)
        return p

    monkeypatch.setattr(launch_cmd.subprocess, "Popen", popen)
    from decent8.errors import ConfigError

    with pytest.raises(ConfigError, match="cannot start 4 processes: Too many open files"):
        launch_cmd.LocalNodes(4, ["x"], log_dir=tmp_path)
    assert all(p.poll() is not None for p in started)


def test_launch_prints_an_error_that_several_nodes_print_once():
    import threading

    from decent8.cli.launch_cmd import _pump

    r0, w0 = os.pipe()
    r1, w1 = os.pipe()
    os.write(w0, b"10%|#   |\r20%|##  |\rdecent8: error: node 3 died\n")
    os.write(w1, b"decent8: error: node 3 died\nother\n")
    os.close(w0)
    os.close(w1)
    sink, seen, lock = io.BytesIO(), set(), threading.Lock()
    _pump(os.fdopen(r0, "rb"), b"", sink, seen, lock)
    _pump(os.fdopen(r1, "rb"), b"[node 1] ", sink, seen, lock)
    assert sink.getvalue() == b"10%|#   |\r20%|##  |\rdecent8: error: node 3 died\n[node 1] other\n"


def test_a_failed_checkpoint_write_names_the_file_size_limit(tmp_path, monkeypatch):
    import resource

    from decent8.atomic import atomic_torch_save

    monkeypatch.setattr(resource, "getrlimit", lambda what: (5 * 2**20, resource.RLIM_INFINITY))
    monkeypatch.setattr(torch, "save", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("unexpected pos 64")))
    with pytest.raises(OSError, match=r"limited to 5.0 MiB \(ulimit -f\)"):
        atomic_torch_save({"a": 1}, tmp_path / "c.pt")
    assert not list(tmp_path.iterdir())


def test_a_batch_larger_than_a_shard_is_warned_in_one_line(tmp_path):
    rc, out, lines = call(["train", *override(FAST, "nodes=8", "data.batch_size=64"), "--check"])
    assert rc == 0 and len(lines) == 1 and lines[0].startswith("decent8: warning: data.batch_size=64"), lines
    rc, out, lines = call(["train", *override(FAST, "nodes=8", "data.batch_size=8"), "--check"])
    assert rc == 0 and not lines, lines


# ------------------------------------------------------------------ a peer that sends garbage
PEER = r'''
import os, sys, torch
from decent8.comm.distributed import DistributedCommunicator, PeerError
from decent8.compression import make_compressor
from decent8.compression.payload import Payload
from decent8.models import StackedModel, make_model
from decent8.topology import make_topology

kind, rank = sys.argv[1], int(os.environ["RANK"])
comm = DistributedCommunicator(make_topology("directed_ring", 2), "cpu", timeout_s=20)
layout = StackedModel(make_model("mlp", (1, 8, 8), 10, 8), torch.device("cpu"), nodes=1).layout
c = make_compressor("topk", layout, ratio=0.9, value_bits=32, bits=8, index_dtype="auto", stochastic=False)


def malformed(p):
    t = dict(p.tensors)
    v, i = t["values"], t["indices"]
    if kind == "larger":
        t["values"] = torch.cat([v, v], dim=1)
    elif kind == "smaller":
        t["values"] = v[:, : v.shape[1] // 2].contiguous()
    elif kind == "empty":
        t["values"], t["indices"] = v[:, :0].contiguous(), i[:, :0].contiguous()
    elif kind == "wider":
        t["values"] = v.to(torch.float64)
    elif kind == "indices":
        i = i.clone()
        i[0, 0] = -5
        t["indices"] = i
    return Payload(t)


try:
    for step in range(3):
        p = c.encode(torch.randn(1, layout.dim))
        own = c.decode(p)
        if rank == 1 and step == 1:       # after the handshake: skip its own checks, send garbage
            comm._check_payload = lambda *a: None
            p = malformed(p)
        comm.exchange(p, c, step=step, decoded=own)
    comm.barrier()
except PeerError as e:
    sys.stderr.write(f"decent8: error: {e}\n")
    sys.exit(1)
print("finished with exit 0")
'''


@pytest.mark.parametrize("kind", [
    "larger", pytest.param("smaller", marks=pytest.mark.slow), pytest.param("empty", marks=pytest.mark.slow),
    pytest.param("wider", marks=pytest.mark.slow), pytest.param("indices", marks=pytest.mark.slow)])
def test_a_peer_sending_a_malformed_message_stops_both_ranks_with_one_line(kind, tmp_path):
    from decent8.cli.launch_cmd import LocalNodes

    script = tmp_path / "peer.py"
    script.write_text(PEER)
    group = LocalNodes(2, [sys.executable, str(script), kind], log_dir=tmp_path,
                       env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    codes, _, _ = group.wait(15)
    logs = [(tmp_path / f"node{r}.log").read_text() for r in range(2)]
    assert all(c not in (0, None) and c > 0 for c in codes), (codes, logs)  # no SIGABRT, no exit 0
    for log in logs:
        lines = [ln for ln in log.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("decent8: error: "), logs
    assert "node 1 sent a malformed" in logs[0] and "seen by node 0" in logs[0], logs


@pytest.mark.slow   # 21 short forked runs and their resumes, two at a time: 327 s on 2 cores at load 8 (was 483 s)
def test_signals_at_random_moments_all_stop_the_run_and_resume_identically(tmp_path, one_thread):
    """20 signals (SIGINT / SIGTERM alternating) at random moments of runs that write their
    plots every epoch: every one stops the run with 130 / 143 and the resume line, and each
    resumed run ends with the parameters of an uninterrupted one (bitwise).

    Each run is its own `decent8 train` process, forked from a server that imported decent8
    once (tests/processes.py): the signal lands on a real process, without ~6 s of imports."""
    import random
    from concurrent.futures import ThreadPoolExecutor

    from tests.processes import start_decent8

    # One execution for every run: with sim.chunk=auto each process would time its own, and
    # another execution is the same run only up to rounding (tests/test_equivalence.py)
    args = [*FAST, "epochs=2", "eval_every=1", f"out_dir={tmp_path}", "sim.chunk=layers:4", "tensorboard=false"]
    rng = random.Random(36)
    delays = [rng.uniform(0.0, 1.5) for _ in range(20)]

    def run(argv: list[str], name: str):
        p = start_decent8(["train", *argv, "--quiet"], tmp_path, tmp_path / f"{name}.err")
        return p

    def reference() -> tuple[int | None, str]:
        p = run([*args, "name=full"], "full")
        p.join(300)
        return p.exitcode, (tmp_path / "full.err").read_text()

    def cut(i: int) -> tuple[int, int, int | None, str, int | None, str]:
        sig, code = (signal.SIGINT, 130) if i % 2 == 0 else (signal.SIGTERM, 143)
        run_dir = tmp_path / f"cut{i}"
        p = run([*args, f"name=cut{i}"], f"cut{i}")
        deadline = time.monotonic() + 300
        while not (run_dir / "metrics.jsonl").exists() and p.exitcode is None:   # the first epoch's plots are next
            assert time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(delays[i])
        if p.exitcode is None:
            os.kill(p.pid, sig)
        p.join(300)
        err = (tmp_path / f"cut{i}.err").read_text()
        if p.exitcode == 0:          # it finished before the signal landed
            return i, code, 0, err, None, ""
        q = run(["--resume", str(run_dir)], f"resume{i}")
        q.join(300)
        return i, code, p.exitcode, err, q.exitcode, (tmp_path / f"resume{i}.err").read_text()

    with ThreadPoolExecutor(2) as pool:
        full = pool.submit(reference)
        outcomes = list(pool.map(cut, range(20)))
    rc, err = full.result()
    assert rc == 0, err
    reference_z = torch.load(tmp_path / "full" / "checkpoint.pt", weights_only=True)["engine"]["z"]
    stopped = 0
    for i, code, returncode, err, resumed, resume_err in outcomes:
        if returncode == 0:
            continue
        stopped += 1
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert returncode == code and len(lines) == 1, (i, returncode, err)
        run_dir = tmp_path / f"cut{i}"
        assert f"continue it with `decent8 train --resume {run_dir.name}`" in lines[0] or \
            f"--resume {run_dir}" in lines[0], lines
        assert resumed == 0, (i, resume_err)
        z = torch.load(run_dir / "checkpoint.pt", weights_only=True)["engine"]["z"]
        assert torch.equal(z, reference_z), i
    assert stopped >= 15, stopped


def test_a_short_run_draws_its_figures_once_and_a_long_one_as_it_goes(tmp_path, monkeypatch):
    """Live figures are redrawn at most every PLOT_EVERY_S (and on every tenth of the epochs);
    the end of a run always draws them, once (after the consensus rounds if there are any)."""
    import decent8.train.loop as loop

    drawn: list[str] = []
    curves, times = loop.plot_curves, loop.plot_time
    monkeypatch.setattr(loop, "plot_curves", lambda *a, **k: (drawn.append("curves"), curves(*a, **k)))
    monkeypatch.setattr(loop, "plot_time", lambda *a, **k: (drawn.append("time"), times(*a, **k)))
    args = [*FAST, "epochs=3", "eval_every=1", f"out_dir={tmp_path}", "--quiet"]
    for rounds, expected in ((2, ["time", "curves"]), (0, ["curves", "time"])):
        drawn.clear()
        assert call(["train", *args, f"algorithm.consensus_rounds={rounds}", f"name=r{rounds}"])[0] == 0
        assert drawn == expected
        assert (tmp_path / f"r{rounds}" / "curves.png").stat().st_size > 0
    monkeypatch.setattr(loop, "PLOT_EVERY_S", 0.0)
    drawn.clear()
    assert call(["train", *args, "algorithm.consensus_rounds=2", "name=live"])[0] == 0
    assert drawn == ["curves", "time"] * 2 + ["time", "curves"]
