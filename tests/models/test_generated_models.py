"""Generated models (tests/models/gen_models.py: linear and conv layers, BatchNorm / GroupNorm /
LayerNorm / EvoNorm, activations incl. RReLU, dropout variants, residual adds, masks with and
without the batch axis, noise injection out of place and in place, Gumbel-softmax, stochastic
depth, a draw from the global generator), each run through the product path (config → ``build``
→ ``choose_chunk``; compiled: ``resolve_execution`` with ``sim.compile=true``) on the loop, vmap
chunks of 2 and 4, node-batched layers of 4 and one compiled case (``sim.chunk=auto``, which a
compiled run resolves to the loop), FP32 and 8 bits, 1 and 20 steps. Every case is one of:
equal to the eager loop within the bound, refused in one line (a ConfigError), or warned in one
line (a draw decent8 cannot give a node) — never silently different.

Some generated models are chaotic at 8 bits: the loop itself, started from the initial model
scaled by 1 + 1e-7 (a float-rounding-sized change), flips a stochastic-rounding decision within a
step or two and lands 5e-5 (1 step) to 5 (20 steps, relative) away. Such a model cannot tell a
path's float order from a wrong draw, so each case's bound is the larger of the fixed bound and
:data:`SENSITIVITY_FACTOR` × that distance (the tally counts the cases that needed it).

The compiled case costs a cold ``torch.compile`` per model and precision (10–30 s on one core):
the CI sample compiles one model at 8 bits, the slow sample its first :data:`SLOW_COMPILED` at both
precisions."""
from __future__ import annotations

import copy
import dataclasses
import random
import warnings
from collections import Counter

import pytest
import torch

from decent8 import streams
from decent8.config import load_config
from decent8.data.augment import make_batch_transform
from decent8.data.dataset import take
from decent8.errors import ConfigError
from decent8.models.execution import choose_chunk
from decent8.train.build import build
from decent8.train.engine import Engine
from decent8.train.loop import resolve_execution

from . import gen_models

NODES = 4
SPECS = ("2", "4", "layers:4")
COMPILED = "compiled"
STEPS = (1, 20)
#: relative bound against the eager loop: (precision, steps) → bound. FP32, one step: float order
#: only (1e-5). FP32, 20 steps: tests/train/test_equivalence.py's 1e-5 holds for its models, but
#: BatchNorm / EvoNorm over 8 samples amplify the float-order differences: measured 1.8e-5
#: (vmap 2 and 4, uniform_noise + dropout + batchnorm + alpha_dropout + evonorm), so 1e-4.
#: 8 bits: one step draws the loop's numbers (1e-5; a batched path may flip one rounding decision:
#: INT8_1_STEP_FLIP); over 20 steps the kernels' float order flips
#: rounding decisions, which grow (5e-2; tests/train/test_equivalence.py measures them by CPU)
BOUNDS = {("fp32", 1): 1e-5, ("fp32", 20): 1e-4, ("int8", 1): 1e-5, ("int8", 20): 5e-2}
#: 8 bits, one step, vmap chunks and node-batched layers: the batched kernels sum in another
#: float order, and now and then (depending on the process's allocations) that flips one
#: stochastic rounding decision by a quantum (1/255 of a range): measured 6.5e-5 – 9.9e-5 on
#: node-batched layers (3 of 120 cases of a slow sample) and 5.1e-5 on vmap chunks (2 of 120)
INT8_1_STEP_FLIP = 5e-4
#: compiled against the eager loop, 8 bits: one step, the compiled kernels' float order flips a
#: few rounding decisions (tests/models/test_compile.py's bound, 2e-5; another stream seed lands
#: 8e-4 away). 20 steps: with the reference (AVX2) eager kernels against inductor's, a flip
#: appears from step 2 (2.9e-4) and BatchNorm over 8 samples amplifies it: measured 0.37 after
#: 20 steps (0.21 for relu + batchnorm alone), while with the machine's native eager kernels the
#: same model stays within 8e-7 — the kernels' order, not the draws. So only a coarse bound.
INT8_COMPILED = {1: 2e-5, 20: 5e-1}
#: models of the slow sample that also run compiled, at both precisions (a cold compile each);
#: the CI sample compiles one model at 8 bits
SLOW_COMPILED = 6
#: the loop's own sensitivity: its distance from the loop started at x0 · (1 + SENSITIVITY_EPS);
#: a case is also bounded by SENSITIVITY_FACTOR × that distance. Measured on the seed-1 sample's
#: three chaotic 8-bit models: vmap 0.9–1.0× the perturbed loop's distance at 1 step and 0.1–0.8×
#: at 20 steps (7e-2 – 4e-1), where other draws land about 1e-3 away after one step
#: (tests/train/test_equivalence.py). At most SENSITIVE_SHARE of the passed cases may need it.
SENSITIVITY_EPS = 1e-7
SENSITIVITY_FACTOR = 10.0
SENSITIVE_SHARE = 0.1
WARNING = "cannot assign to a node's stream"

pytestmark = pytest.mark.usefixtures("one_thread")  # (conftest.py)


@pytest.fixture
def own_inductor_cache(tmp_path, monkeypatch):
    """A fresh inductor cache: on a machine whose shared cache (/tmp/torchinductor_$USER) other
    processes wrote, a loaded kernel failed ("returned a result with an exception set") or gave
    NaN where a fresh compile of the same graph did not."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))


def _batch(c, s: int):
    spe = c.sampler.steps_per_epoch
    idx = c.sampler.epoch_indices(s // spe)[:, s % spe]
    return take(c.dataset.x_train, idx), c.dataset.y_train[idx]


def _choose(c, sm, spec: str) -> None:
    """``sim.chunk=spec`` as ``decent8 train`` chooses it; ``compiled``: ``sim.chunk=auto`` with
    ``sim.compile=true`` through ``resolve_execution`` (which compiles the loop)."""
    if spec != COMPILED:
        choose_chunk(sm, c.x0.unsqueeze(0).repeat(NODES, 1), *_batch(c, 0), spec, use_cache=False)
        return
    from decent8.config import evolve

    # dynamo compiles one code object (StackedModel._chunk_loss) at most 8 times per process
    # (its cache_size_limit), then runs it eagerly without a word: each compiled case from scratch
    torch._dynamo.reset()
    cc = dataclasses.replace(c, model=sm, cfg=evolve(c.cfg, {"sim.compile": "true", "sim.chunk": "auto"}))
    augment = make_batch_transform(cc.dataset, cc.cfg.data.augment, cc.cfg.seed, cc.comm.local_nodes, cc.device)
    choice = resolve_execution(cc, augment)
    assert sm.compiled and choice.chunk == 1, choice


def _run(c, spec: str, x0_scale: float = 1.0) -> tuple[list[torch.Tensor] | None, str, bool]:
    """``(parameters after each of STEPS, refusal, warned)`` of ``sim.chunk=spec``, starting from
    ``x0_scale`` × the initial model."""
    sm = copy.copy(c.model)
    sm.init_buffers(NODES)
    streams._warned.clear()  # the warning is given once per process: once per run here
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            _choose(c, sm, spec)
            engine = Engine(sm, c.algorithm, c.optimizer, c.comm, c.x0 * x0_scale)
            out = []
            for s in range(max(STEPS)):
                engine.train_step(*_batch(c, s), 0.05)
                if s + 1 in STEPS:
                    out.append(engine.z.clone())
        except ConfigError as e:
            text = str(e)
            assert "\n" not in text
            return None, text, False
    warned = [str(w.message) for w in caught if WARNING in str(w.message)]
    assert all("\n" not in w for w in warned)
    return out, "", bool(warned)


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).norm() / b.norm()).item()


def _bounds(precision: str, spec: str) -> list[float]:
    bounds = [BOUNDS[(precision, steps)] for steps in STEPS]
    if precision == "int8" and spec != COMPILED:
        bounds[0] = INT8_1_STEP_FLIP
    if precision == "int8" and spec == COMPILED:
        bounds = [INT8_COMPILED[steps] for steps in STEPS]
    return bounds


def check(seed: int, count: int, compiled: tuple[int, ...], compiled_precisions: tuple[str, ...] = ("fp32", "int8")) -> Counter:
    """Generate ``count`` models from ``seed`` and classify every (model, precision, strategy);
    the models numbered ``compiled`` also run compiled at ``compiled_precisions``."""
    rng = random.Random(seed)
    tally: Counter = Counter()
    silent: list[str] = []
    worst: dict[tuple[str, str, int], float] = {}
    for n in range(count):
        ops = gen_models.generate(rng)
        tally["models"] += 1
        for precision in ("fp32", "int8"):
            gen_models.CURRENT = ops
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", "the model has BatchNorm running statistics")
                c = build(load_config(None, [f"nodes={NODES}", "progress=false", "data.batch_size=8",
                                             "optimizer.warmup_epochs=0", "model=tests.models.gen_models:make",
                                             f"precision={precision}", "algorithm=dpsgd", "compression=identity"]))
            ref, refusal, ref_warned = _run(c, "1")
            assert ref is not None, refusal  # the loop runs every model
            nudged = _run(c, "1", x0_scale=1 + SENSITIVITY_EPS)[0]
            sensitivity = [SENSITIVITY_FACTOR * _rel(g, r) for g, r in zip(nudged, ref)]
            for spec in SPECS + ((COMPILED,) if n in compiled and precision in compiled_precisions else ()):
                got, refusal, warned = _run(c, spec)
                tally["cases"] += 1
                tally[f"{spec} cases"] += 1
                if got is None:
                    tally["refused"] += 1
                elif warned or ref_warned:
                    tally["warned"] += 1
                else:
                    rels = [_rel(g, r) for g, r in zip(got, ref)]
                    kind = "layers" if spec.startswith("layers") else spec if spec == COMPILED else "vmap"
                    for steps, r in zip(STEPS, rels):
                        worst[(precision, kind, steps)] = max(worst.get((precision, kind, steps), 0.0), r)
                    fixed = _bounds(precision, spec)
                    if all(r <= max(b, e) for r, b, e in zip(rels, fixed, sensitivity)):
                        tally["passed"] += 1
                        tally[f"{spec} passed"] += 1
                        if not all(r <= b for r, b in zip(rels, fixed)):
                            tally["passed within the loop's sensitivity"] += 1
                    else:
                        silent.append(f"{ops} {precision} sim.chunk={spec}: {rels} "
                                      f"(bounds {fixed}, {SENSITIVITY_FACTOR:g} × the loop's sensitivity {sensitivity})")
    tally["silent mismatches"] = len(silent)
    assert tally["passed within the loop's sensitivity"] <= SENSITIVE_SHARE * tally["passed"], tally
    print(f"\ngenerated models (seed {seed}): " + ", ".join(f"{k} {v}" for k, v in tally.items()))
    print("largest passed difference: " + ", ".join(f"{p} {k} {s} steps {v:.1e}" for (p, k, s), v in sorted(worst.items())))
    assert not silent, "\n".join(silent)
    return tally


def test_a_fixed_sample_of_generated_models_is_equal_refused_or_warned(own_inductor_cache):
    # seed 84: the 6 models hold 21 of the grammar's 27 ops; model 1 (in-place normal_ and
    # bernoulli_, F.dropout, rand_like: graph breaks and draws inside the compiled graph) compiled
    tally = check(seed=84, count=6, compiled=(1,), compiled_precisions=("int8",))
    assert tally["passed"] > 0 and tally["cases"] == 6 * 2 * len(SPECS) + 1
    assert tally[f"{COMPILED} cases"] == 1


@pytest.mark.slow  # 60 models × 2 precisions × 4 runs of 20 steps, and SLOW_COMPILED models compiled
def test_many_generated_models_are_equal_refused_or_warned(own_inductor_cache):
    tally = check(seed=1, count=60, compiled=tuple(range(SLOW_COMPILED)))
    assert tally["passed"] > 0 and tally["refused"] > 0 and tally["warned"] > 0
    assert tally[f"{COMPILED} passed"] > 0
