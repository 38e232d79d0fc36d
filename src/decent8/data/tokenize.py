"""Text → model inputs: a pretrained model's own tokenizer, or the word-level ids as a dict.

:func:`hf_tokenize` runs the tokenizer shipped with a ``model.pretrained`` folder
(``AutoTokenizer``, local files only): ``[CLS] … [SEP]`` truncated to ``data.seq_len``
tokens and right-padded, as int64 ``input_ids`` and ``attention_mask`` ``[N, seq_len]``.
The loaders cache the result like decoded images (:mod:`.cache`; the key holds the
tokenizer files' fingerprint and ``seq_len``). :func:`id_inputs` gives the word-level
ids of :mod:`.agnews` the same dict form (mask = id ≠ 0) for ``model=hf`` from scratch.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ..errors import ConfigError, first_line

SPLITS = ("x_train", "x_test")
FIELDS = ("input_ids", "attention_mask")


def hf_tokenize(texts: list[str], model_dir: Path, seq_len: int) -> dict[str, np.ndarray]:
    """``{input_ids, attention_mask}`` int64 ``[len(texts), seq_len]`` from the folder's tokenizer."""
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise ConfigError("model", "a pretrained tokenizer needs the transformers package "
                                   "(pip install 'decent8[text]')") from None
    try:
        tok = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True, trust_remote_code=False)
    except Exception as e:  # OSError, ValueError, a damaged tokenizer file …: one line, never a traceback
        raise ConfigError("model.pretrained", f"no usable tokenizer in {str(model_dir)!r}: "
                                              f"{type(e).__name__}: {first_line(e, 240)}") from None
    enc = tok(list(texts), truncation=True, max_length=int(seq_len), padding="max_length", return_tensors="np",
              return_token_type_ids=False)
    return {f: np.asarray(enc[f], dtype=np.int64) for f in FIELDS}


def flatten(split: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``{x_train.input_ids: …}``: a dict of arrays as flat .npz keys."""
    return {f"{split}.{k}": v for k, v in inputs.items()}


def unflatten(arrays: dict[str, np.ndarray], split: str) -> dict[str, torch.Tensor]:
    return {k.split(".", 1)[1]: torch.from_numpy(v) for k, v in arrays.items() if k.startswith(split + ".")}


def id_inputs(x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Word-level ids ``[N, T]`` (0 = padding) as ``{input_ids, attention_mask}``."""
    return {"input_ids": x, "attention_mask": (x != 0).to(torch.int64)}


__all__ = ["hf_tokenize", "flatten", "unflatten", "id_inputs", "FIELDS", "SPLITS"]
