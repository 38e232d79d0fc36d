"""A user's component is checked where decent8 calls it: a compressor that returns the
wrong thing, an algorithm or topology that raises or returns a non-graph — one line that
names it, exit 2, no run folder left (decent8/user_code.py)."""
from __future__ import annotations

import os
import time

import pytest

from tests.end_to_end.test_robust import FAST, one_line
from tests.helpers import call

USER_MODULE = '''
import numpy as np
import torch
from decent8.algorithms.dpsgd import DPSGD
from decent8.compression.identity import IdentityCompressor


class ShortDecode(IdentityCompressor):
    def decode(self, payload):
        return super().decode(payload)[:, :-1]


class DictEncode(IdentityCompressor):
    def encode(self, x, generators=None):
        return {"x": x}


class FailsLater(IdentityCompressor):
    calls = 0

    def encode(self, x, generators=None):
        FailsLater.calls += 1
        if FailsLater.calls > 3:
            raise ValueError("ran out of bits")
        return super().encode(x, generators)


class CreateRaises(DPSGD):
    @classmethod
    def create(cls, ctx):
        raise KeyError("no such thing")


class UpdateRaises(DPSGD):
    def update(self, z, direction, x, lr, step):
        raise ZeroDivisionError("in my update")


def not_a_graph(n):
    return "hello"


def torch_ring(n):
    a = torch.zeros(n, n, dtype=torch.bool)
    for i in range(n):
        a[i, (i + 1) % n] = True
    return a
'''


@pytest.fixture
def user(tmp_path, monkeypatch):
    name = f"d8boundary_{os.getpid()}_{time.monotonic_ns()}"
    folder = tmp_path / "pkgs"
    folder.mkdir()
    (folder / f"{name}.py").write_text(USER_MODULE)
    monkeypatch.syspath_prepend(str(folder))
    return name


@pytest.mark.parametrize("option,attr,needle", [
    ("compression", "ShortDecode", "decode returned a torch.float32 tensor of shape"),
    ("compression", "DictEncode", "encode returned dict, not a decent8.compression.Payload"),
    ("compression", "FailsLater", "encode raised ValueError: ran out of bits"),
    ("algorithm", "CreateRaises", "create raised KeyError"),
    ("algorithm", "UpdateRaises", "update raised ZeroDivisionError: in my update"),
    ("topology", "not_a_graph", "returned str, not a Topology"),
])
def test_a_failing_user_component_is_one_line_and_leaves_no_run_folder(tmp_path, user, option, attr, needle):
    out = tmp_path / "runs"
    extra = ["compression=identity"] if option != "compression" else ["algorithm=dpsgd"]
    rc, _, lines = call(["train", f"{option}={user}:{attr}", "epochs=1", f"out_dir={out}", *extra, *FAST])
    one_line(rc, lines, needle)
    assert f"{user}:{attr}" in lines[0] and lines[0].startswith(f"decent8: error: {option}: ")
    assert not out.exists() or not any(out.iterdir())


def test_a_torch_bool_adjacency_is_a_graph(tmp_path, user):
    rc, _, lines = call(["train", f"topology={user}:torch_ring", "epochs=1", f"out_dir={tmp_path}", *FAST])
    assert rc == 0, lines


@pytest.mark.parametrize("extra,needle", [
    (["optimizer.kind=qgm"], "optimizer.kind"),
    (["faults.node_drop=0.2"], "faults"),
    (["model=cnn", "model.norm=bn"], "running statistics"),
])
def test_adpsgd_refusals_come_before_the_run_folder(tmp_path, extra, needle):
    out = tmp_path / "runs"
    args = [a for a in FAST if not (a.startswith("model=") and any(e.startswith("model=") for e in extra))]
    rc, _, lines = call(["train", "algorithm=adpsgd", "compression=identity", "topology=ring", "epochs=1",
                         f"out_dir={out}", *args, *extra])
    one_line(rc, lines, needle)
    assert not out.exists() or not any(out.iterdir())
