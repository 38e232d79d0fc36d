"""Generated models (tests/models/gen_models.py: linear layers, activations incl. RReLU,
dropout variants, residual adds, masks with and without the batch axis, noise injection,
stochastic depth, a draw from the global generator), each run through the product path
(config → ``build`` → ``choose_chunk``) on the loop, vmap chunks of 2 and 4 and node-batched
layers of 4, FP32 and 8 bits, 1 and 3 steps. Every case is one of: equal to the loop within
the bound, refused in one line (``choose_chunk``'s ConfigError), or warned in one line (a draw
decent8 cannot give a node) — never silently different."""
from __future__ import annotations

import copy
import random
import warnings
from collections import Counter

import pytest
import torch

from decent8 import streams
from decent8.config import load_config
from decent8.data.dataset import take
from decent8.errors import ConfigError
from decent8.models.execution import choose_chunk
from decent8.train.build import build
from decent8.train.engine import Engine

from . import gen_models

NODES = 4
SPECS = ("2", "4", "layers:4")
#: relative bound against the loop: (precision, steps) → bound. FP32: float order only. 8 bits:
#: one step draws the loop's numbers (1e-5); over 3 steps the kernels' float order may flip a
#: rounding decision, which grows (the 20-step bound of tests/train/test_equivalence.py)
BOUNDS = {("fp32", 1): 1e-5, ("fp32", 3): 1e-5, ("int8", 1): 1e-5, ("int8", 3): 5e-2}
#: 8 bits on node-batched layers, one step: bmm against mm sums in another float order, and now
#: and then (3 of 120 cases of the slow sample, depending on the process's allocations) that
#: flips one stochastic rounding decision by a quantum (1/255 of a range): measured 6.5e-5 – 9.9e-5
INT8_LAYERS_1_STEP = 5e-4
WARNING = "cannot assign to a node's stream"

pytestmark = pytest.mark.usefixtures("one_thread")  # (conftest.py)


def _batch(c, s: int):
    spe = c.sampler.steps_per_epoch
    idx = c.sampler.epoch_indices(s // spe)[:, s % spe]
    return take(c.dataset.x_train, idx), c.dataset.y_train[idx]


def _run(c, spec: str) -> tuple[list[torch.Tensor] | None, str, bool]:
    """``(parameters after steps 1 and 3, refusal, warned)`` of ``sim.chunk=spec``."""
    sm = copy.copy(c.model)
    sm.init_buffers(NODES)
    streams._warned.clear()  # the warning is given once per process: once per run here
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            choose_chunk(sm, c.x0.unsqueeze(0).repeat(NODES, 1), *_batch(c, 0), spec, use_cache=False)
        except ConfigError as e:
            text = str(e)
            assert "\n" not in text
            return None, text, False
        engine = Engine(sm, c.algorithm, c.optimizer, c.comm, c.x0)
        out = []
        for s in range(3):
            engine.train_step(*_batch(c, s), 0.05)
            if s in (0, 2):
                out.append(engine.z.clone())
    warned = [str(w.message) for w in caught if WARNING in str(w.message)]
    assert all("\n" not in w for w in warned)
    return out, "", bool(warned)


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).norm() / b.norm()).item()


def check(seed: int, count: int) -> Counter:
    """Generate ``count`` models from ``seed`` and classify every (model, precision, strategy)."""
    rng = random.Random(seed)
    tally: Counter = Counter()
    silent: list[str] = []
    for _ in range(count):
        ops = gen_models.generate(rng)
        tally["models"] += 1
        for precision in ("fp32", "int8"):
            gen_models.CURRENT = ops
            c = build(load_config(None, [f"nodes={NODES}", "progress=false", "data.batch_size=8",
                                         "optimizer.warmup_epochs=0", "model=tests.models.gen_models:make",
                                         f"precision={precision}", "algorithm=dpsgd", "compression=identity"]))
            ref, refusal, ref_warned = _run(c, "1")
            assert ref is not None, refusal  # the loop runs every model
            for spec in SPECS:
                got, refusal, warned = _run(c, spec)
                tally["cases"] += 1
                if got is None:
                    tally["refused"] += 1
                elif warned or ref_warned:
                    tally["warned"] += 1
                else:
                    rels = [_rel(g, r) for g, r in zip(got, ref)]
                    bounds = [BOUNDS[(precision, steps)] for steps in (1, 3)]
                    if precision == "int8" and spec.startswith("layers"):
                        bounds[0] = INT8_LAYERS_1_STEP
                    if all(r <= b for r, b in zip(rels, bounds)):
                        tally["passed"] += 1
                    else:
                        silent.append(f"{ops} {precision} sim.chunk={spec}: {rels}")
    tally["silent mismatches"] = len(silent)
    print(f"\ngenerated models (seed {seed}): " + ", ".join(f"{k} {v}" for k, v in tally.items()))
    assert not silent, "\n".join(silent)
    return tally


def test_a_fixed_sample_of_generated_models_is_equal_refused_or_warned():
    tally = check(seed=0, count=6)
    assert tally["passed"] > 0 and tally["cases"] == 6 * 2 * len(SPECS)


@pytest.mark.slow  # 60 models × 2 precisions × 4 runs
def test_many_generated_models_are_equal_refused_or_warned():
    tally = check(seed=1, count=60)
    assert tally["passed"] > 0 and tally["refused"] > 0 and tally["warned"] > 0
