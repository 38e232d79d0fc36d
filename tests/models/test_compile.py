"""``sim.compile``: each chunk's forward + backward through torch.compile (issue 14's compiled step)."""
from __future__ import annotations

import pytest
import torch

from decent8.models.strategies import strategy_for
from decent8.config import load_config
from decent8.errors import ConfigError
from decent8.models.execution import AUTO_COMPILE_MIN_STEPS, parse_compile, parse_execution, resolve_compile
from decent8.quant.quantizer import dither_codes, dither_like
from decent8.train.build import build
from decent8.train.engine import Engine


def _engine(*overrides: str) -> tuple[Engine, list]:
    """The run's parts, its model set to the run's ``sim.chunk`` (default 1: the loop, each
    node one compiled call), and one epoch of batches."""
    cfg = load_config(None, ["model=mlp", "nodes=8", "algorithm=choco", "sim.chunk=1", "progress=false", *overrides])
    c = build(cfg)
    c.model.use(strategy_for(*parse_execution(cfg.sim.chunk)))
    idx = c.sampler.epoch_indices(0)
    batches = [(c.dataset.x_train[idx[:, s]], c.dataset.y_train[idx[:, s]]) for s in range(idx.shape[1])]
    return Engine(c.model, c.algorithm, c.optimizer, c.comm, c.x0), batches


def _train(engine: Engine, batches: list, steps: int, seed: int = 1) -> torch.Tensor:
    torch.manual_seed(seed)  # the global generator: dropout and the 8-bit dither
    for s in range(steps):
        engine.train_step(*batches[s % len(batches)], 0.05)
    return engine.z.clone()


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).norm() / b.norm()).item()


@pytest.mark.slow   # a cold torch.compile (> 50 s on 2 loaded cores)
def test_compiled_and_eager_steps_give_the_same_parameters(one_thread):
    # FP32, 8 nodes, Choco-SGD: 100 steps (the parity bar: 1e-5 relative). Exact
    # gossip (identity): top-k's selection is discontinuous, and a rounding-level difference
    # that flips one selected entry jumps the two runs apart (4e-5 after 100 steps on an AMD
    # EPYC, while 20 steps agree to 6e-8); the compiled part is the model, not the compressor.
    eager, batches = _engine("compression=identity")
    compiled, _ = _engine("compression=identity")
    compiled.model.compile()
    assert compiled.model.compiled
    ref = _train(eager, batches, 100)
    got = _train(compiled, batches, 100)
    assert _rel(got, ref) <= 1e-5
    # 8-bit with stochastic rounding: the compiled quantizer draws each node's stream as eager
    # mode does, so a step agrees to the few rounding decisions that the compiled kernels'
    # float order flips (2.1e-6 measured; each flip grows over the following steps)
    eager, batches = _engine("precision=int8")
    compiled, _ = _engine("precision=int8")
    compiled.model.compile()
    ref = _train(eager, batches, 1)
    got = _train(compiled, batches, 1)
    assert _rel(got, ref) <= 2e-5
    other, _ = _engine("precision=int8")  # other draws land farther apart (8e-4): the bound means something
    other.model.seed = 1
    assert _rel(_train(other, batches, 1), ref) > 1e-4


def test_dither_operator_draws_what_the_eager_quantizer_draws():
    y = torch.empty(3, 5, 7).permute(2, 0, 1)  # a permuted view: codes follow its memory order
    torch.manual_seed(3)
    a = dither_like(y).float()
    torch.manual_seed(3)
    b = dither_codes(y)
    assert b.dtype == y.dtype and b.shape == y.shape and torch.equal(a, b)
    assert b.min() >= -2 ** 15 and b.max() < 2 ** 15


def test_auto_on_launch_ranks_compiles_long_8bit_runs_only():  # (the simulator measures: test_compile_choice.py)
    n = AUTO_COMPILE_MIN_STEPS
    assert resolve_compile("auto", "int8", n)[0] is True
    assert resolve_compile("auto", "int8", n - 1)[0] is False
    assert resolve_compile("auto", "fp32", 10 * n)[0] is False
    assert resolve_compile(True, "fp32", 1) == (True, "sim.compile=true")
    assert resolve_compile("false", "int8", 10 * n)[0] is False
    for bad in ("maybe", "1", ""):
        with pytest.raises(ConfigError, match="sim.compile: must be one of auto, true, false"):
            parse_compile(bad)


def _failing_compile(exc: Exception):
    def fake_compile(fn, **kw):
        def broken(named, *args):
            for v in named.values():  # a failure after the graph ran: buffers already written
                if not v.requires_grad:
                    v.add_(1.0)
            torch.rand(3)
            raise exc
        return broken
    return fake_compile


def test_auto_falls_back_to_eager_with_buffers_and_rng_restored(monkeypatch):
    eager, batches = _engine("precision=int8", "model=cnn")  # 8-bit ranges are per-node buffers
    ref = _train(eager, batches, 3)
    ref_buffers = eager.model.buffers.clone()
    monkeypatch.setattr(torch, "compile", _failing_compile(RuntimeError("no C++ compiler\nmore")))
    fallback, _ = _engine("precision=int8", "model=cnn")
    fallback.model.compile(strict=False)
    with pytest.warns(UserWarning, match="sim.compile=auto: torch.compile failed"):
        got = _train(fallback, batches, 3)
    assert not fallback.model.compiled
    assert fallback.model.compile_failure == "RuntimeError: no C++ compiler"
    assert torch.equal(got, ref) and torch.equal(fallback.model.buffers, ref_buffers)


def test_true_reports_a_model_it_cannot_compile_in_one_line(monkeypatch):
    import torch._dynamo.exc as dynamo_exc

    monkeypatch.setattr(torch, "compile", _failing_compile(dynamo_exc.TorchRuntimeError("bad op\ntrace")))
    engine, batches = _engine()
    engine.model.compile(strict=True)
    with pytest.raises(ConfigError, match=r"^sim.compile: torch.compile cannot compile this model \(bad op\); "
                                          r"use sim.compile=false$"):
        engine.train_step(*batches[0], 0.05)


@pytest.mark.slow   # a cold torch.compile (> 50 s on 2 loaded cores)
def test_the_run_records_what_it_compiled(tmp_path):
    import json

    from decent8.cli.main import main

    rc = main(["train", "model=mlp", "epochs=1", "sim.chunk=8", "sim.compile=true", f"out_dir={tmp_path}", "name=r",
               "--quiet"])
    assert rc == 0
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    execution = json.loads((tmp_path / "r" / "execution.json").read_text())
    assert summary["sim_compile"] is True and summary["sim_compile_failure"] == ""
    assert execution["compile"] is True and execution["compile_reason"] == "sim.compile=true"
    assert "compile: 'true'" in (tmp_path / "r" / "config.yaml").read_text()
    rc = main(["train", "model=mlp", "precision=int8", "epochs=1", "sim.chunk=8", f"out_dir={tmp_path}", "name=a",
               "--quiet"])
    assert rc == 0
    execution = json.loads((tmp_path / "a" / "execution.json").read_text())
    assert execution["compile"] is False and "too short to repay compiling" in execution["compile_reason"]
    # compiled with sim.chunk=auto: the loop (compiled vmap chunks measured slower, docs/execution.md)
    rc = main(["train", "model=mlp", "precision=int8", "epochs=1", "sim.compile=true", f"out_dir={tmp_path}",
               "name=c", "--quiet"])
    assert rc == 0
    execution = json.loads((tmp_path / "c" / "execution.json").read_text())
    assert execution["compile"] is True and execution["chunk"] == 1 and "auto → 1" in execution["compile_reason"]
    assert "chunk: '1'" in (tmp_path / "c" / "config.yaml").read_text()


@pytest.mark.slow   # a cold torch.compile (> 50 s on 2 loaded cores)
def test_auto_snapshots_only_until_a_whole_step_has_run_compiled(monkeypatch):
    engine, batches = _engine("sim.chunk=3")  # chunks of 3, 3 and 2 nodes: two compiled shapes
    engine.model.compile(strict=False)
    calls = []
    real = engine.model._snapshot
    monkeypatch.setattr(engine.model, "_snapshot", lambda named: calls.append(1) or real(named))
    _train(engine, batches, 3)
    assert engine.model.compiled and engine.model.compile_failure == ""
    assert len(calls) == 3  # the three chunks of the first step, none after it


@pytest.mark.skipif(not hasattr(dither_codes, "register_vmap"), reason="torch < 2.4: no dither operator")
def test_dither_operator_has_a_vmap_rule(capfd):
    """A compiled ``sim.chunk`` > 1 calls the dither operator under vmap: one draw for the
    batched tensor, a different one per node, and no per-node fallback loop (torch warns
    "performance drop" on stderr at every call when the rule is missing)."""
    y = torch.zeros(4, 3, 257)
    out = torch.func.vmap(dither_codes, randomness="different")(y)
    same = torch.func.vmap(dither_codes, randomness="same")(y)
    assert out.shape == y.shape and same.shape == y.shape
    assert torch.equal(out, out.round()) and out.min() >= -(1 << 15) and out.max() < (1 << 15)
    assert (out[0] != out[1]).float().mean() > 0.99          # nodes draw their own codes
    assert torch.equal(same[0], same[3]) and (same[0] != 0).any()
    assert "performance drop" not in capfd.readouterr().err


@pytest.mark.slow   # a cold torch.compile (> 50 s on 2 loaded cores)
def test_compiled_8bit_chunks_under_vmap_train_like_eager(one_thread):
    """sim.chunk=8 with sim.compile: the quantizers' straight-through and gradient-quantizing
    backward survive tracing under vmap (torch 2.13 drops an autograd function's backward
    there: the loss had no grad_fn and training stopped)."""
    eager, batches = _engine("precision=int8", "sim.chunk=8")
    compiled, _ = _engine("precision=int8", "sim.chunk=8")
    compiled.model.compile()
    ref = _train(eager, batches, 1)  # (the bound of the loop's parity test above)
    assert _rel(_train(compiled, batches, 1), ref) <= 2e-5


@pytest.mark.slow   # a cold torch.compile (> 50 s on 2 loaded cores)
def test_compiled_quantizers_under_vmap_match_eager():
    """Forward values and gradients of the three quantizers, vmapped over 4 nodes whose
    scales differ 1000-fold, compiled and eager: the same draws, so the same numbers, and
    each node's gradient quantized with its own range (error ≤ one step of 2·x's range / 255)."""
    from decent8.quant.quantizer import quantize_grad, quantize_ste, quantize_tensor

    def one(w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        q = quantize_ste(w, w.min(), w.max(), 8, True) + quantize_tensor(w, 8, False)
        return (quantize_grad(q, 8, True) * x).sum()

    def f(w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.func.vmap(one, randomness="different")(w, x)

    w = torch.randn(4, 100, requires_grad=True)
    x = torch.randn(4, 100)
    x[0] *= 1000
    got = {}
    for name, fn in (("eager", f), ("compiled", torch.compile(f, dynamic=False))):
        torch.manual_seed(0)
        out = fn(w, x)
        got[name] = (out.detach(), torch.autograd.grad(out.sum(), w)[0])
    # (node 0's output sums 100 products of ~1e3: the compiled sum's order moves it by ~5e-3)
    torch.testing.assert_close(got["compiled"], got["eager"], rtol=1e-4, atol=1e-5)
    g = got["compiled"][1]
    step = ((2 * x).amax(1) - (2 * x).amin(1)) / 255
    assert ((g - 2 * x).abs().amax(1) <= step * 1.001).all()
    assert ((g - 2 * x).abs().amax(1)[1:] < 0.01 * step[0]).all()   # not node 0's range
