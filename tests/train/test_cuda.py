"""The CUDA paths of a whole run (skipped without a GPU; run on a lent one).

An augmented ResNet-20 run on CUDA in every execution (`sim.chunk` auto, the loop, vmap
chunks), FP32 and 8 bits, and one config, one result on the GPU: the loop and vmap land on
the same training loss, and FP32 on CUDA lands where the CPU run does. The bounds are
loose (1e-2 relative) because cuDNN convolutions may run in TF32 on the GPU.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from tests.data_fixtures import write_cifar_pickles
from tests.helpers import call

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


@pytest.fixture(scope="module")
def cifar(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cifar")
    write_cifar_pickles(root / "b", per_batch=32, test=32)
    return root


def _train(cifar: Path, out: Path, name: str, *extra: str) -> dict:
    rc, _, err = call(["train", "data.name=cifar10", f"data.root={cifar / 'b'}", f"data.cache_dir={cifar / 'c'}",
                       "data.augment=true", "model=resnet20", "nodes=4", "data.batch_size=4", "epochs=1",
                       "algorithm.consensus_rounds=1", "optimizer.lr=0.05", "progress=false", f"out_dir={out}",
                       f"name={name}", "--quiet", *extra])
    assert rc == 0, err
    return json.loads((out / name / "summary.json").read_text())


@pytest.mark.parametrize("precision", ["fp32", "int8"])
@pytest.mark.parametrize("chunk", ["auto", "1", "4"])
def test_an_augmented_resnet_trains_on_cuda_in_every_execution(cifar, tmp_path, precision, chunk):
    s = _train(cifar, tmp_path, "r", "device=cuda", f"precision={precision}", f"sim.chunk={chunk}")
    assert str(s["device"]).startswith("cuda")
    assert s["environment"]["tf32"] == {"convolutions": torch.backends.cudnn.allow_tf32,
                                        "matmul": torch.backends.cuda.matmul.allow_tf32}
    assert math.isfinite(s["final_train_loss"]) and 0.0 <= s["mean_node_accuracy"] <= 1.0
    assert (tmp_path / "r" / "execution.json").is_file()


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_the_loop_and_vmap_give_one_result_on_cuda(cifar, tmp_path, precision):
    loop = _train(cifar, tmp_path, "loop", "device=cuda", f"precision={precision}", "sim.chunk=1")
    vmap = _train(cifar, tmp_path, "vmap", "device=cuda", f"precision={precision}", "sim.chunk=4")
    assert abs(loop["final_train_loss"] - vmap["final_train_loss"]) <= 1e-2 * loop["final_train_loss"]


def test_fp32_on_cuda_lands_where_the_cpu_run_does(cifar, tmp_path):
    cpu = _train(cifar, tmp_path, "cpu", "device=cpu", "sim.chunk=1")
    gpu = _train(cifar, tmp_path, "gpu", "device=cuda", "sim.chunk=1")
    assert abs(cpu["final_train_loss"] - gpu["final_train_loss"]) <= 1e-2 * cpu["final_train_loss"]
