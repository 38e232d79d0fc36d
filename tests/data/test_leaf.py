"""LEAF JSON data (FEMNIST / Shakespeare / Sent140 layouts) and partition=natural (issue 33)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from decent8.errors import ConfigError


def write_leaf(root, users_train, users_test, make_x, classes=3, seed=0):
    """LEAF layout: train/ and test/ folders of .json files, users split over two train files."""
    rng = np.random.default_rng(seed)
    for split, spec in (("train", users_train), ("test", users_test)):
        (root / split).mkdir(parents=True, exist_ok=True)
        items = list(spec.items())
        for f, chunk in enumerate((items[: len(items) // 2 + 1], items[len(items) // 2 + 1:])):
            if not chunk:
                continue
            data = {"users": [u for u, _ in chunk], "num_samples": [k for _, k in chunk], "user_data": {}}
            for u, k in chunk:
                ys = rng.integers(0, classes, size=k).tolist()
                data["user_data"][u] = {"x": [make_x(y, rng) for y in ys], "y": ys}
            (root / split / f"part_{f}.json").write_text(json.dumps(data))


def femnist_x(y, rng):
    img = rng.normal(0, 0.1, size=(28, 28))
    img[y * 9:(y + 1) * 9, :] += 1.0          # a class-dependent band: learnable
    return img.reshape(-1).round(3).tolist()


TRAIN = {"f0001": 30, "f0002": 12, "f0003": 25, "f0004": 8, "f0005": 18}
TEST = {"f0001": 6, "f0002": 3, "f0003": 5, "f0004": 2, "f0005": 4}


def test_femnist_layout_and_natural_partition(tmp_path):
    from decent8.data.leaf import load_leaf, natural_partition
    from decent8.data.partition import make_partition
    write_leaf(tmp_path, TRAIN, TEST, femnist_x)
    ds = load_leaf(str(tmp_path))
    assert tuple(ds.x_train.shape) == (93, 1, 28, 28) and tuple(ds.x_test.shape) == (20, 1, 28, 28)
    assert ds.num_classes <= 3 and ds.y_train.dtype.is_floating_point is False
    users = ds.users_train
    assert [int((users == u).sum()) for u in TRAIN] == list(TRAIN.values())
    parts = make_partition("natural", ds.partition_labels, 3, 0, users=users)
    # whole users per node; largest first to the least-loaded node: 30 → 0, 25 → 1, 18 → 2, 12 → 2, 8 → 1
    owners = [{str(u) for u in users[p]} for p in parts]
    assert owners == [{"f0001"}, {"f0003", "f0004"}, {"f0005", "f0002"}]
    assert [len(p) for p in parts] == [30, 33, 30]
    assert sorted(np.concatenate(parts).tolist()) == list(range(93))
    with pytest.raises(ConfigError, match="nodes.*5 users for 6 nodes"):
        natural_partition(users, 6)
    with pytest.raises(ConfigError, match="partition=natural needs a data set with users"):
        make_partition("natural", ds.partition_labels, 3, 0)


def test_shakespeare_and_sent140_layouts(tmp_path):
    from decent8.data.leaf import load_leaf
    text = "to be or not to be that is the question "
    sh = tmp_path / "sh"
    write_leaf(sh, {"A": 5, "B": 4}, {"A": 2, "B": 1},
               lambda y, rng: (text * 3)[int(rng.integers(0, 30)):][:80], classes=2)
    # Shakespeare's y is the next character: strings → class ids in sorted order
    for split in ("train", "test"):
        for f in (sh / split).glob("*.json"):
            d = json.loads(f.read_text())
            for ud in d["user_data"].values():
                ud["y"] = ["a" if y == 0 else "b" for y in ud["y"]]
            f.write_text(json.dumps(d))
    ds = load_leaf(str(sh), seq_len=80)
    assert ds.class_names == ["a", "b"] and tuple(ds.x_train.shape) == (9, 80)
    assert ds.vocab[:2] == ["<pad>", "<unk>"] and set(ds.vocab[2:]) == set(text)
    first = json.loads(sorted((sh / "train").glob("*.json"))[0].read_text())
    x0 = first["user_data"][first["users"][0]]["x"][0]
    assert "".join(ds.vocab[i] for i in ds.x_train[0].tolist() if i) == x0[-80:]
    s140 = tmp_path / "s140"
    write_leaf(s140, {"u1": 3, "u2": 3}, {"u1": 1, "u2": 1},
               lambda y, rng: ["1467810369", "Mon Apr 06", "NO_QUERY", "user", "good day" if y else "bad day"],
               classes=2)
    ds = load_leaf(str(s140), seq_len=4)
    assert tuple(ds.x_train.shape) == (6, 4) and "day" in ds.vocab
    with pytest.raises(ConfigError, match="data.root.*test/\\*.json"):
        (tmp_path / "only").mkdir()
        write_leaf(tmp_path / "only", {"u": 2}, {}, femnist_x)
        load_leaf(str(tmp_path / "only"))


@pytest.mark.slow   # > 6 s: a whole `decent8 train`
def test_leaf_run_end_to_end(tmp_path, capsys):
    from decent8.cli.main import main
    write_leaf(tmp_path / "femnist", TRAIN, TEST, femnist_x)
    assert main(["train", "data.name=leaf", f"data.root={tmp_path / 'femnist'}", "partition=natural", "nodes=3",
                 "topology=ring", "epochs=3", "model.width=4", "progress=false", "checkpoint=false",
                 "tensorboard=false", "sim.chunk=1", "algorithm.consensus_rounds=3", "device=cpu",
                 f"out_dir={tmp_path}", "name=leaf"]) == 0
    summary = json.loads((tmp_path / "leaf" / "summary.json").read_text())
    assert summary["dataset"] == "leaf" and summary["nodes"] == 3
    assert 0.0 <= summary["mean_node_accuracy"] <= 1.0 and len(summary["personalized_accuracies"]) == 3
    parts = (tmp_path / "leaf" / "partition.csv").read_text()
    assert parts.strip()
