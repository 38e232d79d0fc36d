"""Bounded readers: crafted data files (LEAF JSON nested 100,000 deep or of the wrong types,
labels of 10^12, an oversized placement or edge list, a gzip that inflates without end,
CSV fields past the limit) and NaN options are refused with exit 2 and one line naming
the option, before anything is allocated and before any run folder exists."""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import call

TINY = ["nodes=2", "epochs=1", "device=cpu", "model=mlp", "model.width=4", "progress=false", "tensorboard=false",
        "--quiet"]
GOOD = {"users": ["u"], "user_data": {"u": {"x": [[1.0, 2.0], [3.0, 4.0]], "y": [0, 1]}}}


def leaf(root: Path, train: object, test: object = GOOD) -> Path:
    """A LEAF folder: ``train`` and ``test`` are a JSON object or its text."""
    for split, d in (("train", train), ("test", test)):
        (root / split).mkdir(parents=True, exist_ok=True)
        (root / split / "a.json").write_text(d if isinstance(d, str) else json.dumps(d))
    return root


def user(x: object, y: object) -> dict:
    return {"users": ["u"], "user_data": {"u": {"x": x, "y": y}}}


DEEP = '{"users": ["u"], "user_data": {"u": {"x": ' + "[" * 100_000 + "]" * 100_000 + ', "y": [0]}}}'
#: (case, train split, the words the one line must hold)
LEAF_CASES = [
    ("deep JSON", DEEP, "nested too deep"),
    ("x not a list", user(5, 3), "needs lists"),
    ("y not a list", user([[1.0], [2.0]], {"a": 1}), "needs lists"),
    ("label 10^12", user([[1.0, 2.0], [3.0, 4.0]], [0, 10**12]), "class ids 0..99999"),
    ("label 10^40", user([[1.0, 2.0], [3.0, 4.0]], [0, 10**40]), "class ids 0..99999"),
    ("negative label", user([[1.0, 2.0], [3.0, 4.0]], [0, -1]), "class ids 0..99999"),
    ("NaN label", '{"users": ["u"], "user_data": {"u": {"x": [[1.0, 2.0], [3.0, 4.0]], "y": [0, NaN]}}}', "label"),
    ("dict label", user([[1.0, 2.0], [3.0, 4.0]], [0, {"a": 1}]), "label"),
    ("NaN x", '{"users": ["u"], "user_data": {"u": {"x": [[1.0, NaN], [3.0, 4.0]], "y": [0, 1]}}}', "NaN"),
    ("huge x", user([[1.0, 10**400], [3.0, 4.0]], [0, 1]), "numbers"),
    ("mixed x", user(["abc", 5], [0, 1]), "every x"),
    ("words then number", user([["a", "b c"], 5], [0, 1]), "every x"),
    ("users not names", {"users": [["u"]], "user_data": {"u": {"x": [[1.0]], "y": [0]}}}, "users"),
]


def assert_refused(rc: object, lines: list[str], out_dir: Path, *needles: str) -> None:
    assert rc == 2, lines
    assert len(lines) == 1 and lines[0].startswith("decent8: error: "), lines
    for needle in needles:
        assert needle in lines[0], lines
    assert not out_dir.exists() or not any(out_dir.iterdir()), list(out_dir.iterdir())


@pytest.mark.parametrize("case,train,needle", LEAF_CASES, ids=[c[0] for c in LEAF_CASES])
def test_crafted_leaf_files_are_refused_in_one_line(tmp_path, case, train, needle):
    root = leaf(tmp_path / "leaf", train)
    rc, _, lines = call(["train", "data.name=leaf", f"data.root={root}", *TINY, f"out_dir={tmp_path / 'runs'}"])
    assert_refused(rc, lines, tmp_path / "runs", "data.root", needle)


def test_a_huge_label_is_refused_before_anything_is_allocated(tmp_path):
    """10^12 classes would be 10^12 class names: refused in well under a second's worth of memory."""
    import resource

    from decent8.data.leaf import load_leaf
    from decent8.errors import ConfigError
    root = leaf(tmp_path, user([[1.0, 2.0]] * 3, [0, 1, 10**12]))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ConfigError, match="class ids 0..99999"):
        load_leaf(str(root))
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000   # KiB


@pytest.mark.parametrize("command", [
    ["topology", "random_k_out", "nodes=3", "topology.degree=nan"],
    ["topology", "base", "nodes=4", "topology.degree=inf"],
    ["topology", "erdos_renyi", "nodes=4", "topology.degree=-inf"],
    ["train", "topology=random_k_out", "topology.degree=nan"],
    ["train", "optimizer.lr=nan"],
    ["train", "partition=dirichlet", "partition.alpha=nan"],
    ["partition", "nodes=4", "partition=dirichlet", "partition.alpha=nan"],
    ["train", "data.test_fraction=nan"],
])
def test_nan_options_are_refused_in_one_line(tmp_path, command):
    rc, _, lines = call([*command, *([*TINY, f"out_dir={tmp_path / 'runs'}"] if command[0] == "train" else [])])
    assert_refused(rc, lines, tmp_path / "runs")


def test_placement_and_edge_list_files_are_bounded(tmp_path):
    from decent8.comm.placement import make_placement
    from decent8.errors import ConfigError
    from decent8.topology import make_topology
    big = tmp_path / "big.txt"
    big.write_text("0 1\n" + "#" * 3_000_000 + "\n")
    with pytest.raises(ConfigError, match=r"dist.placement: .* bytes; a placement of 4 nodes has at most"):
        make_placement(str(big), 4, 2)
    with pytest.raises(ConfigError, match=r"topology.path: .* bytes; an edge-list file may have at most"):
        make_topology("edge_list", 4, path=str(big))
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"0 1 \xff\n")
    with pytest.raises(ConfigError, match="dist.placement: .* is not UTF-8"):
        make_placement(str(bad), 4, 2)
    with pytest.raises(ConfigError, match="topology.path: .* is not UTF-8"):
        make_topology("edge_list", 4, path=str(bad))


def test_a_gzip_that_inflates_past_the_bound_is_refused(monkeypatch):
    from decent8.data import mnist
    from decent8.errors import ConfigError
    monkeypatch.setattr(mnist, "MAX_FILE_BYTES", 1 << 20)
    bomb = gzip.compress(b"\0" * (4 << 20))               # 4 KiB that inflate to 4 MiB
    with pytest.raises(ConfigError, match="inflates to more than"):
        mnist.read_idx(bomb, "train-images-idx3-ubyte.gz")


def test_csv_files_past_the_field_limit_or_with_huge_labels_are_refused(tmp_path):
    ag = tmp_path / "ag"
    ag.mkdir()
    (ag / "test.csv").write_text('"1","a","b"\n"2","c","d"\n')
    (ag / "train.csv").write_text('"1","a","' + "x" * 200_000 + '"\n"2","c","d"\n')
    rc, _, lines = call(["train", "data.name=agnews", f"data.root={ag}", *TINY, f"out_dir={tmp_path / 'runs'}"])
    assert_refused(rc, lines, tmp_path / "runs", "data.root", "not a CSV file")
    (ag / "train.csv").write_text('"1","a","b"\n"1000000000000","c","d"\n')
    rc, _, lines = call(["train", "data.name=agnews", f"data.root={ag}", *TINY, f"out_dir={tmp_path / 'runs'}"])
    assert_refused(rc, lines, tmp_path / "runs", "data.root", "class labels are 0..99999")


@pytest.mark.slow
@pytest.mark.parametrize("case", ["deep JSON", "label 10^12", "NaN degree"])
def test_as_a_process_exit_2_one_line_no_traceback_no_run_folder(tmp_path, case):
    runs = tmp_path / "runs"
    if case == "NaN degree":
        argv = ["topology", "random_k_out", "nodes=3", "topology.degree=nan"]
    else:
        train = dict((c, t) for c, t, _ in LEAF_CASES)[case]
        argv = ["train", "data.name=leaf", f"data.root={leaf(tmp_path / 'leaf', train)}", *TINY, f"out_dir={runs}"]
    done = subprocess.run([sys.executable, "-m", "decent8", *argv], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env={**os.environ, "OMP_NUM_THREADS": "1"})
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert "Traceback" not in done.stderr
    assert_refused(done.returncode, lines, runs)
