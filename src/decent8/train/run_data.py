"""The data set of a run as its config names it (resolution and construction both read it)."""
from __future__ import annotations

from ..config import TrainConfig
from ..data.dataset import ArrayDataset
from ..data.registry import dataset_from_config
from ..errors import ConfigError
from ..models.pretrained import resolve_pretrained
from ..data.tokenize import id_inputs


def pretrained_folder(cfg: TrainConfig):
    """The folder of ``model.pretrained`` (model=hf), resolved without downloading; None otherwise."""
    if cfg.model.pretrained is None:
        return None
    if cfg.model.name != "hf":
        raise ConfigError("model.pretrained", f"applies to model=hf, not model={cfg.model.name}")
    return resolve_pretrained(cfg.model.pretrained, cfg.data.cache_dir)


def id_dict_inputs(dataset: ArrayDataset) -> ArrayDataset:
    """model=hf on word-level ids ``[N, T]``: the same ids as ``{input_ids, attention_mask}``."""
    import dataclasses
    if isinstance(dataset.x_train, dict) or dataset.vocab_size is None:
        return dataset
    return dataclasses.replace(dataset, x_train=id_inputs(dataset.x_train), x_test=id_inputs(dataset.x_test))


def load_dataset(cfg: TrainConfig, module_given: bool = False) -> ArrayDataset:
    """The run's data set as its config names it (model=hf: ids as transformer inputs)."""
    dataset = dataset_from_config(cfg.data, cfg.seed, tokenizer=pretrained_folder(cfg))
    if cfg.model.name == "hf" and not module_given:
        dataset = id_dict_inputs(dataset)
    return dataset
