"""Tests for the compression operators (SPEC §4)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from decent8.compression import (
    ALIASES,
    COMPRESSORS,
    IdentityCompressor,
    QuantizeCompressor,
    RandomKCompressor,
    SignCompressor,
    TopKCompressor,
    keep_count,
    make_compressor,
    pack_bits,
    unpack_bits,
)
from decent8.errors import ConfigError
from decent8.layout import ParamLayout

SMALL = ParamLayout([("w", (10, 100)), ("b", (37,)), ("v", (5, 100))])  # 1000, 37, 500
BIG = ParamLayout([("w", (10, 100)), ("b", (37,)), ("v", (700, 100))])  # 1000, 37, 70000
NAMES = COMPRESSORS + tuple(ALIASES)


def gens(k: int, seed: int = 0) -> list[torch.Generator]:
    return [torch.Generator().manual_seed(seed * 1000 + i) for i in range(k)]


def data(k: int, layout: ParamLayout = SMALL, seed: int = 0) -> torch.Tensor:
    return torch.randn(k, layout.dim, generator=torch.Generator().manual_seed(seed))


def slot_cols(layout: ParamLayout):
    return [(s.offset, s.end) for s in layout]


# --------------------------------------------------------------------------- bytes


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("k", [1, 5])
def test_nbytes_matches_payload_and_dtypes(name: str, k: int) -> None:
    comp = make_compressor(name, SMALL, stochastic=True)
    p = comp.encode(data(k), gens(k))
    spec = comp.spec()
    assert set(p.tensors) == set(spec)
    for n, (shape, dtype) in spec.items():
        t = p.tensors[n]
        assert t.dtype == dtype, n
        assert tuple(t.shape) == (k, *shape), n
    assert comp.nbytes() == p.nbytes_per_node()
    y = comp.decode(p)
    assert y.dtype == torch.float32 and y.shape == (k, SMALL.dim)


def test_byte_formulas() -> None:
    d, L = SMALL.dim, 3  # d = 1537
    # top-k 99 %: K = 10 + 1 + 5 = 16, int16 indices
    assert make_compressor("topk", SMALL).nbytes() == 16 * 4 + 16 * 2
    assert make_compressor("topk_int8", SMALL).nbytes() == 16 * 1 + 16 * 2 + 8 * L
    assert make_compressor("topk", SMALL, value_bits=8).nbytes() == 16 + 32 + 24
    assert make_compressor("randomk", SMALL).nbytes() == 16 * 4 + 16 * 2
    assert make_compressor("topk", SMALL, index_dtype="int32").nbytes() == 16 * 8
    # big slot (70000 > 65536): auto chooses int32; K = 10 + 1 + 700
    comp = make_compressor("topk", BIG)
    assert comp.index_dtype == torch.int32
    assert comp.nbytes() == 711 * 4 + 711 * 4
    assert comp.encode(data(2, BIG)).nbytes_per_node() == 711 * 8
    assert make_compressor("identity", SMALL).nbytes() == 4 * d
    assert make_compressor("quantize", SMALL).nbytes() == d + 8 * L
    assert make_compressor("sign", SMALL).nbytes() == math.ceil(d / 8) + 4 * L


def test_keep_count() -> None:
    assert keep_count(1000, 0.99) == 10
    assert keep_count(37, 0.99) == 1
    assert keep_count(70000, 0.99) == 700
    assert keep_count(1000, 0.9) == 100  # not 99 from binary rounding of 1 - 0.9
    assert keep_count(1000, 0.0) == 1000
    assert keep_count(0, 0.5) == 0


def test_index_dtype_choice() -> None:
    assert make_compressor("topk", SMALL).index_dtype == torch.int16
    assert make_compressor("topk", SMALL, index_dtype="int32").index_dtype == torch.int32
    exact = ParamLayout([("a", (65536,))])
    assert make_compressor("topk", exact).index_dtype == torch.int16
    with pytest.raises(ConfigError) as e:
        make_compressor("topk", BIG, index_dtype="int16")
    assert e.value.option == "compression.index_dtype"
    with pytest.raises(ConfigError) as e:
        make_compressor("topk", SMALL, index_dtype="int8")
    assert e.value.option == "compression.index_dtype"


# --------------------------------------------------------------------------- top-k


def topk_reference(x: np.ndarray, layout: ParamLayout, ratio: float) -> np.ndarray:
    out = np.zeros_like(x)
    for i in range(x.shape[0]):
        for (o, e), n in zip(slot_cols(layout), layout.numels):
            c = keep_count(n, ratio)
            idx = np.argsort(-np.abs(x[i, o:e]), kind="stable")[:c]
            out[i, o + idx] = x[i, o + idx]
    return out


@pytest.mark.parametrize("k", [1, 5])
@pytest.mark.parametrize("layout", [SMALL, BIG], ids=["int16", "int32"])
@pytest.mark.parametrize("ratio", [0.99, 0.9, 0.5])
def test_topk_keeps_largest(k: int, layout: ParamLayout, ratio: float) -> None:
    x = data(k, layout, seed=k)
    comp = TopKCompressor(layout, ratio)
    p = comp.encode(x)
    y = comp.decode(p)
    ref = topk_reference(x.numpy(), layout, ratio)
    assert np.array_equal(y.numpy(), ref)  # exact on the kept entries, zero elsewhere
    # per slot: k_l kept entries
    for (o, e), n in zip(slot_cols(layout), layout.numels):
        assert ((y[:, o:e] != 0).sum(1) == keep_count(n, ratio)).all()


# slots of size 30 and 3 (evenly spaced: strided views), 40 (unevenly spaced: a gather), 7 (alone)
GROUPED = ParamLayout([("a", (30,)), ("s", (3,)), ("b", (30,)), ("t", (3,)), ("c", (30,)), ("d", (40,)),
                       ("e", (2, 20)), ("f", (7,)), ("g", (40,))])


@pytest.mark.parametrize("ratio", [0.9, 0.5, 0.0])
def test_topk_grouped_selection_matches_per_layer_loop(ratio: float) -> None:
    """The selection runs once per distinct slot size (strided view or gather); the payload
    still lists slot after slot, each slot's kept entries are its k_l largest by magnitude,
    with ties (rounded data) kept to exactly k_l per slot."""
    comp = TopKCompressor(GROUPED, ratio)
    assert sorted(n for n, _, _ in comp.size_groups) == [3, 7, 30, 40]
    for x in (data(4, GROUPED, seed=3), (2 * data(4, GROUPED, seed=4)).round()):
        p = comp.encode(x)
        local = p.tensors["indices"].to(torch.int64) + 32768
        for li, (slot, c, start) in enumerate(zip(GROUPED, comp.keep, comp.kept_starts)):
            idx = local[:, start:start + c]
            assert ((idx >= 0) & (idx < slot.numel)).all() and all(row.unique().numel() == c for row in idx)
            xs = x[:, slot.offset:slot.end]
            assert torch.equal(p.tensors["values"][:, start:start + c], xs.gather(1, idx))
            kth = xs.abs().sort(dim=1, descending=True).values[:, c - 1:c]   # k_l-th largest magnitude
            assert (xs.gather(1, idx).abs() >= kth).all()
        if x.frac().abs().sum() > 0:  # no ties: equal to the reference
            assert np.array_equal(comp.decode(p).numpy(), topk_reference(x.numpy(), GROUPED, ratio))


def test_topk_int16_indices_roundtrip_full_range() -> None:
    layout = ParamLayout([("a", (65536,))])
    x = torch.zeros(2, 65536)
    x[0, 0] = 5.0
    x[0, 65535] = -7.0
    x[1, 32768] = 3.0
    x[1, 32767] = 2.0
    comp = TopKCompressor(layout, 1 - 2 / 65536)
    assert comp.num_kept == 2 and comp.index_dtype == torch.int16
    assert torch.equal(comp.decode(comp.encode(x)), x)


@pytest.mark.parametrize("k", [1, 5])
def test_topk_ratio_zero_lossless(k: int) -> None:
    x = data(k)
    for bits, exact in ((32, True), (8, False)):
        comp = make_compressor("topk", SMALL, ratio=0.0, value_bits=bits)
        y = comp.decode(comp.encode(x))
        if exact:
            assert torch.equal(y, x)
        else:
            assert (y - x).abs().max() < 0.05
    assert make_compressor("topk", SMALL, ratio=0.0).nbytes() == SMALL.dim * 6


@pytest.mark.parametrize("k", [1, 5])
def test_topk_int8_values(k: int) -> None:
    x = data(k, seed=3)
    c32, c8 = TopKCompressor(SMALL, 0.9), TopKCompressor(SMALL, 0.9, value_bits=8)
    y32, p8 = c32.decode(c32.encode(x)), c8.encode(x)
    y8 = c8.decode(p8)
    assert ((y32 != 0) | (y8 == 0)).all()  # nothing outside the top-k support
    scale = p8.tensors["scale"]  # [k, L]
    for li, (o, e) in enumerate(slot_cols(SMALL)):
        kept = y32[:, o:e] != 0
        err = (y8[:, o:e] - y32[:, o:e]).abs()
        assert (err[~kept] == 0).all()
        assert (err <= scale[:, li : li + 1] / 2 + 1e-6).all()
        # zero point is the min of the kept values
        mins = torch.where(kept, y32[:, o:e], torch.inf).amin(1)
        assert torch.allclose(p8.tensors["zero"][:, li], mins)


# --------------------------------------------------------------------------- random-k


@pytest.mark.parametrize("k", [1, 5])
def test_randomk(k: int) -> None:
    x = data(k)
    comp = RandomKCompressor(SMALL, 0.9)
    assert comp.stochastic
    p1, p2 = comp.encode(x, gens(k, 1)), comp.encode(x, gens(k, 1))
    for n in p1.tensors:
        assert torch.equal(p1.tensors[n], p2.tensors[n])
    p3 = comp.encode(x, gens(k, 2))
    assert not torch.equal(p1.tensors["indices"], p3.tensors["indices"])
    y = comp.decode(p1)
    kept = y != 0
    assert torch.equal(y[kept], x[kept])  # values exact (unscaled)
    for (o, e), n in zip(slot_cols(SMALL), SMALL.numels):
        assert (kept[:, o:e].sum(1) == keep_count(n, 0.9)).all()
    if k > 1:  # nodes draw independently
        assert not torch.equal(kept[0], kept[1])


def test_randomk_needs_generators() -> None:
    comp = RandomKCompressor(SMALL, 0.9)
    with pytest.raises(ValueError):
        comp.encode(data(2))
    with pytest.raises(ValueError):
        comp.encode(data(2), gens(3))


def test_randomk_roughly_uniform() -> None:
    layout = ParamLayout.single(10)
    comp = RandomKCompressor(layout, 0.7)  # keep 3 of 10
    g = gens(1, 7)
    counts = torch.zeros(10)
    x = torch.arange(1, 11, dtype=torch.float32)[None]
    for _ in range(2000):
        counts += (comp.roundtrip(x, g) != 0)[0].float()
    assert counts.sum() == 6000
    assert (counts / 2000 - 0.3).abs().max() < 0.05


# --------------------------------------------------------------------------- quantize


@pytest.mark.parametrize("k", [1, 5])
def test_quantize_error_bound(k: int) -> None:
    x = data(k) * torch.linspace(0.1, 10, SMALL.dim)
    comp = QuantizeCompressor(SMALL)
    p = comp.encode(x)
    y = comp.decode(p)
    scale = p.tensors["scale"]
    for li, (o, e) in enumerate(slot_cols(SMALL)):
        xs = x[:, o:e]
        assert torch.allclose(p.tensors["zero"][:, li], xs.amin(1))
        assert torch.allclose(scale[:, li], (xs.amax(1) - xs.amin(1)) / 255)
        err = (y[:, o:e] - xs).abs()
        assert (err <= scale[:, li : li + 1] / 2 * (1 + 1e-4) + 1e-6).all()
        # the extremes are representable: min and max map to levels 0 and 255
        q = p.tensors["values"][:, o:e]
        assert (q.amin(1) == 0).all() and (q.amax(1) == 255).all()


def test_quantize_constant_slot() -> None:
    x = data(3)
    x[:, :1000] = 2.5
    x[1, 1000:1037] = 0.0
    comp = QuantizeCompressor(SMALL)
    p = comp.encode(x)
    y = comp.decode(p)
    assert torch.isfinite(y).all()
    assert (y[:, :1000] == 2.5).all()
    assert (y[1, 1000:1037] == 0).all()


@pytest.mark.parametrize("k", [1, 5])
def test_quantize_stochastic(k: int) -> None:
    x = data(k)
    comp = make_compressor("int8", SMALL, stochastic=True)
    assert comp.stochastic
    with pytest.raises(ValueError):
        comp.encode(x)
    p1, p2 = comp.encode(x, gens(k, 1)), comp.encode(x, gens(k, 1))
    assert torch.equal(p1.tensors["values"], p2.tensors["values"])
    p3 = comp.encode(x, gens(k, 2))
    assert not torch.equal(p1.tensors["values"], p3.tensors["values"])
    y = comp.decode(p1)
    scale = p1.tensors["scale"][:, SMALL.segment_ids()]
    assert ((y - x).abs() <= scale * (1 + 1e-4) + 1e-6).all()


def test_quantize_stochastic_unbiased() -> None:
    layout = ParamLayout([("a", (2,)), ("b", (3,))])
    x = torch.tensor([[0.0, 1.0, 0.0, 0.3, 1.0]])
    comp = QuantizeCompressor(layout, stochastic=True)
    g = gens(1, 3)
    mean = sum(comp.roundtrip(x, g) for _ in range(4000)) / 4000
    assert torch.allclose(mean, x, atol=2e-4)


def test_quantize_bits() -> None:
    with pytest.raises(ConfigError) as e:
        make_compressor("quantize", SMALL, bits=4)
    assert e.value.option == "compression.bits"


# --------------------------------------------------------------------------- sign


@pytest.mark.parametrize("k", [1, 5])
def test_sign(k: int) -> None:
    x = data(k, seed=4)
    x[:, 3] = 0.0
    comp = SignCompressor(SMALL)
    p = comp.encode(x)
    y = comp.decode(p)
    for li, (o, e) in enumerate(slot_cols(SMALL)):
        scale = x[:, o:e].abs().mean(1, keepdim=True)
        assert torch.allclose(p.tensors["scale"][:, li : li + 1], scale)
        expect = torch.where(x[:, o:e] > 0, scale, -scale)
        assert torch.allclose(y[:, o:e], expect)
    assert (y[:, 3] < 0).all()  # x = 0 → bit 0 → −scale


@pytest.mark.parametrize("n", [1, 7, 8, 9, 64, 1537])
def test_pack_unpack_bits(n: int) -> None:
    bits = torch.rand(3, n, generator=torch.Generator().manual_seed(n)) > 0.5
    packed = pack_bits(bits)
    assert packed.dtype == torch.uint8 and packed.shape == (3, (n + 7) // 8)
    assert torch.equal(unpack_bits(packed, n).bool(), bits)
    # LSB first: element 8i + j is bit j of byte i
    ref = np.packbits(bits.numpy(), axis=1, bitorder="little")
    assert np.array_equal(packed.numpy(), ref)


# --------------------------------------------------------------------------- identity


@pytest.mark.parametrize("k", [1, 5])
def test_identity(k: int) -> None:
    x = data(k)
    comp = make_compressor("none", SMALL)
    assert isinstance(comp, IdentityCompressor) and comp.is_identity
    p = comp.encode(x)
    assert torch.equal(comp.decode(p), x)
    assert p.tensors["values"].dtype == torch.float32 and p.nbytes_per_node() == 4 * SMALL.dim
    assert not make_compressor("topk", SMALL, ratio=0.0).is_identity


# --------------------------------------------------------------------------- factory


def test_factory_names() -> None:
    assert set(COMPRESSORS) == {"identity", "topk", "topk_int8", "randomk", "quantize", "sign"}
    assert isinstance(make_compressor("identity", SMALL), IdentityCompressor)
    assert isinstance(make_compressor("topk", SMALL), TopKCompressor)
    assert make_compressor("topk_int8", SMALL).value_bits == 8
    assert make_compressor("topk", SMALL).value_bits == 32
    assert isinstance(make_compressor("randomk", SMALL), RandomKCompressor)
    assert isinstance(make_compressor("quantize", SMALL), QuantizeCompressor)
    assert isinstance(make_compressor("int8", SMALL), QuantizeCompressor)
    assert isinstance(make_compressor("sign", SMALL), SignCompressor)


def test_factory_errors() -> None:
    with pytest.raises(ConfigError) as e:
        make_compressor("gzip", SMALL)
    assert e.value.option == "compression"
    for n in COMPRESSORS:
        assert n in str(e.value)
    for bad in (1.0, -0.1, 1.5, float("nan"), "x"):
        with pytest.raises(ConfigError) as e:
            make_compressor("topk", SMALL, ratio=bad)
        assert e.value.option == "compression.ratio"
    with pytest.raises(ConfigError) as e:
        make_compressor("topk", SMALL, value_bits=16)
    assert e.value.option == "compression.value_bits"
    with pytest.raises(ConfigError) as e:
        TopKCompressor(SMALL, 0.99, value_bits=4)
    assert e.value.option == "compression.value_bits"


def test_bad_input_shape() -> None:
    comp = make_compressor("topk", SMALL)
    with pytest.raises(ValueError):
        comp.encode(torch.randn(2, SMALL.dim + 1))
    with pytest.raises(ValueError):
        comp.encode(torch.randn(SMALL.dim))


@pytest.mark.parametrize("name", COMPRESSORS)
def test_decode_stacked_payloads(name: str) -> None:
    """Payloads of different senders stack along the node axis and decode together."""
    from decent8.compression import Payload

    comp = make_compressor(name, SMALL, ratio=0.9)
    x = data(4)
    p = comp.encode(x, gens(4))
    whole = comp.decode(p)
    parts = Payload.stack([p.rows(i) for i in (2, 0)])
    assert torch.equal(comp.decode(parts), whole[[2, 0]])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("name", COMPRESSORS)
def test_cuda(name: str) -> None:
    comp = make_compressor(name, SMALL, ratio=0.9)
    x = data(3)
    g_cpu, g_gpu = gens(3), [torch.Generator(device="cuda").manual_seed(i) for i in range(3)]
    p = comp.encode(x.cuda(), g_gpu)
    assert all(t.is_cuda for t in p.tensors.values())
    y = comp.decode(p)
    assert y.is_cuda and y.shape == x.shape
    assert comp.nbytes() == p.nbytes_per_node()
    if name != "randomk":  # deterministic ones agree with the CPU result
        ref = comp.decode(comp.encode(x, g_cpu))
        assert torch.allclose(y.cpu(), ref, atol=1e-5)
    # CPU generators with CUDA data also work
    comp.encode(x.cuda(), g_cpu)


@pytest.mark.parametrize("magnitude", [False, True])
def test_two_stage_selection_keeps_the_same_entries_as_topk(magnitude: bool) -> None:
    """Issue 32: the CPU's two-stage selection (group maxima, then the kept groups' entries)
    keeps exactly torch.topk's positions for distinct scores — also on a strided view of a
    wider buffer — and the same values when scores tie (integer-valued scores)."""
    from decent8.compression.topk import top_indices
    g = torch.Generator().manual_seed(3)
    for n, c in [(4096, 40), (8192, 81), (16384, 163), (4096, 128)]:
        wide = torch.randn(5, 2 * n + 24, generator=g)
        s = wide.as_strided((5, 2, n), (wide.stride(0), n + 8, 1), 8)      # two slots, 8 entries apart
        ref = torch.topk(s.abs() if magnitude else s, c, dim=2, sorted=False).indices
        got = top_indices(s, c, magnitude=magnitude)
        assert torch.equal(got.sort(2).values, ref.sort(2).values)
        ties = torch.randint(-40, 41, (3, 1, n), generator=g).float()    # many equal scores
        score = ties.abs() if magnitude else ties
        got = top_indices(ties, c, magnitude=magnitude)
        want = torch.topk(score, c, dim=2, sorted=False).values.sort(2).values
        assert torch.equal(score.gather(2, got).sort(2).values, want)
        assert all(len(set(row.tolist())) == c for row in got.reshape(-1, c))   # distinct positions
