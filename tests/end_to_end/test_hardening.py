"""Issue 11: no code from files or peers, no foreign data deleted, reproducers give one line."""
from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from decent8.config import load_config, to_yaml
from decent8.errors import ConfigError

from tests.helpers import call, override

FAST = ["device=cpu", "model=mlp", "model.width=4", "nodes=4", "progress=false", "algorithm.consensus_rounds=2"]




def one_line(rc, lines, option=None, code=2):
    assert rc == code, lines
    assert len(lines) == 1 and lines[0].startswith("decent8: error: "), lines
    if option is not None:
        assert option in lines[0], lines


class Exploit:
    """Unpickling this runs ``touch <marker>``."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


# ------------------------------------------------------------------ security
def test_crafted_checkpoint_does_not_run_code_on_resume(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(to_yaml(load_config(None, [*FAST, "epochs=1", f"out_dir={tmp_path}", "name=run"])))
    marker = tmp_path / "PWNED"
    torch.save({"epoch": 1, "engine": Exploit(marker)}, run / "checkpoint.pt")
    with open(run / "checkpoint.pt", "rb") as f:   # plain pickle too (torch.load's legacy path)
        pass
    for argv in (["train", "--resume", str(run)], ["train", "--check", "--resume", str(run)]):
        rc, _, lines = call(argv)
        one_line(rc, lines, "resume")
        assert "checkpoint" in lines[0]
    (run / "checkpoint.pt").write_bytes(pickle.dumps(Exploit(marker)))
    rc, _, lines = call(["train", "--resume", str(run)])
    one_line(rc, lines, "resume")
    assert not marker.exists()


def test_real_checkpoints_load_with_weights_only(tmp_path):
    rc, _, lines = call(["train", *FAST, "epochs=1", f"out_dir={tmp_path}", "name=r", "--quiet"])
    assert rc == 0, lines
    state = torch.load(tmp_path / "r" / "checkpoint.pt", weights_only=True)
    assert state["epoch"] == 1
    rc, _, lines = call(["train", "--resume", str(tmp_path / "r"), "--quiet"])   # resumes a finished run
    assert rc == 0, lines


def _cifar_batches(root: Path, labels=None, evil: Path | None = None):
    from tests.data_fixtures import write_cifar_pickles

    write_cifar_pickles(root)
    if evil is not None:
        (root / "data_batch_1").write_bytes(pickle.dumps({b"data": Exploit(evil), b"labels": [0]}, protocol=2))
    if labels is not None:
        d = {b"data": np.zeros((len(labels), 3072), np.uint8), b"labels": labels}
        (root / "test_batch").write_bytes(pickle.dumps(d, protocol=2))


def test_crafted_cifar_batch_does_not_run_code(tmp_path):
    from decent8.data.cifar10 import load_cifar10

    marker = tmp_path / "PWNED"
    root = tmp_path / "c"
    root.mkdir()
    _cifar_batches(root, evil=marker)
    with pytest.raises(ConfigError) as e:
        load_cifar10(str(root), cache_dir=str(tmp_path / "cache"))
    assert "data_batch_1" in str(e.value) and "not allowed" in str(e.value)
    assert not marker.exists()


def test_restricted_unpickler_reads_numpy_batches_in_both_protocols():
    from decent8.data.cifar10 import safe_unpickle

    d = {b"data": np.arange(6, dtype=np.uint8).reshape(2, 3), b"labels": [1, 2], b"batch_label": b"x",
         b"filenames": [b"a.png"], "n": np.int64(3)}
    for proto in (2, 4, 5):
        back = safe_unpickle(pickle.dumps(d, protocol=proto))
        assert np.array_equal(back[b"data"], d[b"data"]) and back[b"labels"] == [1, 2] and back["n"] == 3
    for evil in (pickle.dumps(Exploit(Path("/nonexistent/x"))), pickle.dumps(eval), pickle.dumps(print)):
        with pytest.raises(pickle.UnpicklingError):
            safe_unpickle(evil)


def test_cifar_label_out_of_range_is_one_line(tmp_path):
    from decent8.data.cifar10 import load_cifar10

    root = tmp_path / "c"
    root.mkdir()
    _cifar_batches(root, labels=[0, 10**6])
    with pytest.raises(ConfigError, match="label"):
        load_cifar10(str(root), cache_dir=str(tmp_path / "cache"))


def test_sweep_refuses_to_delete_a_folder_it_did_not_write(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    thesis = tmp_path / "X" / "victim" / "base" / "thesis"
    thesis.mkdir(parents=True)
    (thesis / "a.tex").write_text("x")
    for extra in (["--dry-run"], []):
        rc, _, lines = call(["sweep", "epochs=1", *FAST, "out_dir=X", "--name", "victim", *extra])
        one_line(rc, lines, "--name")
        assert "did not write" in lines[0]
    assert (thesis / "a.tex").read_text() == "x"
    # a cell folder decent8 left (config + partition, no checkpoint) is still cleared and rerun
    from decent8.experiments.sweep import _clear, check_clearable

    own = tmp_path / "own"
    own.mkdir()
    for f in ("config.yaml", "partition.csv", ".metrics.jsonl.ab12.tmp", "execution.json", "time.png"):
        (own / f).write_text("x")
    (own / "tensorboard").mkdir()
    (own / "tensorboard" / "events.out.tfevents.1764.host").write_text("x")
    check_clearable(own)
    _clear(own)
    assert not own.exists()
    (tmp_path / "mixed").mkdir()
    (tmp_path / "mixed" / "config.yaml").write_text("x")
    (tmp_path / "mixed" / "notes.txt").write_text("keep me")
    with pytest.raises(ConfigError, match="notes.txt"):
        _clear(tmp_path / "mixed")
    assert (tmp_path / "mixed" / "notes.txt").exists()
    (tmp_path / "mixed" / "notes.txt").unlink()
    (tmp_path / "mixed" / "tensorboard").mkdir()
    (tmp_path / "mixed" / "tensorboard" / "notes.txt").write_text("keep me")
    with pytest.raises(ConfigError, match="tensorboard/"):
        _clear(tmp_path / "mixed")
    assert (tmp_path / "mixed" / "tensorboard" / "notes.txt").exists()


@pytest.mark.parametrize("name", ["../../x", "/abs", "..", ".", " ", "a/b", "x" * 300, "tab\there", "back\\slash"])
def test_run_names_cannot_escape_out_dir(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "deep" / "out"
    rc, _, lines = call(["train", *FAST, "epochs=1", f"out_dir={out}", f"name={name}"])
    one_line(rc, lines, "name")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_interpolation_is_off_for_user_values(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    cfg = load_config(None, ["name=${oc.env:HOME}", "data.root=/a/\\${x}/b"])
    assert cfg.name == "${oc.env:HOME}" and cfg.data.root == "/a/\\${x}/b"
    f = tmp_path / "c.yaml"
    f.write_text("name: ${oc.env:HOME}\nout_dir: ${name}\n")
    cfg = load_config(str(f))
    assert (cfg.name, cfg.out_dir) == ("${oc.env:HOME}", "${name}")
    rc, out, lines = call(["train", "--check", *FAST, f"out_dir={tmp_path / 'runs'}", "name=${oc.env:HOME}"])
    assert rc == 0 and str(tmp_path / "runs" / "${oc.env:HOME}") in out, (out, lines)


def test_a_malformed_peer_payload_stops_naming_the_peer():
    from decent8.compression import make_compressor
    from decent8.compression.payload import Payload
    from decent8.layout import ParamLayout

    layout = ParamLayout.from_shapes([(10, 10), (10,)]) if hasattr(ParamLayout, "from_shapes") else None
    if layout is None:
        from decent8.models import StackedModel, make_model
        layout = StackedModel(make_model("mlp", (1, 8, 8), 10, 4), torch.device("cpu"), nodes=1).layout
    for name, bits in (("topk", 32), ("topk", 8), ("randomk", 32)):
        comp = make_compressor(name, layout, ratio=0.9, value_bits=bits, bits=8, index_dtype="auto", stochastic=False)
        gens = [torch.Generator().manual_seed(0)]
        p = comp.encode(torch.randn(1, layout.dim), gens)
        assert comp.check_received(p) is None
        bad = dict(p.tensors)
        idx = bad["indices"].clone()
        idx[0, 3] = torch.iinfo(idx.dtype).max
        bad["indices"] = idx
        assert "index" in comp.check_received(Payload(bad))
        wide = dict(p.tensors)
        wide["values"] = wide["values"].to(torch.float64)
        assert "values" in comp.check_received(Payload(wide))


PEER_SCRIPT = r'''
import os, sys, torch
from decent8.comm.distributed import DistributedCommunicator, PeerError
from decent8.compression import make_compressor
from decent8.compression.payload import Payload
from decent8.models import StackedModel, make_model
from decent8.topology import make_topology

rank = int(os.environ["RANK"])
topo = make_topology("directed_ring", 2)
comm = DistributedCommunicator(topo, "cpu", timeout_s=20)
assert comm.broadcast_object(["name", None, 3]) == ["name", None, 3]        # JSON, not pickle
def layout(width):
    return StackedModel(make_model("mlp", (1, 8, 8), 10, width), torch.device("cpu"), nodes=1).layout
def comp(width):
    return make_compressor("topk", layout(width), ratio=0.9, value_bits=32, bits=8, index_dtype="auto", stochastic=False)
# 1. node 1 runs another model width: its header is refused before any payload is received
c = comp(4 if rank == 0 else 6)
try:
    comm.exchange(c.encode(torch.randn(1, c.layout.dim)), c, step=0)
    print("NO ERROR 1")
except PeerError as e:
    print("ERROR1", e)
# 2. same layout, node 1 sends out-of-range indices
c = comp(8)
p = c.encode(torch.randn(1, c.layout.dim))
own = c.decode(p)
if rank == 1:
    idx = p.tensors["indices"].clone(); idx[0, 0] = torch.iinfo(idx.dtype).max
    p = Payload({**p.tensors, "indices": idx})
comm._handshakes.clear()
try:
    comm.exchange(p, c, step=2, decoded=own)
    print("OK2")
except PeerError as e:
    print("ERROR2", e)
comm.close()
'''


def test_peer_with_another_layout_or_bad_indices_is_named_in_one_line(tmp_path):
    from decent8.cli.launch_cmd import LocalNodes

    script = tmp_path / "peer.py"
    script.write_text(PEER_SCRIPT)
    (tmp_path / "logs").mkdir()
    group = LocalNodes(2, [sys.executable, str(script)], log_dir=tmp_path / "logs")
    deadline = time.monotonic() + 240
    while any(c is None for c in group.poll()):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    group.close()
    logs = [(tmp_path / "logs" / f"node{r}.log").read_text() for r in range(2)]
    assert group.poll() == [0, 0], logs
    e1 = [ln for ln in logs[0].splitlines() if ln.startswith("ERROR1")]
    assert e1 and "node 1 would send" in e1[0] and "different configs" in e1[0], logs[0]
    assert any(ln.startswith("ERROR1") and "node 0" in ln for ln in logs[1].splitlines()), logs[1]
    e2 = [ln for ln in logs[0].splitlines() if ln.startswith("ERROR2")]
    assert e2 and "node 1 sent a malformed payload" in e2[0] and "outside" in e2[0], logs[0]
    assert "OK2" in logs[1], logs[1]


def test_launcher_store_listens_on_the_master_address_only(tmp_path):
    from decent8.cli.launch_cmd import LocalNodes

    group = LocalNodes(1, [sys.executable, "-c", "pass"], log_dir=tmp_path)
    try:
        assert group._sock.getsockname()[0] == "127.0.0.1"
        assert group.master_port == group._sock.getsockname()[1]
    finally:
        group.wait(1.0)


# ------------------------------------------------------------------ wrong results with exit 0
def test_divergence_in_the_final_consensus_rounds_is_caught(tmp_path):
    rc, _, lines = call(["train", *override(FAST, "epochs=1", "algorithm.gamma=2.5", "algorithm.consensus_rounds=500",
                                             f"out_dir={tmp_path}", "name=d"), "--quiet"])
    one_line(rc, lines, code=1)
    assert "diverged during the 500 final consensus rounds" in lines[0] and "algorithm.gamma" in lines[0]
    assert not (tmp_path / "d" / "summary.json").exists()


def test_summary_and_metrics_never_hold_bare_nan(tmp_path):
    from decent8.train.run_dir import RunDir

    run = RunDir(tmp_path)
    run.write_summary({"a": float("nan"), "b": [1.0, float("inf")], "c": 2.0})
    run.write_metrics([{"epoch": 1, "train_loss": float("nan")}])
    assert json.loads((tmp_path / "summary.json").read_text()) == {"a": None, "b": [1.0, None], "c": 2.0}
    assert "NaN" not in (tmp_path / "metrics.jsonl").read_text()


# ------------------------------------------------------------------ reproducers: one line, exit 2
REPRODUCERS = [
    (["seed=-1"], "seed"), (["seed=4294967296"], "seed"), (["topology=%s"], "topology"),
    (["model.width=-1"], "model.width"), (["model.width=0"], "model.width"), (["model.width=1000000"], "model.width"),
    (["optimizer.lr=1e308"], "optimizer.lr"), (["algorithm.gamma=1e308"], "algorithm.gamma"),
    (["nodes=1200"], "nodes"), (["data.eval_batch_size=0"], "data.eval_batch_size"),
    (["data.eval_batch_size=-1"], "data.eval_batch_size"), (["optimizer.decay_every=1e-310"], "optimizer.decay_every"),
    (["optimizer.milestones=[[1]]"], "optimizer.milestones"), (["data.batch_size=1000000000"], "data.batch_size"),
    (["optimizer.warmup_epochs=nan"], "optimizer.warmup_epochs"), (["optimizer.warmup_epochs=-1"], "optimizer.warmup_epochs"),
    (["optimizer.milestones=[inf]"], "optimizer.milestones"), (["optimizer.milestones=[-3]"], "optimizer.milestones"),
    (["optimizer.decay_every=nan"], "optimizer.decay_every"), (["optimizer.decay_every=-1"], "optimizer.decay_every"),
    (["device=cpu:1"], "device"), (["name= "], "name"), (["dist_timeout_s=inf"], "dist_timeout_s"),
    (["name=" + "x" * 300], "name"),
]


@pytest.mark.parametrize("args,option", REPRODUCERS)
def test_reproducers_are_one_line_exit_2_without_a_folder(args, option, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    base = ["device=cpu"] if option != "device" else []    # one value per option: no repeated-key warning
    rc, _, lines = call(["train", *base, "epochs=1", "progress=false", f"out_dir={tmp_path / 'runs'}", *args])
    one_line(rc, lines, option)
    assert not (tmp_path / "runs").exists()


def test_yaml_indicator_values_are_literal_text(tmp_path):
    assert load_config(None, ["name=*x"]).name == "*x"
    assert load_config(None, ["name=&a [*a]"]).name == "&a [*a]"


@pytest.mark.parametrize("text,needle", [
    ("optimizer:\n  milestones: {a: 1}\n", "milestones"),
    ("optimizer: [1, 2]\n", "optimizer"),
    ("a: &a [*a]\n", "recursive"),
    ("nodes: !!python/object/apply:os.system ['true']\n", "config"),
])
def test_malformed_yaml_files_are_one_line(text, needle, tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text(text)
    rc, _, lines = call(["train", "--check", str(f)])
    one_line(rc, lines, needle)


def test_file_reproducers(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    hostname = tmp_path / "hostname"
    hostname.write_text("x")
    rc, _, lines = call(["train", *FAST, f"out_dir={hostname}"])
    one_line(rc, lines, "out_dir")
    g = tmp_path / "g.txt"
    g.write_bytes(b"0 1\n1 \xff\n")
    rc, _, lines = call(["train", *FAST, "topology=edge_list", f"topology.path={g}", f"out_dir={tmp_path / 'r'}"])
    one_line(rc, lines, "topology.path")
    assert "UTF-8" in lines[0]
    rc, _, lines = call(["topology", "ring", "nodes=100000"])
    one_line(rc, lines, "nodes")
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("data", [b"\x00\x00\x08\x03\x00", b"\x00\x00\x08\x09" + b"\x00" * 40, b"\x00\x00\x08\x00",
                                  b"\x00\x00\x08\x03" + b"\xff" * 12, b"\x00\x00\x0c\x01\x00\x00\x00\x01\x00\x0f\x42\x40"])
def test_malformed_mnist_idx_headers_are_one_line(data, tmp_path):
    from decent8.data.mnist import _check_labels, read_idx

    try:
        arr = read_idx(data, "train-images-idx3-ubyte")
    except ConfigError as e:
        assert "train-images-idx3-ubyte" in str(e)
        return
    with pytest.raises(ConfigError, match="class ids"):   # a label of 10^6
        _check_labels(tmp_path, "train labels", arr)


def test_launch_validates_build_time_errors_before_starting_anything():
    from decent8.cli.launch_cmd import plan_launch

    for args, option in ((["nodes=4", "data.batch_size=1000000000"], "data.batch_size"),
                         (["nodes=4", "model.width=-1"], "model.width"),
                         (["nodes=4", "topology=edge_list", "topology.path=/nonexistent"], "topology.path")):
        t0 = time.monotonic()
        with pytest.raises(ConfigError) as e:
            plan_launch(args, None)
        assert e.value.option == option and time.monotonic() - t0 < 30


@pytest.mark.slow   # > 6 s: kept out of the fast subset
@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signals_exit_143_and_130_with_one_line(sig, code, tmp_path):
    p = subprocess.Popen([sys.executable, "-m", "decent8", "train", *FAST, "epochs=1000", f"out_dir={tmp_path}",
                          "name=s", "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         # as from a terminal: a test runner started in the background passes SIGINT on ignored
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while not (tmp_path / "s" / "checkpoint.pt").exists():
        assert p.poll() is None and time.monotonic() < deadline, p.stderr.read() if p.poll() is not None else "slow"
        time.sleep(0.05)
    p.send_signal(sig)
    _, err = p.communicate(timeout=60)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert p.returncode == code and len(lines) == 1 and lines[0].startswith("decent8: error: "), (p.returncode, err)
    assert not list((tmp_path / "s").glob(".*.tmp"))


def test_a_failed_checkpoint_write_names_the_file_and_the_free_space(tmp_path, monkeypatch):
    import torch

    from decent8.atomic import atomic_torch_save

    def full_disk(obj, f):  # what torch's zip writer raises when the disk fills up
        Path(f).write_bytes(b"partial")
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 1453798208 vs 1453798096")

    monkeypatch.setattr(torch, "save", full_disk)
    target = tmp_path / "checkpoint.pt"
    with pytest.raises(OSError, match=r"could not write the file \(\d+\.\d GiB free on its disk; torch.save: "
                                      r"\[enforce fail") as info:
        atomic_torch_save({"x": 1}, target)
    assert info.value.filename == str(target)
    assert list(tmp_path.iterdir()) == []  # no checkpoint, no temporary file
