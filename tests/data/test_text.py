"""Text (issue 13): local Adam/AdamW, model=hf from a local folder, the tokenizer cache,
the Sentlen-style builder, 8-bit transformers."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from decent8.errors import ConfigError
from decent8.optim import LocalAdam, make_optimizer

HERE = Path(__file__).resolve().parents[1]  # tests/: the fixtures' folder


# --------------------------------------------------------------------------- local Adam
@pytest.mark.parametrize("kind,ref", [("adamw", torch.optim.AdamW), ("adam", torch.optim.Adam)])
def test_local_adam_equals_torch_on_every_node_alone(kind, ref):
    k, d, steps, lr, wd, betas, eps = 3, 50, 25, 0.01, 0.1, (0.9, 0.95), 1e-6
    g = torch.Generator().manual_seed(0)
    # float64, so that the comparison measures the update rule, not float32 rounding order
    x0 = torch.randn(k, d, generator=g, dtype=torch.float64)
    targets = torch.randn(k, d, generator=g, dtype=torch.float64)
    opt = make_optimizer(kind, 0.9, True, wd, betas=betas, eps=eps)
    assert isinstance(opt, LocalAdam) and opt.name == kind
    z = x0.clone()
    opt.init_state(z)
    refs = [torch.nn.Parameter(x0[i].clone()) for i in range(k)]
    ref_opts = [ref([p], lr=lr, betas=betas, eps=eps, weight_decay=wd) for p in refs]
    for t in range(steps):
        # a node-dependent, step-dependent gradient: ∇ of ½·c_t·|x − target_i|²
        c = 1.0 + 0.5 * np.sin(t)
        grad = c * (z - targets)
        z.sub_(opt.direction(grad, z), alpha=lr)
        for i, (p, o) in enumerate(zip(refs, ref_opts)):
            p.grad = c * (p.detach() - targets[i])
            o.step()
    for i in range(k):
        assert (z[i] - refs[i].detach()).abs().max().item() <= 1e-12
    assert (z - x0).abs().mean().item() > 0.1  # the nodes did move


def test_local_adam_state_round_trips_and_resumes_identically():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 10, generator=g)
    grads = [torch.randn(2, 10, generator=g) for _ in range(6)]
    a = LocalAdam((0.9, 0.9), 1e-8, 1e-4, decoupled=True)
    a.init_state(x)
    for gr in grads[:3]:
        a.direction(gr, x)
    b = LocalAdam((0.9, 0.9), 1e-8, 1e-4, decoupled=True)
    b.init_state(x)
    b.load_state_dict({k: v.clone() for k, v in a.state_dict().items()})
    assert b.t == 3
    for gr in grads[3:]:
        assert torch.equal(a.direction(gr, x), b.direction(gr, x))


@pytest.mark.parametrize("betas,eps,option", [([0.9], 1e-8, "optimizer.betas"), ([0.9, 1.0], 1e-8, "optimizer.betas"),
                                              ([0.9, 0.99], 0.0, "optimizer.eps")])
def test_bad_adam_options_name_the_option(betas, eps, option):
    with pytest.raises(ConfigError) as e:
        make_optimizer("adamw", 0.9, True, 0.0, betas=betas, eps=eps)
    assert e.value.option == option


# --------------------------------------------------------------------------- Sentlen-style
def test_sentlen_bins_and_word_count():
    from decent8.data.sentlen import BINS, length_bin, sentences, word_count

    assert BINS == ((5, 8), (9, 12), (13, 16), (17, 20), (21, 25), (26, 28))
    expected = {4: -1, 5: 0, 8: 0, 9: 1, 12: 1, 13: 2, 16: 2, 17: 3, 20: 3, 21: 4, 25: 4, 26: 5, 28: 5, 29: -1}
    assert {n: length_bin(n) for n in expected} == expected
    assert word_count("Shares of Acme rose 5 % - a record , said analysts .") == 9   # '%', '-', ',', '.' do not count
    text = "Oil rose\\to #36;50 a barrel. It was a quot;recordquot; day! Trading ends at 4 p.m. no"
    assert sentences(text) == ["Oil rose to $50 a barrel.", 'It was a "record" day!']


def _write_sentence_corpus(root: Path) -> None:
    """AG News-style CSVs whose descriptions hold sentences of every length 5..30."""
    import csv

    rng = np.random.default_rng(0)
    words = "alpha beta gamma delta omega sigma kappa theta lambda zeta".split()
    root.mkdir(parents=True)
    for name, reps in (("train.csv", 6), ("test.csv", 3)):
        with open(root / name, "w", newline="") as f:
            w = csv.writer(f, quoting=csv.QUOTE_ALL)
            for r in range(reps):
                for n in range(3, 31):
                    s1 = " ".join(rng.choice(words, n)).capitalize() + "."
                    s2 = " ".join(rng.choice(words, 31 - n + 2)).capitalize() + "."
                    w.writerow([str(1 + n % 4), "Title Here", f"{s1} {s2}"])


def test_sentlen_style_builder_yields_six_balanced_bins_with_the_right_lengths(tmp_path):
    from decent8.data.sentlen import BINS, read_texts, word_count

    _write_sentence_corpus(tmp_path / "ag")
    t = read_texts(tmp_path / "ag", test_fraction=0.25)
    for split in ("train", "test"):
        texts, y = t[f"{split}_texts"], t[f"y_{split}"]
        counts = np.bincount(y, minlength=6)
        assert counts.min() == counts.max() > 0, counts  # balanced
        for s, c in zip(texts, y):
            lo, hi = BINS[c]
            assert lo <= word_count(s) <= hi
    assert not set(t["train_texts"]) & set(t["test_texts"])
    n_train, n_test = len(t["train_texts"]), len(t["test_texts"])
    assert abs(n_test / (n_train + n_test) - 0.25) < 0.05


def test_senteval_file_is_read_as_is(tmp_path):
    from decent8.data.registry import load_dataset

    lines = ["tr\t0\tA short one here now .", "tr\t5\t" + " ".join(["w"] * 27), "va\t1\tignored in this split ok",
             "te\t2\t" + " ".join(["x"] * 14), "te\t0\tfive words in this line"]
    (tmp_path / "se").mkdir()
    (tmp_path / "se" / "sentence_length.txt").write_text("\n".join(lines) + "\n")
    ds = load_dataset("sentlen", str(tmp_path / "se"), cache_dir=str(tmp_path / "c"), seq_len=8, vocab_size=20)
    assert ds.y_train.tolist() == [0, 5] and ds.y_test.tolist() == [2, 0]
    assert ds.num_classes == 6 and ds.class_names[0] == "5-8 words" and ds.x_train.shape == (2, 8)


# --------------------------------------------------------------------------- pretrained folder + tokenizer
@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    from tests.text_fixtures import write_tiny_pretrained

    return write_tiny_pretrained(tmp_path_factory.mktemp("tiny") / "bert")


def test_tokenizer_cache_round_trips(tmp_path, tiny_dir):
    from tests.data_fixtures import AG_TRAIN, write_agnews
    from decent8.data import cache as cache_mod
    from decent8.data.agnews import load_agnews
    from decent8.data.tokenize import hf_tokenize
    from transformers import AutoTokenizer

    write_agnews(tmp_path / "ag")
    a = load_agnews(str(tmp_path / "ag"), str(tmp_path / "c"), seq_len=12, tokenizer=tiny_dir)
    files = sorted((tmp_path / "c").glob("agnews-tok-*.npz"))
    assert len(files) == 1
    b = load_agnews(str(tmp_path / "ag"), str(tmp_path / "c"), seq_len=12, tokenizer=tiny_dir)  # from the cache
    assert set(a.x_train) == {"input_ids", "attention_mask"} and a.x_train["input_ids"].shape == (len(a.y_train), 12)
    for split in ("x_train", "x_test"):
        for f in ("input_ids", "attention_mask"):
            assert torch.equal(getattr(a, split)[f], getattr(b, split)[f])
    # the cached ids are the tokenizer's own: [CLS] title description [SEP], padded with 0
    tok = AutoTokenizer.from_pretrained(str(tiny_dir))
    ids = a.x_train["input_ids"][0].tolist()
    assert ids[0] == tok.cls_token_id and tok.sep_token_id in ids
    direct = hf_tokenize(["Team Wins Final The home team wins the final match."], tiny_dir, 12)
    row = [i for i, (_, title, _) in enumerate(AG_TRAIN) if title == "Team Wins Final"][0]
    assert a.x_train["input_ids"][row].tolist() == direct["input_ids"][0].tolist()
    # a changed seq_len is another cache file, never the old one
    c = load_agnews(str(tmp_path / "ag"), str(tmp_path / "c"), seq_len=8, tokenizer=tiny_dir)
    assert c.x_train["input_ids"].shape[1] == 8 and len(list((tmp_path / "c").glob("agnews-tok-*.npz"))) == 2
    assert cache_mod.LOADER_VERSION >= 1


def test_missing_pretrained_model_is_one_line_naming_where_it_looked(tmp_path):
    from decent8.models.pretrained import resolve_pretrained

    with pytest.raises(ConfigError) as e:
        resolve_pretrained(str(tmp_path / "nope"))
    assert e.value.option == "model.pretrained" and str(tmp_path / "nope") in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(ConfigError) as e:
        resolve_pretrained("no-such-model-package-xyz")
    assert "no installed package" in str(e.value)


def test_pretrained_classifier_keeps_the_checkpoint_and_seeds_the_head(tiny_dir):
    from decent8.models import make_model
    from transformers import BertModel

    enc = BertModel.from_pretrained(str(tiny_dir))
    m1 = make_model("hf", {"input_ids": (12,), "attention_mask": (12,)}, 3, pretrained_dir=tiny_dir, seed=5)
    m2 = make_model("hf", {"input_ids": (12,), "attention_mask": (12,)}, 3, pretrained_dir=tiny_dir, seed=5)
    m3 = make_model("hf", {"input_ids": (12,), "attention_mask": (12,)}, 3, pretrained_dir=tiny_dir, seed=6)
    assert torch.equal(m1.bert.encoder.layer[0].attention.self.query.weight, enc.encoder.layer[0].attention.self.query.weight)
    assert torch.equal(m1.classifier.weight, m2.classifier.weight)
    assert not torch.equal(m1.classifier.weight, m3.classifier.weight) and m1.classifier.weight.shape == (3, 32)


def test_int8_transformer_quantizes_linear_layers_only(tiny_dir):
    from decent8.models import make_model
    from decent8.quant import QLinear, QuantSpec

    m = make_model("hf", {"input_ids": (12,), "attention_mask": (12,)}, 2, precision="int8", quant=QuantSpec(),
                   pretrained_dir=tiny_dir)
    linears = [type(x) for x in m.modules() if isinstance(x, torch.nn.Linear)]
    assert linears and all(t is QLinear for t in linears)  # Q, K, V, attention out, FFN ×2 per layer, pooler, head
    assert len(linears) == 2 * 6 + 2
    assert type(m.bert.embeddings.word_embeddings) is torch.nn.Embedding
    assert type(m.bert.embeddings.LayerNorm) is torch.nn.LayerNorm


@pytest.mark.parametrize("precision", ["fp32", pytest.param("int8", marks=pytest.mark.slow)])
def test_hf_model_fine_tunes_on_agnews_with_local_adamw(tmp_path, tiny_dir, precision):
    """The whole path: model=hf model.pretrained=<folder>, its tokenizer, local AdamW, gossip."""
    from tests.data_fixtures import write_agnews
    from decent8.config import load_config
    from decent8.train.loop import train

    write_agnews(tmp_path / "ag")
    summary, run = train(load_config(None, [
        "nodes=2", "device=cpu", "model=hf", f"model.pretrained={tiny_dir}", "data.name=agnews",
        f"data.root={tmp_path / 'ag'}", f"data.cache_dir={tmp_path / 'c'}", "data.seq_len=16", "data.batch_size=2",
        "epochs=10", "eval_every=10", "skew=0", "algorithm=choco", "compression=identity", "optimizer.kind=adamw",
        "optimizer.lr=0.01",
        "optimizer.betas=[0.9,0.9]", "optimizer.schedule=constant", "optimizer.warmup_epochs=0",
        "algorithm.consensus_rounds=0", "sim.chunk=1", f"precision={precision}", "progress=false",
        f"out_dir={tmp_path}", "name=r"]), quiet=True)
    assert summary["model"] == "hf" and summary["final_train_loss"] < 1.2  # ln 4 = 1.39 at the start (0.95 measured)
    state = torch.load(run / "checkpoint.pt", map_location="cpu", weights_only=False)["engine"]["optimizer"]
    assert set(state) == {"m", "v", "t"} and int(state["t"]) == summary["steps"] and state["m"].shape[0] == 2


def test_agnews_default_model_and_hf_from_scratch_on_word_ids(tmp_path):
    from tests.data_fixtures import write_agnews
    from decent8.config import load_config
    from decent8.train.build import build

    write_agnews(tmp_path / "ag")
    base = ["nodes=2", "device=cpu", "data.name=agnews", f"data.root={tmp_path / 'ag'}",
            f"data.cache_dir={tmp_path / 'c'}", "data.seq_len=10", "data.batch_size=2", f"out_dir={tmp_path}"]
    assert build(load_config(None, base)).cfg.model.name == "text"   # the bag-of-embeddings default
    c = build(load_config(None, base + ["model=hf", "model.width=16"]))
    assert set(c.dataset.x_train) == {"input_ids", "attention_mask"}
    assert torch.equal(c.dataset.x_train["attention_mask"], (c.dataset.x_train["input_ids"] != 0).long())
    with pytest.raises(ConfigError) as e:
        build(load_config(None, base + [f"model.pretrained={tmp_path}"]))
    assert e.value.option == "model.pretrained"
