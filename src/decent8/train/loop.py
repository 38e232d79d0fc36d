"""The training loop: epochs, lr schedule, evaluation, checkpoints, metrics (SPEC §8).

``train(cfg)`` runs in named stages: resolve (every default decided once, frozen) and
build (construct the components), resolve the execution, create the run folder
(config.yaml: the resolved config), run the epochs (steps_per_epoch iterations of
the engine, an evaluation every ``eval_every`` epochs — one line of metrics.jsonl — and a
checkpoint), then finish: the consensus rounds, a last evaluation and summary.json.
``train(cfg, resume=folder)`` continues a run from its last checkpoint; with a
deterministic config the result equals the uninterrupted run.
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from ..version import __version__
from ..algorithms import algorithm_info
from ..comm.base import Communicator
from ..config import TrainConfig, evolve, flatten, from_dict, partition_label, to_dict, to_yaml
from ..errors import ConfigError, TrainingError, first_line
from ..user_code import UserCodeError
from .build import Components, build
from .engine import Engine
from ..signals import raise_pending
from .environment import run_environment
from .plots import plot_curves
from ..timing.plots import plot_time
from ..data.augment import make_batch_transform
from ..data.class_table import plot_class_heatmap
from ..data.partition import class_counts
from .tracking import Trackers
from .user_metrics import quality_metrics
from .titles import config_title
from .run_dir import CHECKPOINT, CONFIG, RunDir, atomic_write_text, check_creatable
from ..models.execution import (ExecutionChoice, choose_chunk, parse_compile, parse_execution, probe,
                               resolve_compile)
from ..models.stacked import take
from ..models.compile_choice import TOO_SHORT, choose_compile
from ..models.strategies import strategy_for
from ..models.execution import _cache_file
from .resume_trust import check_resume_code
from .run_dir import foreign_entries, remove_own_folder
from ..config import EXECUTION_OPTIONS
from .async_gossip import AsyncGossipRunner
from .personal import class_weights
from .eval_nodes import check_node_chunk, eval_sample, parse_eval_nodes

#: a run's curves.png / time.png are redrawn during training at most this often (and always at the end)
PLOT_EVERY_S = 30.0

SUMMARY_KEYS = (
    "mean_node_accuracy", "averaged_model_accuracy", "consensus_distance",
    "bytes_sent_per_node", "spectral_gap", "wall_time_s", "sim_time_s",
)


def to_device(x: Any, device: torch.device) -> Any:
    return {k: v.to(device) for k, v in x.items()} if isinstance(x, dict) else x.to(device)


def default_run_stem(cfg: TrainConfig) -> str:
    """The generated run name without its random suffix: what ran, the seed, a time stamp.
    :meth:`RunDir.create_unique` appends ``-XXXXXX`` (random hex), so runs started in the
    same second (with the same seed or not) never share a folder. Portable: a character other
    than letters, digits, ``.``, ``_``, ``+``, ``-`` (the ``:`` of ``topology=pkg.module:fn``) is ``-``."""
    import re

    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    stem = f"{run_label(cfg, '-')}-{cfg.topology.name}-n{cfg.nodes}-{partition_label(cfg, True)}-seed{cfg.seed}-{stamp}"
    return re.sub(r"[^A-Za-z0-9._+-]", "-", stem)


def run_label(cfg: TrainConfig, sep: str = "/") -> str:
    """``algorithm/compression``, or the algorithm alone for ring all-reduce algorithms (own wire format)."""
    return algorithm_info(cfg.algorithm.name).run_label(cfg.algorithm.name, cfg.compression.name, sep)


def write_partition(run: RunDir, c: Components) -> None:
    """The per-node class counts of this run as CSV and as a heatmap (the paper's Figure 2)."""
    labels = c.dataset.partition_labels
    names = c.dataset.partition_class_names
    counts = class_counts(c.parts, labels, c.dataset.partition_classes)
    lines = ["node," + ",".join(names)] + [f"{i}," + ",".join(map(str, row)) for i, row in enumerate(counts)]
    atomic_write_text(run.file("partition.csv"), "\n".join(lines) + "\n")
    what = partition_label(c.cfg)
    plot_class_heatmap(counts, run.file("partition.png"), title=f"{c.dataset.name}, {c.cfg.nodes} nodes, {what}",
                       class_names=names)


def checkpoint_name(comm: Communicator) -> str:
    """``checkpoint.pt`` in one process; ``checkpoint-rank{r}.pt`` per torch.distributed
    rank (one node per rank: r is the node; node blocks: the rank, holding its block)."""
    return CHECKPOINT if comm.single_process else f"checkpoint-rank{comm.rank}.pt"


def _one_process(comm: Communicator) -> bool:
    """True when this process is the whole run (the simulator)."""
    return comm.single_process


def previous_checkpoint_name(name: str) -> str:
    return name[: -len(".pt")] + ".prev.pt"


def save_checkpoint(run: RunDir, comm: Communicator, state: dict[str, Any]) -> None:
    """Atomic save. With one process per node each also keeps its previous checkpoint: a
    process can die after some nodes saved epoch e and before others did."""
    name = checkpoint_name(comm)
    if not _one_process(comm) and run.file(name).exists():
        os.replace(run.file(name), run.file(previous_checkpoint_name(name)))
    run.save_checkpoint(state, name)


def load_resume_checkpoint(run: RunDir, comm: Communicator) -> dict[str, Any] | None:
    """The checkpoint to resume from. With one process per node, all resume from the
    newest epoch every node has (its current or its previous checkpoint)."""
    name = checkpoint_name(comm)
    if _one_process(comm):
        return run.load_checkpoint(name)
    states = [s for s in (run.load_checkpoint(name), run.load_checkpoint(previous_checkpoint_name(name))) if s is not None]
    have = max((int(s["epoch"]) for s in states), default=0)
    agreed = int(comm.gather_nodes(torch.full((comm.k, 1), float(have), dtype=torch.float64, device=comm.device)).min().item())
    if agreed == 0:
        return None
    for s in states:
        if int(s["epoch"]) == agreed:
            return s
    raise ConfigError("resume", f"{checkpoint_name(comm)} has checkpoints of epochs {sorted(int(s['epoch']) for s in states)} "
                                f"in {run.path}, but the newest epoch all nodes have is {agreed}")


def warn_small_shards(c: Components) -> None:
    """A batch larger than a node's shard is allowed (its batches then repeat samples within
    a step, as the sampler cycles through the shard), but said in one line: it is more
    often a mistake (many nodes on a small data set) than a plan."""
    sizes = [len(p) for p in c.parts]
    small = min(range(len(sizes)), key=sizes.__getitem__) if sizes else None
    if small is not None and c.cfg.data.batch_size > sizes[small] and c.comm.is_main:
        import sys

        sys.stderr.write(f"decent8: warning: data.batch_size={c.cfg.data.batch_size} is larger than the shard of node "
                         f"{small} ({sizes[small]} samples): its batches repeat samples; use data.batch_size <= "
                         f"{max(1, sizes[small])} or fewer nodes\n")


def first_batch(c: Components, augment) -> tuple[torch.Tensor, Any, torch.Tensor]:
    """The initial parameters ``[k, d]`` and the first training batch of the local nodes."""
    x0 = c.model.flat_parameters().unsqueeze(0).repeat(c.comm.k, 1)
    idx = c.sampler.epoch_indices(0)[:, 0].cpu()
    xb = augment(to_device(take(c.dataset.x_train, idx), c.device), 0)  # augment on the run's device
    return x0, xb, c.dataset.y_train[idx].to(c.device)


def execution_record(choice: ExecutionChoice) -> dict[str, Any]:
    """``execution.json``: the choice, its timings and where it came from (``source``)."""
    record = choice.to_dict()
    if choice.cached:
        record["source"] = (f"this machine's cache ({_cache_file()}): timed by an earlier run"
                            + ("" if choice.seconds_per_step else " that did not store its timings"))
    elif choice.requested != "auto" or choice.nodes == 1:
        record["source"] = f"sim.chunk={choice.requested} as configured (not timed)"
    else:
        record["source"] = "timed at the start of this run"
    return record


def resume_config(run: RunDir, named_code: dict[str, str] | None = None, trust_config: bool = False) -> TrainConfig:
    """The config a run folder was started with (one line if config.yaml is damaged), checked
    not to run code the user did not name again (:mod:`.resume_trust`)."""

    try:
        cfg = from_dict(run.read_config())
    except ConfigError as e:
        if e.option == "resume":
            raise
        raise ConfigError("resume", f"{run.file(CONFIG)} is damaged ({e}); it cannot be resumed") from None
    check_resume_code(cfg, run.path, named_code, trust_config)
    return cfg


def check(cfg: TrainConfig | None, resume: str | Path | None = None, named_code: dict[str, str] | None = None,
          trust_config: bool = False) -> tuple[Components, Path]:
    """``decent8 train --check``: validate and build everything a run needs (config, data,
    partition, topology, model, compressor, algorithm; with ``resume`` also the run
    folder's config and checkpoint) and check that the run folder can be created, but
    train nothing and write nothing. Returns the components and the run folder."""
    if resume is not None:
        run = RunDir.existing(resume, clean=False)
        cfg = resume_config(run, named_code, trust_config)
    assert cfg is not None
    c = build(dataclasses.replace(cfg, backend="simulator"))  # no rendezvous: the simulator builds the same parts
    probe(c.model, *first_batch(c, make_batch_transform(c.dataset, cfg.data.augment, cfg.seed, c.comm.local_nodes,
                                                        c.device)))  # the model's outputs fit the loss
    if resume is not None:
        if c.comm.single_process and cfg.backend == "simulator":
            state = run.load_checkpoint(checkpoint_name(c.comm))
            if state is not None:
                load_engine_state(Engine(c.model, c.algorithm, c.optimizer, c.comm, c.x0), state, run)
        warn_small_shards(c)
        return c, run.path
    path = Path(cfg.out_dir) / (cfg.name or default_run_stem(cfg) + "-XXXXXX")
    check_creatable(path)
    warn_small_shards(c)  # after every check: a refused config stays one line
    return c, path


def remove_if_unsaved(run: RunDir) -> None:
    """Remove a new run folder that holds no checkpoint and only decent8's own files."""
    if not any(run.path.glob("checkpoint*.pt")) and not foreign_entries(run.path):
        remove_own_folder(run.path)


def load_engine_state(engine: Engine, state: dict[str, Any], run: RunDir) -> None:
    """``engine.load_state_dict`` with one line for a checkpoint of another config."""
    z = state["engine"]["z"]
    if tuple(z.shape) != tuple(engine.z.shape):
        raise ConfigError("resume", f"the checkpoint in {run.path} holds parameters of shape {tuple(z.shape)}, but its "
                                    f"config.yaml builds {tuple(engine.z.shape)}; the folder was changed after the run")
    try:
        engine.load_state_dict(state["engine"])
    except (KeyError, RuntimeError, TypeError, ValueError, AttributeError, IndexError) as e:
        reason = first_line(e, 160)
        raise ConfigError("resume", f"the checkpoint in {run.path} does not match its config.yaml "
                                    f"({type(e).__name__}: {reason})") from None


def check_same_config(cfg: TrainConfig, comm: Communicator) -> None:
    """One process per node: every node must run node 0's config (else payload sizes,
    data shards, even the number of steps differ). Compares a 48-bit hash of each node's
    config (all-gather), and names the nodes that differ and the options."""
    if comm.single_process:
        return
    import hashlib
    import json


    mine = {k: v for k, v in flatten(to_dict(cfg)).items() if k not in EXECUTION_OPTIONS}
    text = json.dumps(mine, sort_keys=True, default=str)
    h = float(int.from_bytes(hashlib.blake2b(text.encode(), digest_size=6).digest(), "little"))
    hashes = comm.gather_nodes(torch.full((comm.k, 1), h, dtype=torch.float64, device=comm.device)).reshape(-1).tolist()
    if all(v == hashes[0] for v in hashes):
        return
    ref = comm.broadcast_object(text)
    ref_cfg = json.loads(ref) if isinstance(ref, str) else {}
    others = [i for i, v in enumerate(hashes) if v != hashes[0]]
    diff = [k for k in sorted(set(mine) | set(ref_cfg)) if json.dumps(mine.get(k), default=str) != json.dumps(ref_cfg.get(k), default=str)]
    here = f"; this node differs in: {', '.join(diff[:5])}" if diff else ""
    raise ConfigError("config", f"node{'s' if len(others) > 1 else ''} {', '.join(map(str, others))} "
                                f"run{'' if len(others) > 1 else 's'} a different config than node 0{here}; "
                                f"start every process with the same arguments")


def device_sync(device: torch.device) -> None:
    """Wait for ``device``'s queued work (CUDA); a no-op on a CPU, whose ops are synchronous."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _finite(values: dict[str, Any]) -> bool:
    return all(math.isfinite(v) for k, v in values.items()
               if isinstance(v, float) and k in ("train_loss", "averaged_model_loss", "mean_node_loss", "consensus_distance"))


def train(cfg: TrainConfig, resume: str | Path | None = None, comm: Communicator | None = None,
          quiet: bool = False, outputs: dict[str, Any] | None = None, named_code: dict[str, str] | None = None,
          trust_config: bool = False, started: dict[str, Any] | None = None, **given: Any) -> tuple[dict[str, Any], Path]:
    """Run (or resume) one training run; returns the summary and the run folder.

    Stages: :func:`~.resolve.resolve` (every default decided, frozen; the user's config is
    not changed) and :func:`~.build.build` (construction), :func:`resolve_execution`,
    :func:`create_run` (or the resumed folder), :meth:`Session.run_epochs`,
    :meth:`Session.finish` (consensus rounds, final evaluation, summary.json).

    On resume, code the folder's config names (``model=pkg.module:factory``) is imported
    only if ``named_code`` names it again or ``trust_config`` (:mod:`.resume_trust`).
    ``given`` passes the Python API's objects to :func:`~.build.build` (``module``,
    ``dataset``, ``loss``, ``parts``); ``outputs``, if given, receives the final
    per-node ``parameters`` ``[n, d]``, ``buffers`` and the template ``module``;
    ``started``, if given, receives the ``run_dir`` as soon as it exists."""
    run = None
    if resume is not None:
        run = RunDir.existing(resume)
        cfg = resume_config(run, named_code, trust_config)
    c = build(cfg, comm, **given)
    check_same_config(c.cfg, c.comm)
    augment = make_batch_transform(c.dataset, c.cfg.data.augment, c.cfg.seed, c.comm.local_nodes, c.device)
    execution = resolve_execution(c, augment, quiet)
    if run is None:
        run = create_run(c, execution)
    if started is not None:
        started["run_dir"] = run.path
    if not quiet and resume is None:
        warn_small_shards(c)
    try:
        session = Session(c, run, augment, quiet, resumed=resume is not None)
        session.run_epochs()
        summary = session.finish(given)
    except UserCodeError:
        if resume is None and c.comm.is_main:  # a user's component failed before anything worth keeping
            remove_if_unsaved(run)
        raise
    if outputs is not None:
        outputs["parameters"] = c.comm.gather_nodes(session.engine.params()).detach().cpu()
        bufs = c.model.buffers
        outputs["buffers"] = None if bufs is None else c.comm.gather_nodes(bufs).detach().cpu()
        outputs["model"] = c.model
    c.comm.barrier()
    if comm is None:
        c.comm.close()
    return summary, run.path


def resolve_execution(c: Components, augment, quiet: bool = False) -> ExecutionChoice:
    """How the simulator runs the nodes (``sim.chunk``, ``sim.compile``), measured on the
    built model; ``c.cfg`` becomes the resolved config with the choice in it
    (:func:`~decent8.config.evolve`), so that config.yaml reruns the run as it ran."""
    cfg, comm = c.cfg, c.comm
    steps = cfg.epochs * c.sampler.steps_per_epoch
    measured = parse_compile(cfg.sim.compile) == "auto" and comm.single_process  # the simulator: timed
    compile_, compile_reason = resolve_compile(cfg.sim.compile, cfg.precision, steps)
    chunk = cfg.sim.chunk
    chunk_auto = parse_execution(chunk) is None and comm.single_process
    if compile_ and chunk_auto and not measured:
        chunk = "1"  # compiled: the loop (compiled vmap chunks measured slower, docs/execution.md)
        compile_reason += "; sim.chunk auto → 1: a compiled loop beats compiled vmap chunks"
    batch = first_batch(c, augment)
    execution = choose_chunk(c.model, *batch, chunk)
    if measured:  # eager vs compiled timed on this run's first batch (models/compile_choice.py)
        loop = strategy_for("vmap", 1) if chunk_auto else None  # compiled, auto's chunk is the loop
        compile_, compile_reason = choose_compile(c.model, *batch, steps, compiled_strategy=loop)
        if compile_ and chunk_auto and execution.spec != "1":
            execution = dataclasses.replace(execution, chunk=1, execution="vmap")
            compile_reason += "; sim.chunk auto → 1: a compiled loop beats compiled vmap chunks"
        if not quiet and not compile_reason.endswith(f"{TOO_SHORT})"):   # a short run: nothing measured, nothing said
            sys.stderr.write(f"decent8: sim.compile={compile_reason}\n")
    execution.compile, execution.compile_reason = compile_, compile_reason
    strict = parse_compile(cfg.sim.compile) == "true"  # auto falls back to eager if compiling fails
    chosen = {"sim.compile": str(execution.compile).lower()}
    if comm.single_process:  # the simulator (one process per node always runs c = 1)
        chosen["sim.chunk"] = execution.spec
    c.cfg = evolve(cfg, chosen)
    if execution.compile and not measured:  # after the (eager) timing of sim.chunk=auto
        c.model.compile(strict=strict)
    return execution


def create_run(c: Components, execution: ExecutionChoice) -> RunDir:
    """Rank 0 creates the run folder (config.yaml: the resolved config, execution.json,
    the partition); every process takes its name (the default one has a time stamp) and
    its verdict; one line and no folder left behind if it cannot be written."""
    cfg, comm = c.cfg, c.comm
    failed = None
    if comm.is_main:
        new = None
        try:
            if cfg.name:
                new = RunDir.create(Path(cfg.out_dir) / cfg.name)
            else:
                new = RunDir.create_unique(cfg.out_dir, default_run_stem(cfg))
                cfg = evolve(cfg, {"name": new.path.name})
            new.write_config(to_yaml(cfg))
            atomic_write_text(new.file("execution.json"), json.dumps(execution_record(execution), indent=2) + "\n")
            write_partition(new, c)
        except (ConfigError, OSError) as e:
            if new is not None:
                try:
                    new.remove_new()
                except OSError:
                    pass
            if isinstance(e, ConfigError):
                failed = [e.option, e.message]
            else:
                failed = ["out_dir", f"cannot write the run folder {str(Path(cfg.out_dir) / (cfg.name or ''))!r}: "
                                     f"{e.strerror or e}"]
    name, failed = comm.broadcast_object([cfg.name, failed])
    if failed is not None:
        raise ConfigError(*failed)
    if name != cfg.name:
        cfg = evolve(cfg, {"name": name})
    c.cfg = cfg   # the resolved config with its run folder's name: what config.yaml holds
    run = RunDir(Path(cfg.out_dir) / cfg.name)  # type: ignore[arg-type]
    if not run.file(CONFIG).exists():  # a host that does not share rank 0's file system
        run.write_config(to_yaml(cfg))
    return run


class Session:
    """One run's training state between its stages: the engine (restored from the run's
    checkpoint on resume), the clock, the evaluation data and the metrics rows."""

    def __init__(self, c: Components, run: RunDir, augment, quiet: bool, resumed: bool) -> None:
        cfg, comm = c.cfg, c.comm
        self.c, self.cfg, self.comm, self.run, self.augment = c, cfg, comm, run, augment
        self.engine = Engine(c.model, c.algorithm, c.optimizer, comm, c.x0)
        self.engine.norm_stats = cfg.model.norm_stats  # running statistics of node models (norm_stats.py)
        self.engine.consensus = cfg.algorithm.consensus  # the final rounds: compressed or exact (engine.py)
        if c.byzantine is not None:   # honest-only metrics; label flips of the Byzantine nodes (train/byzantine.py)
            self.engine.honest = c.byzantine.honest_mask(comm.local_nodes, c.device)
            if c.byzantine.flips_labels:
                self.engine.flip_labels = (~self.engine.honest, c.dataset.num_classes)
        self.timer = c.timer  # simulated clock + measured compute/communication split (decent8.timing, SPEC §12)
        self.start_epoch, self.wall_before, self.rows = 0, 0.0, []
        state = load_resume_checkpoint(run, comm) if resumed else None
        #: AD-PSGD: the epochs are simulated events, not rounds (async_gossip.py)
        self.runner = None
        if c.algorithm.runner == "event_driven":
            ds = c.dataset
            self.runner = AsyncGossipRunner(
                c, self.engine, to_device(ds.x_train, c.device), ds.y_train.to(c.device),
                lambda nodes: make_batch_transform(ds, cfg.data.augment, cfg.seed, nodes, c.device))
        if state is not None:
            load_engine_state(self.engine, state, run)
            if self.runner is not None:
                self.runner.load_state_dict(state.get("async"))
            self.start_epoch, self.wall_before = int(state["epoch"]), float(state["wall_time_s"])
            # what the first start's resolution filled in (the saved config is already resolved)
            c.defaults = dict(state.get("algorithm_defaults", c.defaults))
            if self.start_epoch > cfg.epochs:
                raise ConfigError("resume", f"the checkpoint in {run.path} is of epoch {self.start_epoch}, but the "
                                            f"run has {cfg.epochs} epochs")
            self.timer.load_state_dict(state.get("timing"))
            self.rows = [r for r in run.read_metrics() if r["epoch"] <= self.start_epoch
                         and "after_consensus_rounds" not in r]
        # after the checkpoint is checked: a refused resume writes nothing (not even an event file)
        self.events = (Trackers(run.path, cfg.tensorboard, getattr(cfg, "tracking", None), flatten(to_dict(cfg)))
                       if comm.is_main else None)
        ds = c.dataset
        self.x_train, self.y_train = to_device(ds.x_train, c.device), ds.y_train.to(c.device)
        self.x_test, self.y_test = to_device(ds.x_test, c.device), ds.y_test.to(c.device)
        if not isinstance(self.x_test, dict):
            self.x_test = augment.prepare_eval(self.x_test)
        self.steps = c.sampler.steps_per_epoch
        self.t0 = time.perf_counter()
        self.plotted_at = time.monotonic()   # live figures: redrawn at most every PLOT_EVERY_S
        self.bar = tqdm(total=cfg.epochs * self.steps, initial=self.start_epoch * self.steps,
                        disable=quiet or not cfg.progress or not comm.is_main, desc=run_label(cfg), unit="it",
                        dynamic_ncols=True, leave=False, mininterval=0.5)
        pers_w = class_weights(c.parts, ds.y_train, ds.y_test)
        self.pers_w = pers_w[comm.local_nodes].to(c.device) if pers_w is not None else None
        self.eval_sample = eval_sample(cfg.seed, cfg.nodes, parse_eval_nodes(cfg.eval.nodes, cfg.nodes))
        self.node_chunk = check_node_chunk(cfg.eval.node_chunk)

    def diverged(self, when: str, epoch: int, consensus: bool = False) -> TrainingError:
        """The message for a run that went non-finite: what to lower (the algorithm's
        settings) and where the last good checkpoint is (only if there is one)."""
        knobs = algorithm_info(self.cfg.algorithm.name).divergence_knobs(consensus)
        now = f" (γ is now {self.c.gamma:g})" if "algorithm.gamma" in knobs else ""
        saved = max(epoch, self.start_epoch) if self.cfg.checkpoint else self.start_epoch
        where = (f"; the last good checkpoint (epoch {saved}) is in {self.run.path}" if saved > 0 and
                 self.run.file(checkpoint_name(self.comm)).exists() else "; no checkpoint was written")
        return TrainingError(f"training diverged {when}; lower {' or '.join(knobs)}{now}{where}")

    def evaluate(self, epoch: float, train_loss: float, lr: float, every_node: bool = True) -> dict[str, Any]:
        """One metrics row (SPEC §8); ``every_node=False``: the ``eval.nodes`` sample only."""
        c, comm, timer = self.c, self.comm, self.timer
        m = self.engine.evaluate(self.x_test, self.y_test, self.cfg.data.eval_batch_size, class_weights=self.pers_w,
                                 nodes=None if every_node else self.eval_sample, node_chunk=self.node_chunk)
        bytes_all = comm.gather_nodes(comm.bytes_sent.to(c.device)).double().cpu()
        split = comm.mean_over_nodes(torch.tensor([timer.interval()], dtype=torch.float64, device=c.device)
                                     .expand(comm.k, 2)).tolist()
        return {"epoch": epoch, "step": self.engine.step_count, "lr": lr, "train_loss": train_loss, **m,
                "bytes_sent_per_node": bytes_all.mean().item(),
                "wall_time_s": self.wall_before + time.perf_counter() - self.t0,
                "sim_time_s": timer.sim_time_s, "measured_compute_s": split[0], "measured_comm_s": split[1],
                **(self.runner.metrics() if self.runner is not None else {})}

    def run_epochs(self) -> None:
        """The training epochs left: steps, evaluation, metrics, plots, checkpoints."""
        for epoch in range(self.start_epoch, self.cfg.epochs):
            train_loss, lr = self.train_epoch(epoch)
            if (epoch + 1) % self.cfg.eval_every == 0 or epoch + 1 == self.cfg.epochs:
                self.record(epoch, train_loss, lr)
            if self.cfg.checkpoint:
                save_checkpoint(self.run, self.comm, {
                    "epoch": epoch + 1, "wall_time_s": self.wall_before + time.perf_counter() - self.t0,
                    "engine": self.engine.state_dict(), "config": to_dict(self.cfg), "timing": self.timer.state_dict(),
                    "algorithm_defaults": self.c.defaults,
                    **({"async": self.runner.state_dict()} if self.runner is not None else {})})
            raise_pending()
        self.bar.close()

    def train_epoch(self, epoch: int) -> tuple[float, float]:
        """``steps_per_epoch`` engine steps; returns the mean train loss and the last lr."""
        c, comm, timer, steps = self.c, self.comm, self.timer, self.steps
        idx = c.sampler.epoch_indices(epoch)
        loss_sum = torch.zeros((), device=c.device)
        lr = c.schedule(epoch)
        if self.runner is not None:  # AD-PSGD: the epoch's n·steps events in simulated-time order
            loss_sum, lr = self.runner.run_epoch(epoch, c.schedule)
        for s in range(steps if self.runner is None else 0):
            lr = c.schedule(epoch + s / steps)
            batch = idx[:, s]
            xb = self.augment(take(self.x_train, batch), epoch * steps + s)
            t_step, comm_before, step_index = time.perf_counter(), comm.comm_time_s, self.engine.step_count
            loss = self.engine.train_step(xb, self.y_train[batch], lr)
            if timer.step_sync:  # only device_model=measured needs each step's own time
                device_sync(c.device)
            timer.after_step(step_index, time.perf_counter() - t_step, comm.comm_time_s - comm_before)
            loss_sum += loss.mean()  # on the device; read once per epoch
            self.bar.update(1)
            raise_pending()  # a Ctrl-C / SIGTERM whose exception was swallowed (decent8.signals)
        if not timer.step_sync:  # what the device still had to do of this epoch's steps
            t_wait = time.perf_counter()
            device_sync(c.device)
            timer.add_backlog(time.perf_counter() - t_wait)
        train_loss = comm.mean_over_nodes((loss_sum / steps).reshape(1, 1).expand(comm.k, 1)).item()
        if not math.isfinite(train_loss):
            self.bar.close()
            raise self.diverged(f"in epoch {epoch + 1} (train loss is {train_loss})", epoch)
        return train_loss, lr

    def record(self, epoch: int, train_loss: float, lr: float) -> None:
        """Evaluate after ``epoch``; the metrics row, the progress bar, the plots."""
        row = self.evaluate(epoch + 1, train_loss, lr, every_node=epoch + 1 == self.cfg.epochs)
        if not _finite(row):
            self.bar.close()
            raise self.diverged(f"in epoch {epoch + 1} (test loss {row['averaged_model_loss']}, consensus distance "
                                f"{row['consensus_distance']})", epoch)
        self.rows.append(row)
        if "mean_node_accuracy" in row:
            self.bar.set_postfix(loss=f"{train_loss:.3f}", acc=f"{100 * row['mean_node_accuracy']:.1f}%")
        else:
            self.bar.set_postfix(loss=f"{train_loss:.3f}", test_loss=f"{row['mean_node_loss']:.4g}")
        if self.comm.is_main:
            self.run.write_metrics(self.rows)
            self.events.log(row)  # type: ignore[union-attr]
            last = epoch + 1 == self.cfg.epochs
            due = (epoch + 1) % max(1, self.cfg.epochs // 10) == 0 and time.monotonic() - self.plotted_at >= PLOT_EVERY_S
            if last or due:   # finish() draws the curves once more after consensus rounds
                if not (last and self.cfg.algorithm.consensus_rounds > 0):
                    plot_curves(self.rows, self.run.file("curves.png"), title=config_title(self.cfg))
                plot_time(self.rows, self.run.file("time.png"), title=config_title(self.cfg))
                self.plotted_at = time.monotonic()
                raise_pending()  # plotting drops figures in weakref callbacks, which swallow exceptions

    def finish(self, given: dict[str, Any]) -> dict[str, Any]:
        """The consensus rounds, the final evaluation and summary.json."""
        cfg, comm, rows = self.cfg, self.comm, self.rows
        rounds = cfg.algorithm.consensus_rounds
        for _ in range(rounds):
            self.engine.consensus_round()
            self.timer.after_round()
        final = self.evaluate(float(cfg.epochs), rows[-1]["train_loss"] if rows else float("nan"), 0.0)
        final_checks = {k: v for k, v in final.items() if k != "train_loss"}
        if not _finite(final_checks) or not math.isfinite(final.get("mean_node_accuracy", final["mean_node_loss"])):
            raise self.diverged(f"during the {rounds} final consensus rounds (test loss {final['averaged_model_loss']}, "
                                f"consensus distance {final['consensus_distance']})", cfg.epochs, consensus=True)
        final["after_consensus_rounds"] = rounds
        before = rows[-1] if rows else {}
        if rounds > 0:  # the summary's numbers are the curves' last point
            rows.append(final)
            if comm.is_main:
                self.run.write_metrics(rows)
                plot_curves(rows, self.run.file("curves.png"), title=config_title(self.cfg))
        summary = run_summary(self.c, self.engine, self.timer, final, before, given)
        summary["asynchronous"] = self.runner.summary() if self.runner is not None else None  # AD-PSGD: staleness
        raise_pending()
        if comm.is_main:
            self.run.write_summary(summary)
            self.events.log({**final, "step": self.engine.step_count})  # type: ignore[union-attr]
            self.events.close()  # type: ignore[union-attr]
        return summary


def run_summary(c: Components, engine: Engine, timer, final: dict[str, Any], before: dict[str, Any],
                given: dict[str, Any]) -> dict[str, Any]:
    """summary.json (SPEC §8): the final evaluation and what ran."""
    cfg, comm = c.cfg, c.comm
    info = algorithm_info(cfg.algorithm.name)
    run_split = comm.mean_over_nodes(torch.tensor([timer.run_means()], dtype=torch.float64, device=c.device)
                                     .expand(comm.k, 2)).tolist()
    return {
        "mean_node_accuracy": final.get("mean_node_accuracy"),
        "averaged_model_accuracy": final.get("averaged_model_accuracy"),
        # byzantine.*: the nodes that lied and the honest nodes' accuracy and consensus (train/byzantine.py)
        "byzantine": c.byzantine.record() if c.byzantine is not None else None,
        "honest_mean_node_accuracy": final.get("honest_mean_node_accuracy"),
        "honest_consensus_distance": final.get("honest_consensus_distance"),
        "consensus_distance": final["consensus_distance"],
        "bytes_sent_per_node": final["bytes_sent_per_node"],
        "spectral_gap": c.topology.spectral_gap,
        "wall_time_s": final["wall_time_s"],
        "sim_time_s": final["sim_time_s"],
        "measured_compute_s_per_step": run_split[0],
        "measured_comm_s_per_step": run_split[1],
        "time_model": timer.describe(),
        "min_node_accuracy": final.get("min_node_accuracy"),
        "max_node_accuracy": final.get("max_node_accuracy"),
        "node_accuracies": final.get("node_accuracies"),
        "before_consensus_rounds": {k: before.get(k) for k in ("mean_node_accuracy", "averaged_model_accuracy",
                                                                "mean_node_loss", "averaged_model_loss",
                                                                "consensus_distance")},
        # worst-node views: the 10th percentile of the nodes' accuracies, and each node's
        # accuracy on the test set reweighted to its own training label distribution (train/personal.py)
        "p10_node_accuracy": final.get("p10_node_accuracy"),
        "mean_personalized_accuracy": final.get("mean_personalized_accuracy"),
        "min_personalized_accuracy": final.get("min_personalized_accuracy"),
        "p10_personalized_accuracy": final.get("p10_personalized_accuracy"),
        "personalized_accuracies": final.get("personalized_accuracies"),
        "mean_node_loss": final["mean_node_loss"],
        "averaged_model_loss": final["averaged_model_loss"],
        "final_train_loss": final["train_loss"],
        **quality_metrics(final),  # regression: RMSE, MAE, R²; the user's metrics (train/user_metrics.py)
        "message_bytes": c.algorithm.message_bytes(c.compressor),
        "steps": engine.step_count,
        "steps_per_epoch": c.sampler.steps_per_epoch,
        "epochs": cfg.epochs,
        "consensus_rounds": cfg.algorithm.consensus_rounds,
        "consensus": cfg.algorithm.consensus,  # the final rounds' kind: compressed | exact
        "nodes": cfg.nodes,
        "skew": cfg.skew if cfg.partition.name == "skew" else None,  # the degree of skew of partition=skew
        "partition": partition_label(cfg),
        "algorithm": cfg.algorithm.name,
        "push_sum": c.push_sum,
        "gamma": c.gamma,
        "algorithm_defaults": c.defaults,
        "compression": info.wire_label(cfg.compression.name),  # all-reduce: its own wire format
        "wire": cfg.compression.wire,    # fp32 | int8 (auto: a compressor with one wire format)
        "wire_compression": info.wire_label(getattr(c.compressor, "name", cfg.compression.name)),
        "topology": cfg.topology.name,
        "model": cfg.model.name if given.get("module") is None else type(c.model.module).__name__,
        "loss": c.model.task.name,
        "task": "classification" if c.model.task.classification else "regression",
        "norm_stats": cfg.model.norm_stats,
        "sim_chunk": c.model.chunk,
        "sim_compile": c.model.compiled,
        "sim_compile_failure": c.model.compile_failure,
        "sim_execution": c.model.execution,
        "precision": cfg.precision,
        "norm": cfg.model.norm,
        "parameters": c.model.dim,
        "dataset": cfg.data.name if given.get("dataset") is None else c.dataset.name,
        "seed": cfg.seed,
        "device": str(c.device),
        "backend": cfg.backend,
        **(comm.placement_record() if hasattr(comm, "placement_record") else {}),  # node blocks: crossing edges, bytes
        "decent8_version": __version__,
        "environment": run_environment(c.device),
    }
