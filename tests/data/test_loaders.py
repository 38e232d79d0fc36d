"""Data loaders: CIFAR-10, MNIST, Imagenette, AG News in their real formats, tarballs, the cache, bad roots.

Small fixtures are written by the tests; the shared copies in /work/shared/data (or
$DECENT8_SHARED_DATA) are checked when present, decoded through the default cache
(~/.cache/decent8), so only the first run pays the decode (≈ 20 s for CIFAR-10 on 2 cores).
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from decent8.cli.main import main
from decent8.data.registry import _MEMO, load_dataset, stratified_subset

from tests.data_fixtures import (
    AG_TEST,
    AG_TRAIN,
    CIFAR_CLASSES,
    tar_folder,
    write_agnews,
    write_cifar_pickles,
    write_image_folders,
    write_mnist_idx,
    write_mnist_pngs,
)

SHARED = Path(os.environ.get("DECENT8_SHARED_DATA", "/work/shared/data"))


@pytest.fixture(autouse=True)
def _fresh_memo():
    _MEMO.clear()
    yield
    _MEMO.clear()


# ----------------------------------------------------------------------------- CIFAR-10
@pytest.mark.parametrize("bytes_keys", [False, True])
def test_cifar_python_batches_folder_and_tarball(tmp_path, bytes_keys):
    folder = tmp_path / "cifar-10-batches-py"
    x_tr, y_tr, x_te, y_te = write_cifar_pickles(folder, per_batch=6, test=8, bytes_keys=bytes_keys)
    tarball = tar_folder(folder, tmp_path / "cifar-10-python.tar.gz")
    for root in (folder, tmp_path, tarball):   # the batch folder, its parent, the tarball
        _MEMO.clear()
        ds = load_dataset("cifar10", str(root), cache_dir=str(tmp_path / "cache"))
        assert ds.x_train.shape == (30, 3, 32, 32) and ds.x_train.dtype == torch.uint8
        assert ds.x_test.shape == (8, 3, 32, 32)
        assert np.array_equal(ds.x_train.numpy(), x_tr) and np.array_equal(ds.y_train.numpy(), y_tr)
        assert np.array_equal(ds.x_test.numpy(), x_te) and np.array_equal(ds.y_test.numpy(), y_te)
        assert ds.class_names == CIFAR_CLASSES and ds.num_classes == 10 and ds.augment == "crop_flip"
        mean = x_tr.reshape(30, 3, -1).transpose(1, 0, 2).reshape(3, -1).mean(1) / 255
        assert np.allclose(ds.mean, mean, atol=1e-9)
        std = x_tr.reshape(30, 3, -1).transpose(1, 0, 2).reshape(3, -1).std(1) / 255
        assert np.allclose(ds.std, std, atol=1e-9)


def test_cifar_image_folders_folder_and_tarball(tmp_path):
    root = tmp_path / "CIFAR-10-images"
    data = write_image_folders(root, {"train": 3, "test": 2}, ["cat", "airplane", "dog"], ext=".png")
    tarball = tar_folder(root, tmp_path / "cifar.tar.gz")
    for src in (root, tmp_path, tarball):
        _MEMO.clear()
        ds = load_dataset("cifar10", str(src), cache_dir=str(tmp_path / "cache"))
        assert ds.class_names == ["airplane", "cat", "dog"]
        assert ds.x_train.shape == (9, 3, 32, 32) and ds.x_test.shape == (6, 3, 32, 32)
        expect = np.stack([px.transpose(2, 0, 1) for px, _ in data["train"]])
        assert np.array_equal(ds.x_train.numpy(), expect)   # PNG is lossless: exact pixels
        assert ds.y_train.tolist() == [lab for _, lab in data["train"]]
        assert ds.y_test.tolist() == [0, 0, 1, 1, 2, 2]


def test_decoded_arrays_are_cached_by_source_size_and_mtime(tmp_path, monkeypatch):
    folder = tmp_path / "b"
    write_cifar_pickles(folder, per_batch=2, test=2)
    tarball = tar_folder(folder, tmp_path / "c.tar.gz")
    cache = tmp_path / "cache"
    load_dataset("cifar10", str(tarball), cache_dir=str(cache))
    files = list(cache.glob("cifar10-*.npz"))
    assert len(files) == 1 and not list(cache.glob(".*"))   # atomic: no temporary file left
    from decent8.data import cifar10

    calls = []
    real = cifar10._decode
    monkeypatch.setattr(cifar10, "_decode", lambda *a: calls.append(a) or real(*a))
    _MEMO.clear()
    load_dataset("cifar10", str(tarball), cache_dir=str(cache))
    assert calls == []                      # read from the cache
    st = tarball.stat()
    os.utime(tarball, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    _MEMO.clear()
    load_dataset("cifar10", str(tarball), cache_dir=str(cache))
    assert len(calls) == 1                  # a changed source decodes again
    assert len(list(cache.glob("cifar10-*.npz"))) == 2


def test_unwritable_cache_warns_and_goes_on(tmp_path, capsys):
    folder = tmp_path / "b"
    write_cifar_pickles(folder, per_batch=2, test=2)
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    ds = load_dataset("cifar10", str(folder), cache_dir=str(blocker / "sub"))
    assert ds.x_train.shape[0] == 10
    assert "warning" in capsys.readouterr().err


# ----------------------------------------------------------------------------- MNIST
@pytest.mark.parametrize("gz", [True, False])
def test_mnist_idx_files(tmp_path, gz):
    x_tr, y_tr, x_te, y_te = write_mnist_idx(tmp_path / "raw", gz=gz)
    ds = load_dataset("mnist", str(tmp_path / "raw"), cache_dir=str(tmp_path / "cache"))
    assert ds.x_train.shape == (20, 1, 28, 28) and ds.x_test.shape == (10, 1, 28, 28)
    assert np.array_equal(ds.x_train.numpy()[:, 0], x_tr) and np.array_equal(ds.y_test.numpy(), y_te)
    assert ds.class_names == [str(d) for d in range(10)] and ds.augment == "none"


def test_mnist_png_folders_with_csv_index_in_a_tarball(tmp_path):
    root = tmp_path / "mnist-pngs"
    data = write_mnist_pngs(root, per_class=2)
    tarball = tar_folder(root, tmp_path / "mnist.tar.gz")
    ds = load_dataset("mnist", str(tarball), cache_dir=str(tmp_path / "cache"))
    assert ds.x_train.shape == (20, 1, 28, 28) and ds.x_test.shape == (10, 1, 28, 28)
    assert torch.bincount(ds.y_train).tolist() == [2] * 10
    assert np.array_equal(ds.x_train.numpy()[:, 0], np.stack([px for px, _ in data["train"]]))


# ----------------------------------------------------------------------------- Imagenette
def test_imagenette_resizes_and_converts_greyscale(tmp_path):
    root = tmp_path / "imagenette"
    write_image_folders(root, {"train": 3, "val": 2}, ["n01440764", "n02102040"], size=40, ext=".JPEG",
                        grey_every=2)
    ds = load_dataset("imagenette", str(tar_folder(root, tmp_path / "i.tar.gz")), cache_dir=str(tmp_path / "c"),
                      image_size=16)
    assert ds.x_train.shape == (6, 3, 16, 16) and ds.x_test.shape == (4, 3, 16, 16)
    assert ds.class_names == ["tench", "English springer"] and ds.augment == "resized_crop_flip"
    grey = ds.x_train[0].float()                    # image 0 of class 0 was saved greyscale
    assert torch.equal(grey[0], grey[1]) and torch.equal(grey[1], grey[2])


# ----------------------------------------------------------------------------- AG News
@pytest.mark.parametrize("two_column", [False, True])
def test_agnews_token_ids(tmp_path, two_column):
    write_agnews(tmp_path / "ag", two_column_train=two_column)
    ds = load_dataset("agnews", str(tmp_path / "ag"), cache_dir=str(tmp_path / "c"), seq_len=12, vocab_size=50)
    assert ds.x_train.shape == (len(AG_TRAIN), 12) and ds.x_train.dtype == torch.int64
    assert ds.x_test.shape == (len(AG_TEST), 12)
    assert ds.y_train.tolist() == [int(c) - 1 for c, _, _ in AG_TRAIN]
    assert ds.class_names == ["World", "Sports", "Business", "Sci/Tech"]
    assert ds.vocab[:2] == ["<pad>", "<unk>"] and "the" in ds.vocab
    first = [ds.vocab[i] for i in ds.x_train[0].tolist() if i]
    assert first[:4] == ["wall", "st", "bears", "claw"]
    assert ds.x_test[0, -1].item() == 0       # short texts are padded
    assert "chip" in [ds.vocab[i] for i in ds.x_train[2].tolist()]  # "new\\chip": backslash is a space


# ----------------------------------------------------------------------------- subsets
def test_stratified_subset_fraction_and_count():
    y = np.repeat(np.arange(10), 100)
    idx = stratified_subset(y, 0.05)
    assert idx.size == 50 and np.bincount(y[idx]).tolist() == [5] * 10
    assert np.array_equal(idx, np.sort(idx)) and np.array_equal(idx, stratified_subset(y, 0.05))
    idx = stratified_subset(y, 23)
    assert idx.size == 23 and np.bincount(y[idx], minlength=10).min() >= 2


def test_subset_options_and_errors(tmp_path):
    write_cifar_pickles(tmp_path / "b", per_batch=10, test=10)
    ds = load_dataset("cifar10", str(tmp_path / "b"), cache_dir=str(tmp_path / "c"), subset=0.2, test_subset=5)
    assert ds.x_train.shape[0] == 10 and ds.x_test.shape[0] == 5
    from decent8.errors import ConfigError

    for bad in (0, -1, 2.5):
        with pytest.raises(ConfigError, match="data.subset"):
            load_dataset("cifar10", str(tmp_path / "b"), cache_dir=str(tmp_path / "c"), subset=bad)


# ----------------------------------------------------------------------------- bad roots
def _one_line_error(capsys, argv):
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and err.startswith("decent8: error: ") and "Traceback" not in err
    return err


def test_bad_data_roots_are_one_line_errors(tmp_path, capsys):
    base = ["train", f"out_dir={tmp_path / 'runs'}", "epochs=1", "device=cpu", f"data.cache_dir={tmp_path / 'c'}"]
    err = _one_line_error(capsys, base + ["data.name=cifar10"])
    assert "data.root" in err and "CIFAR-10 needs data.root=" in err and "data_batch_1..5" in err
    err = _one_line_error(capsys, base + ["data.name=cifar10", f"data.root={tmp_path / 'nope'}"])
    assert "does not exist" in err and "train/<class>/*.jpg" in err
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "readme.txt").write_text("hi")
    err = _one_line_error(capsys, base + ["data.name=cifar10", f"data.root={tmp_path / 'empty'}"])
    assert "does not hold CIFAR-10" in err and "expected" in err and "readme.txt" in err
    write_cifar_pickles(tmp_path / "py", per_batch=2, test=2)   # CIFAR-10 batches given as Imagenette
    err = _one_line_error(capsys, base + ["data.name=imagenette", f"data.root={tmp_path / 'py'}"])
    assert "Imagenette" in err and "val/<wnid>" in err and "data_batch_1" in err
    err = _one_line_error(capsys, base + ["data.name=mnist", f"data.root={tmp_path / 'empty' / 'readme.txt'}"])
    assert "not a tarball" in err
    write_cifar_pickles(tmp_path / "partial", per_batch=2, test=2)
    (tmp_path / "partial" / "data_batch_3").unlink()
    err = _one_line_error(capsys, base + ["data.name=cifar10", f"data.root={tmp_path / 'partial'}"])
    assert "data_batch_3" in err
    err = _one_line_error(capsys, base + ["data.name=agnews", f"data.root={tmp_path / 'empty'}"])
    assert "train.csv" in err
    err = _one_line_error(capsys, base + ["data.name=imagenet"])
    assert "allowed" in err and "cifar10" in err
    assert not (tmp_path / "runs").exists()


def test_training_on_a_tiny_cifar_fixture_end_to_end(tmp_path, capsys):
    write_cifar_pickles(tmp_path / "b", per_batch=16, test=16)
    code = main(["train", "data.name=cifar10", f"data.root={tmp_path / 'b'}", f"data.cache_dir={tmp_path / 'c'}",
                 "nodes=4", "epochs=1", "model.width=4", "data.batch_size=4", "device=cpu", "progress=false",
                 "algorithm.consensus_rounds=1", f"out_dir={tmp_path / 'runs'}", "name=r", "--quiet"])
    assert code == 0, capsys.readouterr().err
    assert (tmp_path / "runs" / "r" / "summary.json").exists()
    assert (tmp_path / "runs" / "r" / "partition.csv").read_text().startswith("node,airplane,automobile")


# ----------------------------------------------------------------------------- shared data
def _shared(rel: str) -> Path:
    p = SHARED / rel
    if not p.exists():
        pytest.skip(f"{p} not present")
    return p


@pytest.mark.slow   # > 6 s: kept out of the fast subset
def test_shared_cifar10_jpeg_tarball():
    t = time.perf_counter()
    ds = load_dataset("cifar10", str(_shared("cifar10/YoongiKim-CIFAR-10-images.tar.gz")))
    assert time.perf_counter() - t < 60
    assert ds.x_train.shape == (50000, 3, 32, 32) and ds.x_test.shape == (10000, 3, 32, 32)
    assert torch.bincount(ds.y_train).tolist() == [5000] * 10
    assert torch.bincount(ds.y_test).tolist() == [1000] * 10
    assert ds.class_names == CIFAR_CLASSES
    assert np.allclose(ds.mean, [0.49, 0.48, 0.45], atol=0.01)
    assert np.allclose(ds.std, [0.247, 0.243, 0.261], atol=0.02)


@pytest.mark.slow   # > 6 s: kept out of the fast subset
def test_shared_mnist_png_tarball():
    ds = load_dataset("mnist", str(_shared("mnist/rasbt-mnist-pngs.tar.gz")))
    assert ds.x_train.shape == (60000, 1, 28, 28) and ds.x_test.shape == (10000, 1, 28, 28)
    assert torch.bincount(ds.y_train).tolist() == [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
    assert abs(ds.mean[0] - 0.1307) < 0.001 and abs(ds.std[0] - 0.3081) < 0.001


def test_shared_agnews():
    ds = load_dataset("agnews", str(_shared("ag_news")))
    assert ds.x_train.shape == (5000, 64) and ds.x_test.shape == (7600, 64)
    assert torch.bincount(ds.y_test).tolist() == [1900] * 4
    assert torch.bincount(ds.y_train).tolist() == [1259, 1257, 1281, 1203]
    assert (ds.x_train[:, 0] > 1).float().mean() > 0.95     # nearly every first word is in the vocabulary


@pytest.mark.slow   # > 6 s: kept out of the fast subset
def test_shared_imagenette_small():
    ds = load_dataset("imagenette", str(_shared("imagenette/thunderInfy-imagenette.tar.gz")), image_size=32)
    assert ds.x_train.shape == (9469, 3, 32, 32) and ds.x_test.shape == (3925, 3, 32, 32)
    assert torch.bincount(ds.y_train).tolist() == [963, 955, 993, 858, 941, 956, 961, 931, 951, 960]
    assert ds.class_names[0] == "tench"
