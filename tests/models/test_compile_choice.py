"""``sim.compile=auto`` by measurement (decent8.models.compile_choice): the decision
``(T_e − T_c)·S > C`` with stubbed clocks, the cache, the fallback of a machine whose
compiler fails, and one real run that decides."""
from __future__ import annotations

import json

import pytest
import torch

from decent8.config import load_config
from decent8.models import compile_choice
from decent8.models.compile_choice import CompileTiming, choose_compile, compile_pays
from decent8.models.strategies import strategy_for
from decent8.train.build import build
from decent8.train.loop import first_batch


def test_compile_pays_when_the_saving_over_the_run_exceeds_the_compile_time():
    t = CompileTiming(eager_s=0.30, compiled_s=0.20, compile_s=100.0)  # saves 0.1 s a step
    assert compile_pays(t, 1001)[0] is True and compile_pays(t, 999)[0] is False
    go, reason = compile_pays(t, 2000)
    assert go and reason == ("auto: compiled (compiled step 200.0 ms vs eager 300.0 ms, compiling 100 s: "
                             "saves 200 s over 2000 steps)")
    slower = CompileTiming(eager_s=0.20, compiled_s=0.25, compile_s=1.0)  # compiled is slower: never
    assert compile_pays(slower, 10 ** 9)[0] is False


class _Stub:
    """A clock and a wall clock that advance by a scripted step time on every
    ``loss_and_grad`` call: ``eager_s`` eagerly, ``compiled_s`` compiled, plus ``compile_s``
    (wall only) on the first compiled call."""

    def __init__(self, model, eager_s: float, compiled_s: float, compile_s: float) -> None:
        self.t = self.w = 0.0
        self.calls = {"eager": 0, "compiled": 0}
        real = model.loss_and_grad

        def timed(*args, **kwargs):
            out = real(*args, **kwargs)
            kind = "compiled" if model.compiled else "eager"
            step = compiled_s if model.compiled else eager_s
            if model.compiled and self.calls["compiled"] == 0:
                self.w += compile_s
            self.calls[kind] += 1
            self.t += step
            self.w += step
            return out

        model.loss_and_grad = timed

    def clock(self) -> float:
        return self.t

    def wall(self) -> float:
        return self.w


@pytest.fixture
def run_parts(monkeypatch, tmp_path):
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: fn)  # "compiled" = the eager function: fast
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    c = build(load_config(None, ["model=mlp", "nodes=4", "sim.chunk=1", "progress=false", "precision=int8"]))
    c.model.use(strategy_for("vmap", 1))
    from decent8.data.augment import make_batch_transform
    augment = make_batch_transform(c.dataset, c.cfg.data.augment, c.cfg.seed, c.comm.local_nodes, c.device)
    return c, first_batch(c, augment), tmp_path


def test_auto_compiles_when_the_measured_saving_repays_the_compile(run_parts):
    c, batch, _ = run_parts
    stub = _Stub(c.model, eager_s=0.3, compiled_s=0.2, compile_s=100.0)
    buffers = c.model.buffers_state().clone()
    go, reason = choose_compile(c.model, *batch, 5000, clock=stub.clock, wall=stub.wall)
    assert go and c.model.compiled and reason.startswith("auto: compiled (compiled step 200.0 ms vs eager 300.0 ms, "
                                                         "compiling 100 s")
    assert stub.calls["eager"] >= 3 and stub.calls["compiled"] >= 3  # both timed
    assert torch.equal(c.model.buffers_state(), buffers)  # the timing steps leave no trace


def test_auto_stays_eager_when_the_run_is_too_short_to_repay(run_parts):
    c, batch, _ = run_parts
    stub = _Stub(c.model, eager_s=0.3, compiled_s=0.2, compile_s=100.0)
    go, reason = choose_compile(c.model, *batch, 900, clock=stub.clock, wall=stub.wall)  # saves 90 s < 100 s
    assert not go and not c.model.compiled and not c.model.strategy.compiled
    assert reason.startswith("auto: eager (") and "90 s saved over 900 steps would not repay it" in reason


def test_auto_does_not_compile_to_find_out_on_a_short_run(run_parts):
    c, batch, _ = run_parts
    stub = _Stub(c.model, eager_s=0.01, compiled_s=0.001, compile_s=1.0)
    go, reason = choose_compile(c.model, *batch, 100, clock=stub.clock, wall=stub.wall)  # 1 s in all < 60 s
    assert not go and stub.calls["compiled"] == 0 and "too short to repay compiling" in reason


def test_auto_reuses_this_machines_timings_for_the_same_run_shape(run_parts):
    c, batch, cache = run_parts
    stub = _Stub(c.model, eager_s=0.3, compiled_s=0.2, compile_s=100.0)
    assert choose_compile(c.model, *batch, 5000, clock=stub.clock, wall=stub.wall)[0]
    table = json.loads((cache / "decent8" / "execution.json").read_text())
    (entry,) = [v for k, v in table.items() if k.startswith("compile")]
    assert entry == {"eager_s": pytest.approx(0.3), "compiled_s": pytest.approx(0.2), "compile_s": pytest.approx(100.0)}
    c.model.decompile()
    calls = dict(stub.calls)
    go, reason = choose_compile(c.model, *batch, 500, clock=stub.clock, wall=stub.wall)  # too short now: eager
    assert not go and stub.calls == calls and reason.endswith("(this machine's timings, cached)")


def test_a_machine_whose_compiler_fails_runs_eagerly_in_one_line(run_parts, monkeypatch):
    c, batch, _ = run_parts

    def broken(fn, **kw):
        def call(*args, **kwargs):
            raise RuntimeError("no C++ compiler\ndetails")
        return call

    monkeypatch.setattr(torch, "compile", broken)
    stub = _Stub(c.model, eager_s=0.3, compiled_s=0.2, compile_s=100.0)
    with pytest.warns(UserWarning, match="sim.compile=auto: torch.compile failed"):
        go, reason = choose_compile(c.model, *batch, 5000, clock=stub.clock, wall=stub.wall)
    assert not go and not c.model.compiled
    assert reason == "auto: eager (torch.compile failed on this machine: RuntimeError: no C++ compiler)"


@pytest.mark.slow  # ~30 s on the loaded 2-core machine: the run writes its plots (the steps take ~2 s)
def test_a_tiny_real_run_with_auto_records_its_choice_and_says_nothing(tmp_path, monkeypatch, capsys):
    from decent8.cli.main import main

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    rc = main(["train", "model=mlp", "model.width=8", "nodes=2", "epochs=1", "data.subset=200", "precision=int8",
               "sim.compile=auto", "checkpoint=false", "progress=false", f"out_dir={tmp_path}", "name=r"])
    assert rc == 0
    execution = json.loads((tmp_path / "r" / "execution.json").read_text())
    assert execution["compile"] is False and "too short to repay compiling" in execution["compile_reason"]
    assert "compile: 'false'" in (tmp_path / "r" / "config.yaml").read_text()
    assert "sim.compile" not in capsys.readouterr().err  # too short to time: nothing measured, nothing said
    assert compile_choice.MIN_EAGER_RUN_S > 0
