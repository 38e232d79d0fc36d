"""The node streams' dither codes from the C loop (`decent8.dither_kernel`) are the codes
``torch.Generator`` draws, bit for bit: alone (seeds below and above 2^32, lengths inside a
word and across the generator's 624-output blocks), through `decent8.streams`, and in whole
8-bit training steps on the loop, vmap chunks and node-batched layers, with a dropout model."""
from __future__ import annotations

import random
import shutil

import pytest
import torch

from decent8 import dither_kernel, streams
from decent8.native import CLibrary
from tests.quant.test_fused import SPECS, _steps

pytestmark = [pytest.mark.usefixtures("one_thread"),
              pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                                 reason="the C loop needs a C compiler")]


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 623, 1247, 1248, 1249, 2496, 4099, 65536])
def test_the_c_loop_draws_torch_generators_codes(n):
    assert dither_kernel.LIBRARY.available(), dither_kernel.LIBRARY.why_unavailable()
    rng = random.Random(n)
    seeds = [0, (1 << 32) - 1, 1 << 32, (1 << 63) - 1] + [rng.getrandbits(63) for _ in range(4)]
    got = dither_kernel.dither_rows(seeds, n, torch.device("cpu"))
    want = dither_kernel.torch_rows(seeds, n)
    assert got.shape == want.shape == (8, n) and got.stride() == want.stride()
    assert torch.equal(got, want)


def test_the_streams_dither_rows_are_the_same_with_and_without_the_c_loop(monkeypatch):
    keys = streams.node_keys(3, range(5), 11).tolist()
    fast = streams._dither_rows(keys, 2, 3001, torch.device("cpu"))
    lib = CLibrary("dither_rows", "", {}, lambda so: None)
    lib.reset(None, "no C compiler")
    monkeypatch.setattr(dither_kernel, "LIBRARY", lib)
    slow = streams._dither_rows(keys, 2, 3001, torch.device("cpu"))
    assert torch.equal(fast, slow) and fast.stride() == slow.stride()


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("model", ["mlp", "tests.equivalence_models:make_plain_drop",
                                   "tests.equivalence_models:make_two_conv_drop"])
def test_8bit_steps_are_bitwise_the_same_with_and_without_the_c_dither(model, spec, monkeypatch):
    torch.manual_seed(0)
    fast = _steps(model, spec, 2)
    lib = CLibrary("dither_rows", "", {}, lambda so: None)
    lib.reset(None, "no C compiler")
    monkeypatch.setattr(dither_kernel, "LIBRARY", lib)
    torch.manual_seed(0)
    slow = _steps(model, spec, 2)
    assert torch.equal(fast, slow)


def test_a_library_that_draws_other_codes_is_rejected():
    """The load-time probe: a loop that is off by one output (as a changed PyTorch generator
    would be) is not used."""
    src = dither_kernel._SOURCE.replace("s[0] = (uint32_t)(seeds[j] & 0xffffffffu);",
                                        "s[0] = (uint32_t)(seeds[j] & 0xffffffffu) ^ 1u;")
    assert src != dither_kernel._SOURCE
    lib = CLibrary("dither_rows_wrong", src, dither_kernel.LIBRARY.functions, dither_kernel.LIBRARY.probe)
    assert not lib.available()
    assert "does not draw what torch.Generator draws" in lib.why_unavailable()
