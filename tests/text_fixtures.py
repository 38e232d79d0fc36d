"""A tiny local "pretrained" BERT folder (config, weights, word-piece tokenizer) for the text tests."""
from __future__ import annotations

from pathlib import Path

WORDS = ("the a of in to and is for on new team wins final match leaders talks chip phones player star game "
         "market shares price oil company said year sentence short long words this that with was it").split()


def write_tiny_pretrained(folder: Path, num_labels: int = 2, seed: int = 0) -> Path:
    """Save a 2-layer random BERT and a word-level tokenizer over :data:`WORDS` into ``folder``."""
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", *WORDS]
    ids = {w: i for i, w in enumerate(vocab)}
    core = Tokenizer(models.WordPiece(ids, unk_token="[UNK]"))
    core.normalizer = normalizers.BertNormalizer(lowercase=True)
    core.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    core.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    tok = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                  sep_token="[SEP]", mask_token="[MASK]")
    tok.save_pretrained(str(folder))
    cfg = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=64, num_labels=num_labels,
                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    torch.manual_seed(seed)
    BertForSequenceClassification(cfg).bert.save_pretrained(str(folder))  # the encoder only: the head is new
    return folder
