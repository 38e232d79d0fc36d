"""Choosing how the simulator executes k nodes: ``sim.chunk=auto|<int>|layers:<int>`` (docs/architecture.md "Models").

Candidates are chunks of c = 1 (a plain loop over nodes), 2, 4, … and k nodes per
``torch.func.vmap`` call, and — for models made of the layers of
:mod:`.node_batched` (the digits CNN, the MLP, user models of plain conv / linear /
activation / pooling layers), whose outputs on the first batch equal the per-node
loop's — chunks of c ≥ 2 nodes through node-batched layers (``layers:c``: one grouped
convolution / batched matmul per layer). ``auto`` times a few real training steps
(:meth:`~.stacked.StackedModel.loss_and_grad` on a real batch) of each candidate whose
activations fit in memory — on the first max(c, 64) nodes, scaled by k / that count (a
step is k/c identical chunks, so this is its time without looping the small chunks over
all k nodes: at k = 1,024 the 11 candidates run 2,368 node-steps per timed call instead
of 11,264), each for ``steps`` calls or about :data:`MIN_TIMING_S` seconds, whichever is
longer (a 10 ms step is not decided by two calls) — keeps the fastest, and leaves the
model's buffers and the random generators exactly as it found them, so the run that follows is the same as if
nothing had been timed. The memory one node's step keeps for backward (the bytes of
the tensors autograd saves) is measured once with c = 1; a chunk is a candidate only
while c times that stays under ``memory_fraction`` of the device's free memory (CPU:
of the machine's available memory).

The decision is cached per machine (``execution.json`` in the cache folder,
``$XDG_CACHE_HOME/decent8``), keyed by the device, the torch version, the model's
structure, k and the batch shapes: rerunning the same command on the same machine
picks the same chunk without timing again, so it computes the same numbers
(different chunks agree to float rounding only). ``sim.chunk=<int>`` bypasses it.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from ..atomic import atomic_write_text
from ..data.cache import default_cache_dir
from ..errors import ConfigError, first_line
from . import node_batched
from .stacked import Inputs, StackedModel, take
from .strategies import LOOP, strategy_for


@dataclass
class ExecutionChoice:
    """What was chosen and why (written to the run folder as ``execution.json``)."""

    requested: str
    chunk: int
    nodes: int
    #: ``vmap`` (c = 1: the plain loop) or ``layers`` (node-batched layers)
    execution: str = "vmap"
    saved_bytes_per_node: int = 0
    memory_budget_bytes: int = 0
    seconds_per_step: dict[str, float] = field(default_factory=dict)
    #: why vmap chunks were not candidates (the model cannot run under torch.func.vmap), if so
    vmap_unsupported: str = ""
    #: why node-batched layers were not candidates, if so
    layers_unsupported: str = ""
    #: True when ``auto`` reused this machine's earlier decision (no timing)
    cached: bool = False
    #: ``sim.compile`` resolved: whether each chunk's forward + backward is compiled, and why
    compile: bool = False
    compile_reason: str = ""

    @property
    def spec(self) -> str:
        """The ``sim.chunk`` value that reproduces this choice (``8``, ``layers:8``)."""
        return spec_of(self.execution, self.chunk)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "spec": self.spec}


def spec_of(execution: str, chunk: int) -> str:
    return f"layers:{chunk}" if execution == "layers" else str(chunk)


COMPILE_MODES = ("auto", "true", "false")
#: ``sim.compile=auto`` on ``decent8 launch`` ranks compiles 8-bit runs of at least this many steps. Compiling the
#: 8-bit ResNet-20 took 210 s cold on a 2-core CPU (3 s from the inductor cache) and made
#: its step 1.3–1.5x faster; FP32 steps gained ≤ 12 % (docs/results/execution_speed.md "Compiled step").
AUTO_COMPILE_MIN_STEPS = 2000


def parse_compile(value: object) -> str:
    """``sim.compile``: ``auto`` | ``true`` | ``false`` (YAML booleans accepted)."""
    mode = str(value).strip().lower()
    if mode not in COMPILE_MODES:
        raise ConfigError("sim.compile", f"must be one of {', '.join(COMPILE_MODES)}, got {value!r}")
    return mode


def resolve_compile(value: object, precision: str, steps: int) -> tuple[bool, str]:
    """Whether to compile (``StackedModel.compile``) and why: ``true`` / ``false`` as
    asked; ``auto`` compiles 8-bit runs of ≥ AUTO_COMPILE_MIN_STEPS steps, where the
    fused quantizer repays the compilation; FP32 steps gain too little to pay for it.
    (The rule of ``decent8 launch`` ranks, which must agree without timing; the simulator
    times eager against compiled, :mod:`.compile_choice`.)"""
    mode = parse_compile(value)
    if mode != "auto":
        return mode == "true", f"sim.compile={mode}"
    if precision != "int8":
        return False, "auto: FP32 steps gain too little from compiling to repay it"
    if steps < AUTO_COMPILE_MIN_STEPS:
        return False, f"auto: {steps} steps, fewer than the {AUTO_COMPILE_MIN_STEPS} that repay compiling"
    return True, f"auto: 8-bit run of {steps} steps (the fused quantizer repays compiling)"


def parse_execution(value: object) -> tuple[str, int] | None:
    """``sim.chunk``: None for ``auto``, else ``(execution, c)``: ``("vmap", c)`` for a whole
    number c (c = 1: the plain loop), ``("layers", c)`` for ``layers:c`` (one line naming
    the option otherwise)."""
    text = str(value).strip().lower()
    if text == "auto":
        return None
    execution, _, number = text.rpartition(":") if text.startswith("layers:") else ("vmap", "", text)
    try:
        c = int(number) if not isinstance(value, bool) else -1
    except ValueError:
        c = -1
    if c < 1 or number not in (str(c), f"{c}.0"):
        raise ConfigError("sim.chunk", "must be auto, a positive whole number of nodes per torch.func.vmap call "
                                       f"(1 = a plain loop), or layers:N (N nodes through node-batched layers), got {value!r}")
    return execution, c


def parse_chunk(value: object) -> int | None:
    """The chunk size of a ``sim.chunk`` value (None for ``auto``); see :func:`parse_execution`."""
    parsed = parse_execution(value)
    return None if parsed is None else parsed[1]


def layers_mismatch(model: StackedModel, params: torch.Tensor, x: Inputs) -> str:
    """Why the node-batched layers cannot run this model ("" when they can): a layer
    without a node-batched form, or outputs on the first batch (first ≤ 4 nodes) that
    differ from the per-node loop's — in evaluation (a ``forward`` that mixes nodes'
    samples), or in training with the nodes' draws of step 0 (a random draw that the
    merged batch cannot give each node: one on a tensor without the batch axis whose
    length happens to equal the merged batch's). Buffers and RNG states are left as
    they were."""
    reason = node_batched.unsupported(model.module)
    if reason:
        return reason
    m = min(params.shape[0], 4)
    cpu_rng = torch.get_rng_state()
    cuda_rng = torch.cuda.get_rng_state(params.device) if params.is_cuda else None
    for training, step in ((False, None), (True, 0)):
        outs = []
        model.module.train(training)
        try:
            with torch.no_grad():
                for strategy in (LOOP, strategy_for("layers", m)):
                    buffers = None if model.buffers is None else model.buffers[:m].clone()
                    outs.append(model.forward(params[:m], take(x, slice(m)), buffers, strategy=strategy, step=step))
        except (RuntimeError, ValueError, TypeError, IndexError) as e:
            return f"the node-batched forward fails ({first_line(e)})"
        finally:
            model.module.train()
            torch.set_rng_state(cpu_rng)
            if cuda_rng is not None:
                torch.cuda.set_rng_state(cuda_rng, params.device)
        ref, out = outs
        if out.shape != ref.shape or not torch.allclose(out, ref, rtol=1e-4,
                                                        atol=1e-5 * max(1.0, ref.abs().max().item())):
            if training:
                return ("its training outputs with the nodes' own draws differ from the per-node loop's (a random "
                        "draw the merged batch shares between nodes, e.g. on a tensor without the batch axis)")
            return "its outputs differ from the per-node loop's (the model's forward mixes samples of different nodes)"
    return ""


def available_memory(device: torch.device) -> int:
    """Free bytes on ``device`` (CPU: MemAvailable, else physical memory)."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 8 << 30


def saved_bytes_per_node(model: StackedModel, params: torch.Tensor, x: Inputs, y: torch.Tensor) -> int:
    """Bytes of the tensors autograd keeps for one node's backward (a memory estimate of one node's step)."""
    total = 0
    seen: set[int] = set()

    def pack(t: torch.Tensor) -> torch.Tensor:
        nonlocal total
        key = t.untyped_storage().data_ptr() if t.device.type != "meta" else id(t)
        if key not in seen:
            seen.add(key)
            total += t.untyped_storage().nbytes()
        return t

    # one node's own copies: a saved row view of params[k, d] (or of the batch) would
    # count the storage of all k nodes, and cap the chunk at large k for no reason
    x1 = {n: v[:1].clone() for n, v in x.items()} if isinstance(x, dict) else x[:1].clone()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model.loss_and_grad(params[:1].clone(), x1, y[:1].clone(), strategy=LOOP)
    return total


def probe(model: StackedModel, params: torch.Tensor, x: Inputs, y: torch.Tensor) -> None:
    """One node's loss and gradient on its first batch, so that a model whose outputs do
    not fit the loss (or a loss that is not a scalar per node) stops with one line
    before anything is written. Buffers and RNG states are left as they were."""
    buffers = model.buffers_state()
    cpu_rng = torch.get_rng_state()
    cuda_rng = torch.cuda.get_rng_state(params.device) if params.is_cuda else None
    import warnings

    try:
        with warnings.catch_warnings(record=True) as caught:  # kept back: a failing probe is one line
            warnings.simplefilter("always")
            model.loss_and_grad(params[:1], take(x, slice(1)), y[:1], strategy=LOOP)
        for w in caught:  # the probe passed: its warnings (a broadcasting loss …) still reach the user
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    except ConfigError:
        raise
    except (RuntimeError, IndexError, ValueError, TypeError) as e:
        out_shape = "?"
        try:
            with torch.no_grad():
                out_shape = str(tuple(model.forward(params[:1], take(x, slice(1)), strategy=LOOP).shape[2:]))
        except Exception:
            pass
        msg = first_line(e)
        raise ConfigError("loss", f"{model.task.name} cannot score this model: outputs per sample {out_shape}, "
                                  f"targets per sample {tuple(y.shape[2:])} ({type(e).__name__}: {msg})") from None
    finally:
        _restore(model, buffers, cpu_rng, cuda_rng, params)


def candidates(k: int, limit: int) -> list[int]:
    out, c = [], 1
    while c < k and c <= limit:
        out.append(c)
        c *= 2
    if k <= limit and k not in out:
        out.append(k)
    return out or [1]


def _shapes(x: Inputs) -> object:
    if isinstance(x, dict):
        return {k: [list(v.shape), str(v.dtype)] for k, v in sorted(x.items())}
    return [list(x.shape), str(x.dtype)]


def decision_key(model: StackedModel, params: torch.Tensor, x: Inputs) -> str:
    """What the fastest chunk depends on: device, torch, the model's structure, k, the batch."""
    dev = params.device
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else f"cpu x{torch.get_num_threads()}"
    text = json.dumps([dev.type, name, torch.__version__, repr(model.module), model.dim, model.task.name,
                       params.shape[0], _shapes(x), CHOOSER_VERSION], sort_keys=True, default=str)
    return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


def _cache_file() -> "os.PathLike[str]":
    return default_cache_dir() / "execution.json"


def _cache_entry(key: str) -> Any:
    """``key``'s entry: a ``sim.chunk`` spec, or ``{"spec", "seconds_per_step"}`` (None if absent)."""
    try:
        with open(_cache_file(), encoding="utf-8") as f:
            return json.load(f)[key]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def cached_decision(key: str) -> tuple[str, int] | None:
    entry = _cache_entry(key)
    try:
        return parse_execution(entry.get("spec") if isinstance(entry, dict) else entry)
    except (ValueError, AttributeError, KeyError, TypeError, ConfigError):
        return None


def cached_timings(key: str) -> dict[str, float]:
    """The seconds per step the run that cached ``key``'s decision measured ({} for old entries)."""
    entry = _cache_entry(key)
    timings = entry.get("seconds_per_step") if isinstance(entry, dict) else None
    return {str(k): float(v) for k, v in timings.items()} if isinstance(timings, dict) else {}


def remember_decision(key: str, spec: str, timings: dict[str, float] | None = None) -> None:
    """Add ``key → spec`` (a ``sim.chunk`` value) and the measured seconds per step to the
    cache file (atomic replace; an unwritable cache is skipped)."""
    store_in_cache(key, {"spec": spec, "seconds_per_step": timings} if timings else spec)


def store_in_cache(key: str, value: object) -> None:
    """``key → value`` in the machine's decision cache file (atomic replace; unwritable: skipped)."""
    path = _cache_file()
    try:
        with open(path, encoding="utf-8") as f:
            table = json.load(f)
        if not isinstance(table, dict):
            table = {}
    except (OSError, ValueError):
        table = {}
    table[key] = value
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        atomic_write_text(path, json.dumps(table, indent=1, sort_keys=True) + "\n")
    except OSError:
        pass


def choose_chunk(model: StackedModel, params: torch.Tensor, x: Inputs, y: torch.Tensor, requested: object = "auto",
                 steps: int = 2, memory_fraction: float = 0.5, use_cache: bool = True) -> ExecutionChoice:
    """Give ``model`` its execution strategy (:meth:`StackedModel.use`) for training ``params[k, d]`` on batches like ``x[k, b, …]``.

    ``requested`` is the ``sim.chunk`` value: ``N`` or ``layers:N`` is used as it is
    (capped at k); ``auto`` reuses this machine's cached decision or times the
    candidates (and caches the winner). Model buffers and RNG states are restored afterwards.
    """
    k = params.shape[0]
    fixed = parse_execution(requested)
    probe(model, params, x, y)
    buffers = model.buffers_state()
    cpu_rng = torch.get_rng_state()
    cuda_rng = torch.cuda.get_rng_state(params.device) if params.is_cuda else None
    if fixed is not None or k == 1:
        execution, c = fixed or ("vmap", 1)
        c = min(c, k)
        execution = execution if c > 1 else "vmap"  # one node: the plain module
        if execution == "layers":
            reason = layers_mismatch(model, params, x)
            if reason:
                raise ConfigError("sim.chunk", f"layers:{c} cannot run this model: {reason}; use auto or a number")
        elif c > 1:
            try:
                model.loss_and_grad(params, x, y, strategy=strategy_for(execution, c))
            except VMAP_ERRORS as e:
                raise ConfigError("sim.chunk", f"this model cannot run {c} nodes in one torch.func.vmap call "
                                               f"({first_line(e)}); use sim.chunk=1 (a loop) or auto") from None
            finally:
                _restore(model, buffers, cpu_rng, cuda_rng, params)
        model.use(strategy_for(execution, c))
        return ExecutionChoice(str(requested), c, k, execution)
    key = decision_key(model, params, x)
    known = cached_decision(key) if use_cache else None
    if known is not None and known[1] <= k:
        model.use(strategy_for(*known))
        return ExecutionChoice("auto", known[1], k, known[0], seconds_per_step=cached_timings(key), cached=True)
    layers_reason = layers_mismatch(model, params, x)
    try:
        per_node = saved_bytes_per_node(model, params, x, y)
        budget = int(available_memory(params.device) * memory_fraction)
        limit = max(1, budget // max(per_node, 1))
        timings: dict[str, float] = {}
        unsupported = ""
        full_buffers = model.buffers
        clock = step_clock(params.device)
        families = [("vmap", candidates(k, limit))]
        if not layers_reason:
            families.append(("layers", [c for c in candidates(k, limit) if c > 1]))
        for execution, sizes in families:
            tried = 0
            for c in sizes:
                # k/c identical chunks: timing m = max(c, SAMPLE_NODES) nodes and scaling by k/m
                # gives the k-node time without running the small chunks over all k nodes
                m = min(k, max(c, SAMPLE_NODES))
                p_m, x_m, y_m = params[:m], take(x, slice(m)), y[:m]
                model.buffers = None if full_buffers is None else full_buffers[:m].clone()
                strategy = strategy_for(execution, c)
                try:
                    t0 = clock()
                    model.loss_and_grad(p_m, x_m, y_m, strategy=strategy)  # warm-up
                    _sync(params)
                    # small models: enough calls to last MIN_TIMING_S (a 10 ms step timed twice is noise)
                    n = max(steps, min(MAX_TIMED_CALLS, math.ceil(MIN_TIMING_S / max(clock() - t0, 1e-6))))
                    t0 = clock()
                    for _ in range(n):
                        model.loss_and_grad(p_m, x_m, y_m, strategy=strategy)
                    _sync(params)
                except torch.OutOfMemoryError:
                    break
                except VMAP_ERRORS as e:
                    if c == 1:
                        raise
                    if execution == "layers":
                        layers_reason = f"the node-batched step fails ({first_line(e)})"
                    else:
                        unsupported = first_line(e)  # the model does not run under vmap: the loop it is
                    break
                finally:
                    model.buffers = full_buffers
                name = spec_of(execution, c)
                timings[name] = (clock() - t0) / n * (k / m)
                tried += 1
                if timings[name] > 2.0 * min(timings.values()) and tried >= 3:
                    break  # past the optimum and getting worse
        execution, chunk = parse_execution(min(timings, key=timings.__getitem__)) or ("vmap", 1)
    finally:
        _restore(model, buffers, cpu_rng, cuda_rng, params)
    model.use(strategy_for(execution, chunk))
    if use_cache:
        remember_decision(key, spec_of(execution, chunk), timings)
    return ExecutionChoice("auto", chunk, k, execution, per_node, budget, timings, unsupported, layers_reason)


#: part of the cache key: decisions of an earlier way of choosing are not reused
#: (2: sampled timing, process CPU time, one node's memory estimate; 3: node-batched layers)
CHOOSER_VERSION = 3

#: ``auto`` times a chunk of c nodes on max(c, SAMPLE_NODES) of the k nodes (scaled to k)
SAMPLE_NODES = 64
#: ``auto`` times each candidate for at least ``steps`` calls and about this many seconds
#: (at most MAX_TIMED_CALLS calls)
MIN_TIMING_S = 0.25
MAX_TIMED_CALLS = 50

#: what a model that cannot run under torch.func.vmap raises (data-dependent control flow, …)
VMAP_ERRORS = (RuntimeError, NotImplementedError, ValueError, TypeError)


def _restore(model: StackedModel, buffers: torch.Tensor | None, cpu_rng: torch.Tensor,
             cuda_rng: torch.Tensor | None, params: torch.Tensor) -> None:
    model.load_buffers_state(buffers)
    torch.set_rng_state(cpu_rng)
    if cuda_rng is not None:
        torch.cuda.set_rng_state(cuda_rng, params.device)


def step_clock(device: torch.device):
    """The clock candidates are timed with: this process's CPU time on a CPU running one
    thread (there it equals the wall time of an idle machine, and other jobs sharing the
    cores do not distort it), else the wall clock."""
    if device.type == "cpu" and torch.get_num_threads() == 1:
        return time.process_time
    return time.perf_counter


def _sync(t: torch.Tensor) -> None:
    if t.is_cuda:
        torch.cuda.synchronize(t.device)


__all__ = ["ExecutionChoice", "parse_chunk", "parse_execution", "layers_mismatch", "spec_of", "probe", "choose_chunk", "candidates", "saved_bytes_per_node", "available_memory"]
