"""``model=hf``: a BERT-family encoder with a sequence-classification head (the paper's Table 6).

* ``model.pretrained=<folder or package>`` (:mod:`.pretrained`): the pretrained encoder
  (``AutoModelForSequenceClassification``, loaded from local files only) with a new
  classification head; the weights the checkpoint lacks (the head) are initialised
  from the run's seed, the rest is the checkpoint's.
* ``model.pretrained=null``: a small randomly initialised BERT (2 layers, hidden
  ``model.width`` = 64, 2 heads, no dropout) over the data's own token ids — for tests
  and from-scratch runs.

Inputs are dicts ``{input_ids, attention_mask}`` (int64 ``[b, T]``); the output's
``logits`` are scored. ``precision=int8`` applies the 8-bit module transform
(docs/algorithms.md §5): every ``nn.Linear`` (Q/K/V, attention output, the two
feed-forward layers, pooler, head) becomes 8-bit; embeddings, LayerNorm, softmax and
the attention score / value products stay float32.
"""
from __future__ import annotations

import contextlib
import pickle
from pathlib import Path

import torch
from torch import nn

from ..errors import ConfigError, first_line
from ..plugins import import_library


def _transformers():

    try:
        transformers = import_library("transformers")   # never from the current folder or a run folder
    except ImportError:
        raise ConfigError("model", "model=hf needs the transformers package (pip install 'decent8[text]')") from None
    return transformers


@contextlib.contextmanager
def _quiet(transformers):
    """Silence transformers' 'newly initialized weights' notices while loading."""
    log = transformers.logging
    level = log.get_verbosity()
    bars = log.is_progress_bar_enabled()
    log.set_verbosity_error()
    log.disable_progress_bar()
    try:
        yield
    finally:
        log.set_verbosity(level)
        if bars:
            log.enable_progress_bar()


def tiny_bert(num_classes: int, vocab_size: int, seq_len: int, width: int | None = None) -> nn.Module:
    """A small random BERT classifier: 2 layers, hidden ``width`` (64), 2 heads, no dropout."""
    t = _transformers()
    h = int(width or 64)
    heads = 2 if h % 2 == 0 else 1
    cfg = t.BertConfig(vocab_size=int(vocab_size), hidden_size=h, num_hidden_layers=2, num_attention_heads=heads,
                       intermediate_size=2 * h, max_position_embeddings=max(int(seq_len), 8), num_labels=num_classes,
                       hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, pad_token_id=0)
    with _quiet(t):
        return t.BertForSequenceClassification(cfg)


def pretrained_classifier(model_dir: Path, num_classes: int, seed: int) -> nn.Module:
    """The pretrained encoder in ``model_dir`` with a ``num_classes`` head; the weights
    missing from the checkpoint are re-initialised from ``seed`` (normal(0, 0.02), bias 0,
    BERT's own scheme), so the head does not depend on the global RNG."""
    t = _transformers()
    with _quiet(t):
        try:
            module, info = t.AutoModelForSequenceClassification.from_pretrained(
                str(model_dir), num_labels=num_classes, local_files_only=True, output_loading_info=True,
                trust_remote_code=False)
        except pickle.UnpicklingError:  # torch's weights_only load refused objects that would run code
            raise ConfigError("model.pretrained", f"the weights in {str(model_dir)!r} are not plain tensors (a pickle "
                                                  f"naming code); decent8 loads weights only, never code "
                                                  f"(model.safetensors is safe)") from None
        except Exception as e:  # OSError, ValueError, a damaged weights file …
            raise ConfigError("model.pretrained", f"cannot load a classifier from {str(model_dir)!r}: "
                                                  f"{type(e).__name__}: {first_line(e, 240)}") from None
    missing = set(info.get("missing_keys", []))
    owners = {k.rsplit(".", 1)[0] for k in missing}
    std = float(getattr(module.config, "initializer_range", 0.02))
    g = torch.Generator().manual_seed(int(seed))
    with torch.no_grad():
        for name, m in module.named_modules():
            if name in owners and isinstance(m, nn.Linear):
                m.weight.copy_(torch.randn(m.weight.shape, generator=g) * std)
                if m.bias is not None:
                    m.bias.zero_()
    module.train()
    return module


def hf_model(pretrained_dir: Path | None, num_classes: int, vocab_size: int | None, seq_len: int,
             width: int | None, seed: int) -> nn.Module:
    """``model=hf``: pretrained from ``pretrained_dir``, or the tiny random BERT when None."""
    if pretrained_dir is not None:
        return pretrained_classifier(pretrained_dir, num_classes, seed)
    if vocab_size is None:
        raise ConfigError("model", "model=hf without model.pretrained needs token-id data (data.name=agnews, "
                                   "sentlen, or a tensors file of ids)")
    return tiny_bert(num_classes, vocab_size, seq_len, width)


__all__ = ["tiny_bert", "pretrained_classifier", "hf_model"]
