"""Regression over 8 nodes: the diabetes data set (442 patients, 10 features), an own MLP,
the Huber loss and an own metric, through the command line and the Python API.

The data go to a tensors file (``data.name=tensors``); the nodes get label-skewed shards
(``skew``: quantile bins of the target stand in for classes). The summary reports the
test RMSE, MAE and R² of the node models (their mean) and of the averaged model, and the
metric ``within_10pct`` below (share of predictions within 10 % of the target's range).

    python examples/regression.py                 # the Python API
    python examples/regression.py --write FILE    # the tensors file, for the command line:
    decent8 train data.name=tensors data.path=FILE model=examples.regression:make_mlp \\
        loss=examples.regression:huber metrics=examples.regression:within_10pct nodes=8 skew=0.8 \\
        algorithm=dpsgd compression=identity topology=ring optimizer.lr=0.05 epochs=40
"""
from __future__ import annotations

import argparse
import tempfile

import torch
import torch.nn.functional as F
from torch import nn

import decent8



def diabetes() -> tuple[torch.Tensor, torch.Tensor]:
    """Standardised features ``[442, 10]`` and targets ``[442]`` (sklearn's copy, shipped with it)."""
    from sklearn.datasets import load_diabetes

    x, y = load_diabetes(return_X_y=True)
    x, y = torch.tensor(x, dtype=torch.float32), torch.tensor(y, dtype=torch.float32)
    return (x - x.mean(0)) / x.std(0), (y - y.mean()) / y.std()


def write_tensors(path: str) -> None:
    x, y = diabetes()
    torch.save({"x": x, "y": y}, path)


def make_mlp(input_shape: tuple[int, ...]) -> nn.Module:
    """10 → 32 → 1 (decent8 passes ``input_shape``; ``num_classes`` is not asked for)."""
    return nn.Sequential(nn.Flatten(), nn.Linear(input_shape[-1], 32), nn.Tanh(), nn.Linear(32, 1))


def huber(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.huber_loss(outputs.reshape(-1), targets.reshape(-1).to(outputs.dtype), delta=1.0)


def within_10pct(outputs: torch.Tensor, targets: torch.Tensor) -> float:
    """Share of test predictions within 10 % of the targets' range of the target."""
    y = targets.reshape(-1).double()
    tol = 0.1 * (y.max() - y.min())
    return ((outputs.reshape(-1) - y).abs() <= tol).double().mean().item()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--write", metavar="FILE", help="write the tensors file and exit")
    p.add_argument("--epochs", type=int, default=40)
    args = p.parse_args()
    if args.write:
        write_tensors(args.write)
        print(args.write)
        return
    with tempfile.TemporaryDirectory() as out:
        summary, folder = decent8.train(make_mlp, diabetes(), loss=huber, metrics=within_10pct, nodes=8, skew=0.8,
                                        algorithm="dpsgd", compression="identity", topology="ring",
                                        optimizer__lr=0.05, epochs=args.epochs, out_dir=out)
        for k in ("mean_node_rmse", "averaged_model_rmse", "mean_node_mae", "averaged_model_mae",
                  "mean_node_r2", "averaged_model_r2", "mean_node_within_10pct", "averaged_model_within_10pct"):
            print(f"{k:30s} {summary[k]:.4f}")


if __name__ == "__main__":
    main()
