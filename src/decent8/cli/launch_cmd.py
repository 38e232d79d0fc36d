"""``decent8 launch``: run one training on N local processes, one per node (torch.distributed).

A small single-host stand-in for ``torchrun --nproc-per-node N -m decent8 train …``:
it hosts the rendezvous store itself (as torchrun's agent does, so the store outlives
any node and every node can read which peer failed first), starts N processes of
``python -P -m decent8 train backend=distributed …`` (``-P``: the working folder is not
on ``sys.path``) with torchrun's environment
(MASTER_ADDR=127.0.0.1, a free MASTER_PORT, RANK, LOCAL_RANK, WORLD_SIZE,
TORCHELASTIC_USE_AGENT_STORE), forwards their output (node 0 as it is, the others
with a ``[node r]`` prefix) and exits non-zero if any of them fails — after giving the
others ``--grace`` seconds to stop on their own (they name the failed peer), it stops
the rest.

Examples::

    decent8 launch --nodes 4 algorithm=choco compression=topk topology=directed_ring
    decent8 launch --nodes 4 configs/paper/x.yaml epochs=10
    decent8 launch --resume runs/choco-topk-…      # continue a killed run
    decent8 launch --ranks 2 nodes=64 topology=ring   # 2 processes, 32 nodes each (comm/block.py)
"""
from __future__ import annotations

import argparse
import ctypes
import datetime
import ipaddress
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Iterator, Sequence

from ..errors import ConfigError
from .common import OneLineParser

#: Seconds the other nodes get to stop on their own after one failed.
DEFAULT_GRACE_S = 10.0
#: Seconds between SIGTERM and SIGKILL when stopping nodes.
KILL_AFTER_S = 5.0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "launch", allow_abbrev=False,
        help="run `decent8 train backend=distributed …` on N local processes (one per node)",
        description="Start N local processes with torchrun's environment, each running one node of "
                    "`decent8 train backend=distributed …` (gloo on CPU, NCCL on CUDA). Every argument "
                    "not listed here goes to `decent8 train` (a config file, key=value overrides, "
                    "--resume RUN_DIR, --quiet). Across machines use torchrun; see docs/distributed.md.",
    )
    p.add_argument("--nodes", type=int, metavar="N",
                   help="number of processes = nodes (default: the config's `nodes`; sets nodes=N otherwise)")
    p.add_argument("--ranks", type=int, metavar="R",
                   help="number of processes, each holding a block of the nodes as one stacked model "
                        "(sets dist.ranks=R; default: one process per node)")
    p.add_argument("--grace", type=float, default=DEFAULT_GRACE_S, metavar="S",
                   help=f"after a node fails, seconds the others get to stop on their own (default {DEFAULT_GRACE_S:g})")
    p.set_defaults(func=run, train_args=[])


# ------------------------------------------------------------------ processes
def rank_env(rank: int, world_size: int, master_port: int, master_addr: str = "127.0.0.1",
             base: dict[str, str] | None = None) -> dict[str, str]:
    """torchrun's environment for one local process (the store is hosted by the launcher)."""
    env = dict(os.environ if base is None else base)
    env.update({
        "MASTER_ADDR": master_addr, "MASTER_PORT": str(master_port), "RANK": str(rank), "LOCAL_RANK": str(rank),
        "WORLD_SIZE": str(world_size), "LOCAL_WORLD_SIZE": str(world_size), "GROUP_RANK": "0",
        "TORCHELASTIC_USE_AGENT_STORE": "True", "PYTHONUNBUFFERED": "1",
    })
    # like torchrun: do not let N processes each start one thread per core
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // world_size)))
    # a local run keeps gloo's connections on the loopback interface, like the store
    if _is_loopback(master_addr) and "GLOO_SOCKET_IFNAME" not in env and _has_interface("lo"):
        env["GLOO_SOCKET_IFNAME"] = "lo"
    return env


def _is_loopback(addr: str) -> bool:
    try:
        return ipaddress.ip_address(addr).is_loopback
    except ValueError:
        return addr == "localhost"


def _has_interface(name: str) -> bool:
    try:
        return any(n == name for _, n in socket.if_nameindex())
    except (OSError, AttributeError):
        return False


def listen_socket(master_addr: str) -> socket.socket:
    """A TCP socket listening on ``master_addr`` only (a free port): the rendezvous store of
    a local run is not reachable from other machines (TCPStore alone listens on all interfaces)."""
    last: OSError | None = None
    for family, kind, proto, _, addr in socket.getaddrinfo(master_addr, 0, type=socket.SOCK_STREAM):
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(addr)
            sock.listen(1024)
            return sock
        except OSError as e:
            sock.close()
            last = e
    raise ConfigError("MASTER_ADDR", f"cannot listen on {master_addr}: {last.strerror if last else 'no address'}")


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux: the node gets SIGTERM when the launcher dies (even by SIGKILL), so no rank is orphaned."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def _segments(stream: IO[bytes]) -> Iterator[bytes]:
    """The stream cut after each ``\n`` or ``\r`` as soon as it arrives (a progress bar
    redraws its line with ``\r`` and must not wait for a newline)."""
    buf = b""
    while True:
        chunk = os.read(stream.fileno(), 65536)
        if not chunk:
            break
        buf += chunk
        while True:
            cut = min((i for i in (buf.find(b"\n"), buf.find(b"\r")) if i >= 0), default=-1)
            if cut < 0:
                break
            yield buf[: cut + 1]
            buf = buf[cut + 1:]
    if buf:
        yield buf


def _pump(stream: IO[bytes], prefix: bytes, sink: IO[bytes], seen: set[bytes], lock: threading.Lock) -> None:
    """Copy lines with a prefix; an error line another node already printed is dropped
    (a bad option or a dead peer makes every node say the same), node 0's included."""
    for line in _segments(stream):
        with lock:
            if line.startswith(b"decent8: error:"):
                if line.strip() in seen:
                    continue
                seen.add(line.strip())
            sink.write(prefix + line)
            sink.flush()
    stream.close()


class LocalNodes:
    """N local processes with torchrun's environment around one rendezvous store.

    ``command`` is the process's command line (``[python, -m, decent8, train, …]``).
    ``log_dir`` writes node r's stdout and stderr to ``node{r}.log`` instead of
    forwarding them.
    """

    def __init__(self, nodes: int, command: Sequence[str], *, log_dir: str | Path | None = None,
                 master_addr: str = "127.0.0.1", env: dict[str, str] | None = None, timeout_s: float = 300.0) -> None:
        from torch.distributed import TCPStore

        if nodes < 1:
            raise ConfigError("--nodes", f"must be >= 1, got {nodes}")
        self.nodes = nodes
        self._sock = listen_socket(master_addr)  # kept open: the store serves on this socket
        self.store = TCPStore(master_addr, self._sock.getsockname()[1], world_size=nodes, is_master=True,
                              wait_for_workers=False, timeout=datetime.timedelta(seconds=timeout_s),
                              master_listen_fd=self._sock.fileno())
        self.master_addr = master_addr
        self.master_port = int(self.store.port)
        self.procs: list[subprocess.Popen] = []
        self._threads: list[threading.Thread] = []
        self._logs: list[IO[bytes]] = []
        self._seen: set[bytes] = set()
        self._lock = threading.Lock()
        try:
            self._start(command, log_dir, env)
        except OSError as e:  # too many open files, too many processes
            self.stop()
            self.close()
            raise ConfigError("--nodes", f"cannot start {nodes} processes: {e.strerror or e} "
                                         f"(started {len(self.procs)}; raise `ulimit -n` / `ulimit -u` or use fewer nodes)") from None
        except BaseException:
            self.stop()
            self.close()
            raise

    def _start(self, command: Sequence[str], log_dir: str | Path | None, env: dict[str, str] | None) -> None:
        nodes, master_addr = self.nodes, self.master_addr
        extra = {"preexec_fn": _die_with_parent} if sys.platform.startswith("linux") else {}
        for r in range(nodes):
            renv = rank_env(r, nodes, self.master_port, master_addr, env)
            if log_dir is not None:
                f = open(Path(log_dir) / f"node{r}.log", "wb")
                self._logs.append(f)
                p = subprocess.Popen(list(command), env=renv, stdout=f, stderr=subprocess.STDOUT, **extra)
            elif r == 0:  # node 0 keeps the terminal (summary table); its stderr (progress bar) is copied as it comes
                p = subprocess.Popen(list(command), env=renv, stderr=subprocess.PIPE, **extra)
                t = threading.Thread(target=_pump, args=(p.stderr, b"", sys.stderr.buffer, self._seen, self._lock),
                                     daemon=True)
                t.start()
                self._threads.append(t)
            else:
                p = subprocess.Popen(list(command), env=renv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **extra)
                for stream, sink in ((p.stdout, sys.stdout.buffer), (p.stderr, sys.stderr.buffer)):
                    t = threading.Thread(target=_pump, args=(stream, f"[node {r}] ".encode(), sink, self._seen, self._lock),
                                         daemon=True)
                    t.start()
                    self._threads.append(t)
            self.procs.append(p)

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def poll(self) -> list[int | None]:
        return [p.poll() for p in self.procs]

    def stop(self, which: Sequence[int] | None = None) -> None:
        """SIGTERM the given (default: all) running nodes, SIGKILL them after a few seconds."""
        procs = list(self.procs) if which is None else [self.procs[i] for i in which]  # fewer if starting failed
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + KILL_AFTER_S
        for p in procs:
            try:
                p.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def wait(self, grace_s: float = DEFAULT_GRACE_S) -> tuple[list[int], int | None, list[int]]:
        """Wait for every node. When one fails, the others get ``grace_s`` seconds to stop
        on their own, then are stopped. Returns (exit codes, first failed node, stopped nodes)."""
        first: int | None = None
        failed_at = 0.0
        stopped: list[int] = []
        while True:
            codes = self.poll()
            if first is None:
                bad = [i for i, c in enumerate(codes) if c not in (None, 0)]
                if bad:  # a node killed by a signal is the likelier cause
                    first, failed_at = min(bad, key=lambda i: (codes[i] >= 0, i)), time.monotonic()
            if all(c is not None for c in codes):
                break
            if first is not None and time.monotonic() - failed_at > grace_s:
                stopped = [i for i, c in enumerate(codes) if c is None]
                self.stop(stopped)
                break
            time.sleep(0.05)
        self.close()
        return [int(p.returncode) for p in self.procs], first, stopped

    def close(self) -> None:
        for t in self._threads:
            t.join(timeout=2.0)
        for f in self._logs:
            f.close()
        self._logs = []


def rank_command(train_args: Sequence[str]) -> list[str]:
    """One node's command line: ``python -P -m decent8 train …``. ``-P`` (Python >= 3.11)
    keeps the working folder off ``sys.path`` from the interpreter's first import, so no
    file in it (a run folder's ``torch.py``) shadows a library; on 3.10 the command itself
    takes it off first (:mod:`decent8.cli`)."""
    safe = ["-P"] if sys.version_info >= (3, 11) else []
    return [sys.executable, *safe, "-m", "decent8", "train", *train_args]


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


# ------------------------------------------------------------------ arguments
def _train_namespace(train_args: list[str]) -> argparse.Namespace:
    from .train_cmd import add_parser

    sub = OneLineParser(prog="decent8").add_subparsers(dest="command", parser_class=OneLineParser)
    add_parser(sub)
    return sub.choices["train"].parse_intermixed_args(train_args)


def _rank_labels(cfg) -> list[str]:
    """``rank r (nodes a–b)`` per process of a node-block run (how the launcher names them)."""
    from ..comm.placement import blocks, describe_nodes, make_placement

    owner = make_placement(cfg.dist.placement, cfg.nodes, cfg.dist.ranks, cfg.seed)
    return [f"rank {r} (nodes {describe_nodes(b)})" for r, b in enumerate(blocks(owner, cfg.dist.ranks))]


def plan_launch(train_args: list[str], nodes: int | None, ranks: int | None = None,
                labels: list[str] | None = None) -> tuple[int, list[str]]:
    """Validate the train arguments; return (number of processes, `decent8 train` arguments):
    one per node, or ``dist.ranks`` (``--ranks R``) processes each holding a block of nodes.
    ``labels``, when given, receives how each process is named in failure lines."""
    args = list(train_args)
    if args[:1] == ["--"]:
        args = args[1:]
    if args[:1] == ["train"]:
        args = args[1:]
    ns = _train_namespace(args)
    if nodes is not None and nodes < 2 and ranks is None:
        raise ConfigError("--nodes", f"need at least 2 nodes, got {nodes}")
    if ranks is not None and ranks < 1:
        raise ConfigError("--ranks", f"must be >= 1, got {ranks}")
    if ns.resume:
        from ..train.loop import resume_config
        from ..train.run_dir import RunDir
        from .train_cmd import resume_arguments

        cfg = resume_config(RunDir.existing(ns.resume, clean=False), **resume_arguments(ns))
        if cfg.backend != "distributed":
            raise ConfigError("resume", f"{ns.resume} was trained with backend={cfg.backend}; "
                                        f"resume it with `decent8 train --resume {ns.resume}`")
        if nodes is not None and nodes != cfg.nodes:
            raise ConfigError("--nodes", f"{ns.resume} was trained on {cfg.nodes} nodes, not {nodes}")
        saved = cfg.dist.ranks
        if ranks is not None and ranks != (saved or cfg.nodes):
            raise ConfigError("--ranks", f"{ns.resume} was trained on {saved or cfg.nodes} ranks, not {ranks}: each "
                                         f"rank's checkpoint holds its block and its process's random state, which "
                                         f"cannot be re-split exactly; resume with --ranks {saved or cfg.nodes}")
        if labels is not None and saved is not None:
            labels += _rank_labels(cfg)
        return (saved or cfg.nodes), args

    from ..config import load_config
    from ..train.build import check_scalars
    from .train_cmd import split_args

    path, overrides = split_args(ns.args)
    given = dict(o.split("=", 1) for o in overrides if "=" in o)
    if given.get("backend", "distributed").strip() != "distributed":
        raise ConfigError("backend", f"`decent8 launch` runs backend=distributed, got backend={given['backend']}")
    extra = ["backend=distributed"]
    if nodes is not None and "nodes" not in given:
        extra.append(f"nodes={nodes}")
    if ranks is not None and "dist.ranks" not in given:
        extra.append(f"dist.ranks={ranks}")
    cfg = load_config(path, [*overrides, *extra])
    check_scalars(cfg)
    if nodes is not None and cfg.nodes != nodes:
        raise ConfigError("--nodes", f"--nodes {nodes} but the train arguments say nodes={cfg.nodes}")
    if ranks is not None and cfg.dist.ranks != ranks:
        raise ConfigError("--ranks", f"--ranks {ranks} but the train arguments say dist.ranks={cfg.dist.ranks}")
    if cfg.dist.ranks is not None:
        from ..comm.placement import make_placement
        make_placement(cfg.dist.placement, cfg.nodes, cfg.dist.ranks, cfg.seed)  # one line before any process starts
    from ..train.loop import check

    check(cfg)  # data, model, compressor, run folder: every build-time error here, once, before any process starts
    if labels is not None and cfg.dist.ranks is not None:
        labels += _rank_labels(cfg)
    return (cfg.dist.ranks or cfg.nodes), [*args, *extra]


def launch(train_args: list[str], nodes: int | None = None, grace_s: float = DEFAULT_GRACE_S,
           ranks: int | None = None) -> int:
    """Run the training on local processes; return the exit status for the command."""
    labels: list[str] = []
    n, args = plan_launch(train_args, nodes, ranks, labels)
    name = (lambda r: labels[r]) if labels else (lambda r: f"node {r}")
    if not grace_s >= 0:
        raise ConfigError("--grace", f"must be >= 0 seconds, got {grace_s}")
    group = LocalNodes(n, rank_command(args))

    def on_term(signum, frame):  # stop the nodes with the launcher
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        codes, first, stopped = group.wait(grace_s)
    except KeyboardInterrupt:
        group.stop()
        group.close()
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
    if first is None:
        return 0
    if codes[first] < 0:  # it could not say why itself
        sys.stderr.write(f"decent8: error: {name(first)} {describe_exit(codes[first])}\n")
    if stopped:
        what = "rank" if labels else "node"
        sys.stderr.write(f"decent8: error: stopped {what}{'s' if len(stopped) > 1 else ''} "
                         f"{', '.join(map(str, stopped))} ({grace_s:g} s after {name(first)} failed)\n")
    return 2 if all(c == 2 for c in codes) else 1


def run(ns: argparse.Namespace) -> int:
    return launch(list(ns.train_args), ns.nodes, ns.grace, ns.ranks)
