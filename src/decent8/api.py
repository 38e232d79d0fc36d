"""The Python API: train any ``nn.Module`` on any data with any loss, decentralized.

    import decent8
    summary, run_folder = decent8.train(model=make_net, data=(x, y), loss="mse",
                                        nodes=8, algorithm="dpsgd", epochs=20,
                                        optimizer={"lr": 0.05, "momentum": 0.0})

Every keyword option is a config option of ``decent8 train`` (``config.py``,
``TrainConfig``), dotted names written with ``__`` or as a mapping per group. The run
writes the same run folder as the command line (config.yaml, metrics.jsonl,
summary.json, checkpoints), and resumes with ``decent8.train(resume=folder, model=…,
data=…)`` given the same objects.
"""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch
from torch import nn

from .config import TrainConfig, apply_options, load_config
from .data.dataset import ArrayDataset
from .errors import ConfigError
from .models import init_parameters
from .models.user import call_factory, is_import_path
from .seeding import derive_seed
from .task import Task
from .data.tensors import from_arrays
from .quant.transform import to_low_precision
from .train.build import quant_spec
from .train.loop import train as run_training
from .config import from_dict
from .train.run_dir import RunDir
from .train.resume_trust import code_options
from .data.registry import dataset_from_config

DataLike = Any  # (x, y), (x_train, y_train, x_test, y_test), a torch Dataset, or an ArrayDataset


def _stack(items: Sequence[Any]) -> Any:
    first = items[0]
    if isinstance(first, dict):
        return {k: torch.stack([torch.as_tensor(it[k]) for it in items]) for k in first}
    return torch.stack([torch.as_tensor(it) for it in items])


def _from_torch_dataset(ds: torch.utils.data.Dataset) -> tuple[Any, torch.Tensor]:
    """All samples of a map-style dataset of ``(input, target)`` pairs, stacked."""
    try:
        n = len(ds)  # type: ignore[arg-type]
    except TypeError:
        raise ConfigError("data", "a torch Dataset must have a length (a map-style dataset)") from None
    if n == 0:
        raise ConfigError("data", "the dataset is empty")
    pairs = [ds[i] for i in range(n)]
    if not all(isinstance(p, (tuple, list)) and len(p) == 2 for p in pairs[:1]):
        raise ConfigError("data", "a torch Dataset must yield (input, target) pairs")
    return _stack([p[0] for p in pairs]), torch.as_tensor(np.asarray([np.asarray(p[1]) for p in pairs]))


def _as_tensors(x: Any, name: str) -> Any:
    if isinstance(x, dict):
        return {k: _as_tensors(v, f"{name}[{k!r}]") for k, v in x.items()}
    if isinstance(x, np.ndarray):
        x = torch.from_numpy(x)
    if not isinstance(x, torch.Tensor):
        raise ConfigError("data", f"{name} must be a tensor, an array or a dict of them, got {type(x).__name__}")
    return x.float() if x.is_floating_point() else x


def make_dataset(data: DataLike, test_fraction: float = 0.2, seed: int = 0) -> ArrayDataset:
    """An :class:`ArrayDataset` from the API's data forms (a seeded test split for ``(x, y)``)."""
    if isinstance(data, ArrayDataset):
        return data
    if isinstance(data, torch.utils.data.Dataset):
        data = _from_torch_dataset(data)
    if not isinstance(data, (tuple, list)) or len(data) not in (2, 4):
        raise ConfigError("data", "give (x, y), (x_train, y_train, x_test, y_test), a torch Dataset or an ArrayDataset")

    names = ("x", "y") if len(data) == 2 else ("x_train", "y_train", "x_test", "y_test")
    # one code path with `data.name=tensors`: the same checks, split and label handling
    ds = from_arrays({n: _as_tensors(v, n) for n, v in zip(names, data)}, test_fraction, seed, source="data")
    ds.name = "user"
    return ds


def _module(model: Any, ds: ArrayDataset, cfg: TrainConfig) -> nn.Module | None:
    if model is None or isinstance(model, str):
        return None
    if isinstance(model, nn.Module):
        module = copy.deepcopy(model)  # its current parameters are every node's start
    elif callable(model):
        module = call_factory(model, input_shape=ds.input_shape, num_classes=ds.num_classes,
                              vocab_size=ds.vocab_size, width=cfg.model.width)
        init_parameters(module, derive_seed(cfg.seed, "init"))
    else:
        raise ConfigError("model", f"must be an nn.Module, a factory, a model name or an import path, got {type(model).__name__}")
    if cfg.precision == "int8":
        spec = quant_spec(cfg)
        assert spec is not None
        module = to_low_precision(module, spec)
    return module


class TrainResult(tuple):
    """``(summary, run_folder)``, plus the trained models: :attr:`parameters` (every
    node's final parameters ``[n, d]``) and :meth:`averaged_model`."""

    def __new__(cls, summary: dict[str, Any], path: Path, outputs: dict[str, Any]) -> "TrainResult":
        obj = super().__new__(cls, (summary, path))
        obj.summary, obj.path = summary, path
        obj.parameters = outputs["parameters"]
        obj._buffers = outputs.get("buffers")
        obj._model = outputs["model"]
        return obj

    def node_model(self, i: int | None = None) -> nn.Module:
        """A copy of the user's module holding node ``i``'s parameters and buffers (None: the node average;
        the buffers are those node i is evaluated with under ``model.norm_stats``)."""
        sm = self._model
        params = self.parameters.mean(0) if i is None else self.parameters[i]
        module = copy.deepcopy(sm.module).cpu()
        named = sm.layout.unflatten(params)
        if self._buffers is not None and sm.buffer_layout is not None:
            # model.norm_stats=average: node models are evaluated with the node-mean statistics too
            mean = i is None or self.summary.get("norm_stats") == "average"
            bufs = self._buffers.mean(0) if mean else self._buffers[i]
            named.update(sm.buffer_layout.unflatten(bufs))
        with torch.no_grad():
            for name, t in module.state_dict(keep_vars=True).items():
                if name in named:
                    t.copy_(named[name].reshape(t.shape))
        return module.eval()

    def averaged_model(self) -> nn.Module:
        """The parameter-averaged model (with node-averaged buffers), as the user's module."""
        return self.node_model(None)


#: option groups whose value may be an import path named again on resume (docs/extending.md)
CODE_GROUPS = ("algorithm", "compression", "topology")


def train(model: nn.Module | Callable[..., nn.Module] | str | None = None, data: DataLike | None = None, *,
          loss: str | Callable | Task | None = None, parts: Sequence[Sequence[int]] | None = None,
          config: str | None = None, resume: str | Path | None = None, quiet: bool = True,
          trust_config: bool = False, metrics: "str | Callable | Sequence[Callable] | None" = None,
          **options: Any) -> TrainResult:
    """Train ``model`` on ``data`` over ``nodes`` decentralized nodes; returns ``(summary, run_folder)``
    (a :class:`TrainResult`, which also holds the trained parameters).

    ``model``: an ``nn.Module`` (copied; its parameters start every node), a factory
    (called with those of ``input_shape``, ``num_classes``, ``vocab_size``, ``width`` it
    accepts, then initialised from the seed), a built-in name or ``"pkg.module:factory"``;
    None: the config's model. ``data``: ``(x, y)`` (a seeded ``data.test_fraction`` is held
    out), ``(x_train, y_train, x_test, y_test)``, a map-style torch ``Dataset`` of
    ``(input, target)``, or None: the config's data set. Inputs may be dicts of tensors
    (keyword inputs). ``loss``: ``"cross_entropy"`` (default), ``"logistic"``, ``"mse"``,
    a callable ``loss(outputs, targets) -> scalar``, or a :class:`~decent8.task.Task`; the option
    ``task`` (``auto``, ``classification``, ``regression``) says whether a callable's runs
    report accuracy (auto: integer labels and ``[N, C]`` outputs do; :mod:`decent8.task`).
    ``metrics``: the user's own test metrics, ``fn(outputs, targets) -> float | dict``
    (a callable, ``"pkg.module:fn"`` or a list of callables; :mod:`decent8.train.user_metrics`),
    reported as ``mean_node_<name>`` and ``averaged_model_<name>`` beside the built-in ones.
    ``parts``: one list of training-row indices per node (default: the config's
    partition). ``config``: a YAML file; ``options``: config options (see module doc).
    ``resume``: a run folder to continue; code its config names by import path runs only
    if ``model`` / ``loss`` / ``algorithm`` / ``compression`` / ``topology`` name it again
    (model and loss may be given as objects) or ``trust_config``.
    """

    code_named = {f"{k}.name": options.pop(k) for k in CODE_GROUPS if isinstance(options.get(k), str)} \
        if resume is not None else {}
    if resume is not None:
        if options or config:
            raise ConfigError("resume", "takes no config or options: the run folder's config.yaml is used as saved "
                                        "(except naming its code again: algorithm=, compression=, topology=)")
        given: dict[str, Any] = {}
        import yaml
        cfg = from_dict(yaml.safe_load(RunDir.existing(resume).file("config.yaml").read_text()))
        saved = code_options(cfg)
    else:
        opts = dict(options)
        if isinstance(model, str):
            opts["model.name" if is_import_path(model) or "." not in model else "model"] = model
        if isinstance(loss, str):
            opts["loss"] = loss
        if isinstance(metrics, str):
            opts["metrics"] = metrics
        if data is not None and "data" not in options and "data.name" not in options and "data__name" not in options:
            opts["data.name"] = "user"
        if loss is not None and not isinstance(loss, str):   # the config records the callable's name
            opts["loss"] = getattr(loss, "name", None) or getattr(loss, "__name__", "custom")
        if model is not None and not isinstance(model, str):  # ... and the model's
            opts["model.name"] = (type(model).__name__ if isinstance(model, nn.Module)
                                  else getattr(model, "__name__", type(model).__name__))
        cfg = apply_options(load_config(config), opts)
    given = {}
    if data is not None:
        given["dataset"] = make_dataset(data, cfg.data.test_fraction, cfg.seed)
    if loss is not None and not isinstance(loss, str):
        given["loss"] = loss
    if metrics is not None and not isinstance(metrics, str):
        given["metrics"] = metrics
    if parts is not None:
        given["parts"] = parts
    if model is not None and not isinstance(model, str):
        if "dataset" not in given:
            given["dataset"] = dataset_from_config(cfg.data, cfg.seed)
        given["module"] = _module(model, given["dataset"], cfg)
    outputs: dict[str, Any] = {}
    trust: dict[str, Any] = {}
    if resume is not None:  # code the caller names (or replaces by an object) again may run
        named = {"model.name": model, "loss": loss, **code_named}
        trust = {"trust_config": trust_config,
                 "named_code": {k: (v if isinstance(v, str) else saved[k]) for k, v in named.items()
                                if v is not None and k in saved}}
    summary, path = run_training(cfg, resume=resume, quiet=quiet, outputs=outputs, **trust, **given)
    return TrainResult(summary, path, outputs)


__all__ = ["train", "make_dataset", "TrainResult"]
