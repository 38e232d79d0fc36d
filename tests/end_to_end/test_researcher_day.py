"""Issue 18: runs never overwrite each other, seeds aggregate, reports compare, plots show single points, CLI basics."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from matplotlib.colors import to_rgb

from decent8 import __version__
from decent8.errors import ConfigError
from decent8.experiments.aggregate import decimals_for, format_mean_se, format_mean_std, mean_std
from decent8.figstyle import PALETTE
from decent8.train.plots import plot_curves
from decent8.train.run_dir import RunDir

TINY = ["epochs=1", "nodes=2", "model.width=4", "data.subset=200", "algorithm.consensus_rounds=1", "progress=false"]


def _cli(args, cwd, **kw):
    return subprocess.run([sys.executable, "-m", "decent8", *args], cwd=cwd, capture_output=True, text=True,
                          env=dict(os.environ, OMP_NUM_THREADS="1"), **kw)


@pytest.fixture(scope="module")
def three_seeds(tmp_path_factory):
    """Three runs with default names started at the same moment (seeds 1, 2, 3)."""
    out = tmp_path_factory.mktemp("same-second")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, "-m", "decent8", "train", *TINY, f"seed={s}", f"out_dir={out}",
                               "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for s in (1, 2, 3)]
    results = [(p.wait(timeout=600), p.stdout.read(), p.stderr.read()) for p in procs]
    return out, results


@pytest.mark.slow   # > 6 s: kept out of the fast subset
def test_runs_started_in_the_same_second_get_their_own_folders(three_seeds):
    out, results = three_seeds
    for rc, stdout, stderr in results:
        assert rc == 0, stderr
    folders = sorted(p for p in out.iterdir() if p.is_dir())
    assert len(folders) == 3
    seeds = set()
    for f in folders:
        s = json.loads((f / "summary.json").read_text())       # every run completed
        assert f"-seed{s['seed']}-" in f.name                  # the seed is in the name
        seeds.add(s["seed"])
    assert seeds == {1, 2, 3}
    # --quiet still prints the run folder, and it is the one with that seed
    printed = {Path(stdout.strip().splitlines()[-1]).name for _, stdout, _ in results}
    assert printed == {f.name for f in folders}


def test_run_folder_creation_is_atomic_and_refuses_an_existing_folder(tmp_path, monkeypatch):
    RunDir.create(tmp_path / "a")
    with pytest.raises(ConfigError, match="already exists"):
        RunDir.create(tmp_path / "a")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="already exists"):     # even an empty one: two racing runs never share it
        RunDir.create(tmp_path / "empty")
    import decent8.train.run_dir as rd
    hexes = iter(["aaaaaa", "aaaaaa", "bbbbbb"])
    monkeypatch.setattr(rd.secrets, "token_hex", lambda n: next(hexes))
    first = RunDir.create_unique(tmp_path, "stem")
    second = RunDir.create_unique(tmp_path, "stem")                 # collides once, then takes a new suffix
    assert (first.path.name, second.path.name) == ("stem-aaaaaa", "stem-bbbbbb")


@pytest.mark.slow   # > 6 s on 2 cores: kept out of the fast subset (issue 30)
def test_curves_png_of_a_one_epoch_run_shows_its_points(three_seeds):
    from matplotlib.image import imread

    out, _ = three_seeds
    run = next(p for p in out.iterdir() if p.is_dir())
    img = imread(run / "curves.png")[..., :3]
    blue = np.array(to_rgb(PALETTE[0]))                             # the house style's first series colour
    n_blue = int((np.abs(img - blue).sum(axis=-1) < 0.08).sum())
    assert n_blue > 150, n_blue                                     # markers drawn (a bare legend line is ~60 px)


def test_plot_curves_without_markers_would_be_empty(tmp_path):
    """The pixel check above measures the markers: one point drawn as a line only has far fewer blue pixels."""
    from matplotlib.image import imread

    row = {"epoch": 1, "mean_node_accuracy": 0.5, "averaged_model_accuracy": 0.6, "train_loss": 1.0,
           "averaged_model_loss": 1.1, "consensus_distance": 0.1}
    plot_curves([row], tmp_path / "one.png", title="x" * 300)        # a long title wraps, it is not cut
    img = imread(tmp_path / "one.png")[..., :3]
    blue = np.array(to_rgb(PALETTE[0]))
    assert int((np.abs(img - blue).sum(axis=-1) < 0.08).sum()) > 150


@pytest.mark.slow   # > 6 s: kept out of the fast subset
def test_report_of_run_folders_aggregates_seeds(three_seeds, tmp_path):
    out, _ = three_seeds
    runs = sorted(str(p) for p in out.iterdir() if p.is_dir())
    accs = [100 * json.loads((Path(r) / "summary.json").read_text())["mean_node_accuracy"] for r in runs]
    r = _cli(["report", *runs, "--out", str(tmp_path / "cmp")], tmp_path)
    assert r.returncode == 0, r.stderr
    assert format_mean_se(accs, show_n=False) in r.stdout and "(s.e., n=3)" in r.stdout
    for png in ("curves.png", "accuracy_vs_bytes.png"):
        assert (tmp_path / "cmp" / "figures" / png).stat().st_size > 5000
    # the folder holding them reads as a sweep over seed: the same aggregate
    r2 = _cli(["report", str(out)], tmp_path)
    assert r2.returncode == 0, r2.stderr
    assert format_mean_se(accs, show_n=False) in r2.stdout
    assert (out / "figures" / "accuracy_vs_bytes.png").is_file()


@pytest.mark.slow
def test_compare_refuses_a_folder_that_is_not_a_run(three_seeds, tmp_path):
    out, _ = three_seeds
    run = next(str(p) for p in out.iterdir() if p.is_dir())
    r = _cli(["compare", run, str(tmp_path)], tmp_path)
    assert r.returncode == 2 and "is not a run folder" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_sweep_table_aggregates_seeds():
    from decent8.experiments.sweep import results_table

    class Cell:
        def __init__(self, labels):
            self.labels = labels

    def summ(acc):
        return {"mean_node_accuracy": acc, "averaged_model_accuracy": acc, "consensus_distance": 1e-3,
                "bytes_sent_per_node": 1000.0, "wall_time_s": 1.0}

    finished = [(Cell({"algorithm": "choco", "seed": str(s)}), summ(a)) for s, a in enumerate((0.9639, 0.9806, 0.9750))]
    finished.append((Cell({"algorithm": "dpsgd", "seed": "0"}), summ(0.9806)))
    text, headers, rows = results_table(["algorithm", "seed"], finished)
    assert "seed" not in headers and "n" in headers
    assert rows[0][:3] == ["choco", "3", "97.32 ± 0.49"]   # ± s.e. = s.d. 0.85 / √3, as in report.md
    assert "± s.e." in headers[2]
    assert rows[1][:3] == ["dpsgd", "1", "98.06"]
    assert "98.0600" not in text


def test_mean_std_precision():
    m, s, n = mean_std([1.0, 2.0, 3.0])
    assert (m, s, n) == (2.0, 1.0, 3)
    assert decimals_for(0.85) == 2 and decimals_for(14.0) == 0 and decimals_for(0.0) == 2
    assert format_mean_std([98.06]) == "98.06"
    assert format_mean_std([50.0, 90.0, 70.0]) == "70 ± 20 (n=3)"
    assert format_mean_se([50.0, 90.0, 70.0]) == "70 ± 12 (n=3)"          # 20/√3 = 11.5
    assert format_mean_se([90.0, 91.0, 92.0], show_n=False) == "91.00 ± 0.58" and format_mean_se([98.06]) == "98.06"


@pytest.mark.slow   # > 6 s: kept out of the fast subset
def test_version_list_and_print_config(tmp_path):
    r = _cli(["--version"], tmp_path)
    assert r.returncode == 0 and r.stdout.strip() == f"decent8 {__version__}"
    r = _cli(["list"], tmp_path)
    assert r.returncode == 0
    for name in ("choco", "marsit", "topk", "edge_list", "dirichlet", "resnet20", "mnist",
                 "paper/table3_resnet20_ring8"):
        assert re.search(rf"\b{re.escape(name)}\b", r.stdout), name
    r = _cli(["train", "--print-config", "nodes=5", "data.name=mnist", f"out_dir={tmp_path / 'runs'}"], tmp_path)
    assert r.returncode == 0, r.stderr
    import yaml

    cfg = yaml.safe_load(r.stdout)
    assert cfg["nodes"] == 5 and cfg["data"]["name"] == "mnist"
    assert not (tmp_path / "runs").exists()                         # nothing ran


@pytest.mark.slow   # > 6 s: kept out of the fast subset
def test_ctrl_c_says_how_to_resume(tmp_path):
    p = subprocess.Popen([sys.executable, "-m", "decent8", "train", "epochs=200", "nodes=2", "model.width=4",
                          "data.subset=200", "progress=false", "name=r", f"out_dir={tmp_path}"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, OMP_NUM_THREADS="1"),
                         # as from a terminal: a test runner started in the background passes SIGINT on ignored
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 300
    while not (tmp_path / "r" / "checkpoint.pt").exists():
        assert time.time() < deadline and p.poll() is None, p.stderr.read() if p.poll() is not None else "timeout"
        time.sleep(0.2)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 130
    assert f"decent8 train --resume {tmp_path / 'r'}" in err and len(err.strip().splitlines()) == 1


# ----------------------------------------------------------------------------- data sets
def test_mnist_images_refused_as_cifar10_and_cifar_as_mnist(tmp_path):
    from decent8.data.registry import load_dataset
    from tests.data_fixtures import tar_folder, write_image_folders, write_mnist_pngs

    mnist = tmp_path / "mnist"
    write_mnist_pngs(mnist, per_class=1)
    tarball = tar_folder(mnist, tmp_path / "mnist.tar.gz")
    for root in (mnist, tarball):
        with pytest.raises(ConfigError, match=r"does not hold CIFAR-10: its images are 28x28 grey.*data.name=image_folder"):
            load_dataset("cifar10", str(root), cache_dir=str(tmp_path / "cache"))
    cifar = tmp_path / "cifar"
    write_image_folders(cifar, {"train": 2, "test": 1}, ["cat", "dog"], size=32)
    with pytest.raises(ConfigError, match=r"does not hold MNIST: its images are 32x32"):
        load_dataset("mnist", str(cifar), cache_dir=str(tmp_path / "cache"))
    assert load_dataset("cifar10", str(cifar), cache_dir=str(tmp_path / "cache")).num_classes == 2


@pytest.mark.slow
def test_image_folder_dataset_trains(tmp_path):
    from decent8.data.registry import load_dataset
    from tests.data_fixtures import write_image_folders

    root = tmp_path / "mine"
    data = write_image_folders(root, {"train": 4, "val": 2}, ["apple", "pear", "plum"], size=20)
    ds = load_dataset("image_folder", str(root), cache_dir=str(tmp_path / "cache"))
    assert ds.class_names == ["apple", "pear", "plum"] and ds.num_classes == 3
    assert tuple(ds.x_train.shape) == (12, 3, 20, 20) and tuple(ds.x_test.shape) == (6, 3, 20, 20)
    assert np.array_equal(ds.x_train[0].permute(1, 2, 0).numpy(), data["train"][0][0])
    small = load_dataset("image_folder", str(root), cache_dir=str(tmp_path / "cache"), image_size=12)
    assert tuple(small.x_test.shape[1:]) == (3, 12, 12)
    r = _cli(["train", "data.name=image_folder", f"data.root={root}", "nodes=2", "epochs=1", "model.width=4",
              "data.batch_size=4", "progress=false", f"out_dir={tmp_path / 'runs'}", "--quiet"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads((Path(r.stdout.strip()) / "summary.json").read_text())["dataset"] == "image_folder"


def test_dataset_defaults_sit_beneath_yaml_and_overrides(tmp_path):
    from decent8.config import load_config
    from decent8.data.registry import DATASET_DEFAULTS

    lr = DATASET_DEFAULTS["mnist"]["optimizer.lr"]
    assert lr != load_config().optimizer.lr
    assert load_config(None, ["data.name=mnist"]).optimizer.lr == lr
    assert load_config(None, ["data.name=mnist", "optimizer.lr=0.2"]).optimizer.lr == 0.2
    y = tmp_path / "c.yaml"
    y.write_text("data: {name: mnist}\n")
    assert load_config(str(y)).optimizer.lr == lr
    y.write_text("data: {name: mnist}\noptimizer: {lr: 0.3}\n")
    assert load_config(str(y)).optimizer.lr == 0.3



def _read_events(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """Scalars of TFRecord event files (length, crc, Event protobuf, crc), read with tensorboardX's protos."""
    import struct

    from tensorboardX.proto import event_pb2

    out: dict[str, list[tuple[int, float]]] = {}
    for f in sorted(folder.iterdir()):
        data = f.read_bytes()
        pos = 0
        while pos < len(data):
            (n,) = struct.unpack("<Q", data[pos:pos + 8])
            ev = event_pb2.Event.FromString(data[pos + 12:pos + 12 + n])
            pos += 12 + n + 4
            for v in ev.summary.value:
                out.setdefault(v.tag, []).append((ev.step, v.simple_value))
    return out


def test_tensorboard_events_beside_metrics(tmp_path):
    from decent8.cli.main import main as cli_main

    assert cli_main(["train", "epochs=2", "nodes=2", "model.width=4", "data.subset=200", "progress=false",
                     "tensorboard=true", f"out_dir={tmp_path}", "name=tb", "--quiet"]) == 0
    rows = [json.loads(x) for x in (tmp_path / "tb" / "metrics.jsonl").read_text().splitlines()]
    events = _read_events(tmp_path / "tb" / "tensorboard")
    acc = events["mean_node_accuracy"]
    # the two epochs, then the evaluation after the final consensus rounds (the last metrics line too)
    assert [s for s, _ in acc] == [r["step"] for r in rows] and rows[-1]["after_consensus_rounds"] == 51
    assert [v for _, v in acc] == pytest.approx([r["mean_node_accuracy"] for r in rows], rel=1e-6)
    assert cli_main(["train", "tensorboard=maybe", f"out_dir={tmp_path}"]) == 2
