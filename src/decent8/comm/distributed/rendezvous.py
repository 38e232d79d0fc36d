"""Joining the run: torchrun's environment read and checked, the backend and device of
this rank, and ``init_process_group`` with one-line errors for a failed rendezvous."""
from __future__ import annotations

import contextlib
import datetime
import os
import re
import sys
import tempfile
from dataclasses import dataclass
from typing import Iterator

import torch
import torch.distributed as dist

from ...errors import ConfigError
from .diagnosis import _short

#: The variables torchrun (and ``decent8 launch``) set for every process.
ENV_VARS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")

ENV_HELP = (
    "backend=distributed needs torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT); "
    "start with `torchrun --nproc-per-node N -m decent8 train …` or `decent8 launch --nodes N …`"
)


@dataclass(frozen=True)
class RankEnv:
    """This process's place in the run, read from torchrun's environment variables."""

    rank: int
    world_size: int
    local_rank: int
    master_addr: str
    master_port: int


def torchrun_env(nodes: int, environ: dict[str, str] | None = None) -> RankEnv:
    """Read and check RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT.

    Raises :class:`ConfigError` when they are missing, malformed, or when WORLD_SIZE is
    not the config's number of nodes (one process per node)."""
    env = os.environ if environ is None else environ
    missing = [v for v in ENV_VARS if not env.get(v)]
    if missing:
        raise ConfigError("backend", ENV_HELP)
    values: dict[str, int] = {}
    for name in ("RANK", "WORLD_SIZE", "MASTER_PORT"):
        try:
            values[name] = int(env[name])
        except ValueError:
            raise ConfigError(name, f"must be an integer, got {env[name]!r}") from None
    rank, world, port = values["RANK"], values["WORLD_SIZE"], values["MASTER_PORT"]
    if world != nodes:
        raise ConfigError(
            "nodes",
            f"the config has nodes={nodes} but {world} processes were started (WORLD_SIZE={world}); "
            f"the distributed backend runs one process per node, so start {nodes} "
            f"(e.g. --nproc-per-node {nodes}) or set nodes={world}",
        )
    if not 0 <= rank < world:
        raise ConfigError("RANK", f"must be in [0, {world}), got {rank}")
    if not 0 < port < 65536:
        raise ConfigError("MASTER_PORT", f"must be a port number in [1, 65535], got {port}")
    try:
        local_rank = int(env.get("LOCAL_RANK", rank))
    except ValueError:
        raise ConfigError("LOCAL_RANK", f"must be an integer, got {env['LOCAL_RANK']!r}") from None
    return RankEnv(rank, world, local_rank, env["MASTER_ADDR"], port)


def backend_for(device: torch.device) -> str:
    """gloo for CPU tensors, NCCL for CUDA tensors."""
    return "nccl" if device.type == "cuda" else "gloo"


def rank_device(device: torch.device | str, local_rank: int) -> torch.device:
    """``cuda`` without an index becomes ``cuda:LOCAL_RANK`` (mod the visible GPUs)."""
    dev = torch.device(device)
    if dev.type == "cuda" and dev.index is None:
        count = max(1, torch.cuda.device_count())
        dev = torch.device("cuda", local_rank % count)
    return dev


@contextlib.contextmanager
def _captured_stderr() -> Iterator[list[str]]:
    """Capture what C++ code writes to file descriptor 2 (c10d logs pages of stack
    frames when a rendezvous fails). The text is handed back in the yielded list; the
    caller decides whether to show it."""
    out: list[str] = []
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no usable fd 2
        yield out
        return
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield out
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            out.append(tmp.read().decode("utf-8", "replace"))


def _init_error(env: RankEnv, timeout_s: float, exc: BaseException) -> ConfigError:
    """A one-line ConfigError for a failed rendezvous."""
    where = f"{env.master_addr}:{env.master_port}"
    text = str(exc)
    low = text.lower()
    joined = re.search(r"(\d+)/(\d+) clients joined", text)
    if joined:
        return ConfigError(
            "WORLD_SIZE",
            f"only {joined.group(1)} of {joined.group(2)} processes reached the rendezvous at {where} "
            f"within {timeout_s:g} s; start all WORLD_SIZE={env.world_size} processes",
        )
    if "address already in use" in low:
        return ConfigError("MASTER_PORT", f"port {env.master_port} is already in use on {env.master_addr}; pick another MASTER_PORT")
    if "timed out" in low or "timeout" in low or "connect" in low or "name or service" in low:
        return ConfigError(
            "MASTER_ADDR",
            f"cannot reach the rendezvous at {where} within {timeout_s:g} s; check MASTER_ADDR/MASTER_PORT "
            "and that the process with rank 0 is running",
        )
    return ConfigError("MASTER_ADDR", f"rendezvous at {where} failed: {_short(text)}")


def init_process_group(env: RankEnv, device: torch.device, timeout_s: float) -> None:
    """``dist.init_process_group`` from torchrun's environment, with one-line errors."""
    with _captured_stderr() as logs:
        try:
            dist.init_process_group(
                backend=backend_for(device), init_method="env://", rank=env.rank, world_size=env.world_size,
                timeout=datetime.timedelta(seconds=timeout_s),
            )
            ok = True
        except Exception as e:  # DistNetworkError, DistStoreError, RuntimeError, ValueError
            ok, error = False, e
    if not ok:
        raise _init_error(env, timeout_s, error) from None
    if logs and logs[0].strip():  # warnings of a successful start stay visible
        sys.stderr.write(logs[0])
