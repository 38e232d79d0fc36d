"""``sim.compile=auto``: compile each chunk's loss when it pays, by measurement.

At the start of a simulator run the eager step (the ``sim.chunk`` strategy chosen) is
timed, then the model is compiled and the compiled step timed; with ``S`` steps to run,
``T_e`` / ``T_c`` the eager / compiled seconds per step and ``C`` the seconds the first
compiled call took beyond a step (the compilation, wall time: the compiler works in
worker processes)::

    compile  ⇔  (T_e − T_c) · S > C

Steps are timed with :func:`~.execution.step_clock` (process CPU time on a CPU running one
thread). The timings are cached per machine and run shape (the key of ``sim.chunk=auto``,
:func:`~.execution.decision_key`, in the same file), so a later run of that shape decides
from them without compiling to find out (``S`` is that run's). A run whose eager steps
take under :data:`MIN_EAGER_RUN_S` in all is not compiled (nothing to time: no compile
repays itself there). A machine where compiling fails runs eagerly, with one line.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import torch

from .execution import _cache_entry, _restore, _sync, decision_key, step_clock, store_in_cache

#: a run whose eager steps take less than this in all is not compiled (not measured)
MIN_EAGER_RUN_S = 60.0
#: how such a run's reason ends (nothing was measured: the run does not print it)
TOO_SHORT = "too short to repay compiling"
#: compiled and eager steps are each timed over at least this many calls (and ~MIN_TIMING_S)
TIMED_STEPS = 2
MIN_TIMING_S = 0.5
MAX_TIMED_STEPS = 20
#: part of the cache key: timings of another way of measuring are not reused
COMPILE_CHOOSER_VERSION = 1


@dataclass(frozen=True)
class CompileTiming:
    """Seconds per step eager and compiled, and the seconds the compilation took."""

    eager_s: float
    compiled_s: float
    compile_s: float


def compile_pays(t: CompileTiming, steps: int) -> tuple[bool, str]:
    """``(T_e − T_c)·S > C`` and the one-line reason."""
    saved = (t.eager_s - t.compiled_s) * steps
    times = (f"compiled step {t.compiled_s * 1e3:.1f} ms vs eager {t.eager_s * 1e3:.1f} ms, "
             f"compiling {t.compile_s:.0f} s")
    if saved > t.compile_s:
        return True, f"auto: compiled ({times}: saves {saved:.0f} s over {steps} steps)"
    return False, f"auto: eager ({times}: {max(saved, 0.0):.0f} s saved over {steps} steps would not repay it)"


def _time_steps(run: Callable[[], Any], clock: Callable[[], float], params: torch.Tensor) -> float:
    """Seconds per call of ``run`` (after one warm-up call)."""
    t0 = clock()
    run()
    _sync(params)
    n = max(TIMED_STEPS, min(MAX_TIMED_STEPS, math.ceil(MIN_TIMING_S / max(clock() - t0, 1e-6))))
    t0 = clock()
    for _ in range(n):
        run()
    _sync(params)
    return (clock() - t0) / n


def _key(model, params: torch.Tensor, x) -> str:
    return f"compile{COMPILE_CHOOSER_VERSION}:{decision_key(model, params, x)}"


def choose_compile(model, params: torch.Tensor, x, y: torch.Tensor, steps: int, compiled_strategy=None,
                   use_cache: bool = True, clock: Callable[[], float] | None = None,
                   wall: Callable[[], float] | None = None) -> tuple[bool, str]:
    """Whether ``model`` (its eager strategy set) trains its ``steps`` steps faster
    compiled, and why in one line. When it does, the model is left compiled (with
    ``compiled_strategy`` when given: the loop that a compiled run uses); otherwise eager.
    Buffers and RNG states are restored."""
    clock = clock or step_clock(params.device)
    import time
    wall = wall or time.perf_counter
    eager_strategy = model.strategy
    key = _key(model, params, x)
    entry = _cache_entry(key) if use_cache else None
    if isinstance(entry, dict) and {"eager_s", "compiled_s", "compile_s"} <= entry.keys():
        t = CompileTiming(float(entry["eager_s"]), float(entry["compiled_s"]), float(entry["compile_s"]))
        go, reason = compile_pays(t, steps)
        if go:
            model.compile(strict=False)
            if compiled_strategy is not None:
                model.use(compiled_strategy)
        return go, reason + " (this machine's timings, cached)"
    buffers = model.buffers_state()
    cpu_rng = torch.get_rng_state()
    cuda_rng = torch.cuda.get_rng_state(params.device) if params.is_cuda else None
    try:
        t0 = clock()
        model.loss_and_grad(params, x, y)  # one step (an upper bound: the first call's overheads)
        _sync(params)
        eager_s = clock() - t0
        if eager_s * steps < MIN_EAGER_RUN_S:
            # no measured number in the reason: execution.json is the same file on a resumed run
            return False, f"auto: eager (the run's eager steps take under {MIN_EAGER_RUN_S:.0f} s in all: {TOO_SHORT})"
        eager_s = _time_steps(lambda: model.loss_and_grad(params, x, y), clock, params)
        model.compile(strict=False)
        if compiled_strategy is not None:
            model.use(compiled_strategy)
        t0 = wall()
        model.loss_and_grad(params, x, y)  # compiles (or falls back to eager, saying why)
        _sync(params)
        first = wall() - t0
        if not model.compiled:
            model.use(eager_strategy)
            return False, f"auto: eager (torch.compile failed on this machine: {model.compile_failure})"
        compiled_s = _time_steps(lambda: model.loss_and_grad(params, x, y), clock, params)
    finally:
        _restore(model, buffers, cpu_rng, cuda_rng, params)
    t = CompileTiming(eager_s, compiled_s, max(first - compiled_s, 0.0))
    if use_cache:
        _store(key, t)
    go, reason = compile_pays(t, steps)
    if not go:
        model.decompile()
        model.use(eager_strategy)
    return go, reason


def _store(key: str, t: CompileTiming) -> None:
    """The timings under ``key`` in the ``sim.chunk=auto`` cache file."""
    store_in_cache(key, {"eager_s": t.eager_s, "compiled_s": t.compiled_s, "compile_s": t.compile_s})


__all__ = ["CompileTiming", "compile_pays", "choose_compile", "MIN_EAGER_RUN_S", "TOO_SHORT"]
