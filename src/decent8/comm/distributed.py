"""torch.distributed backend: one process per node (k = 1), gossip by peer-to-peer sends.

Every process holds one node (``local_nodes == [rank]``) and computes exactly what the
simulator computes for that node's row:

* ``exchange``: the compact payload tensors (in :meth:`Payload.names` order, with
  their declared dtypes — int8/uint8 values, int16/int32 indices, packed bits, fp32
  scales; never pickled objects) go to every out-neighbour and come from every
  in-neighbour of the step's phase, all posted at once before waiting on any (one
  coalesced :func:`torch.distributed.batch_isend_irecv` on NCCL, non-blocking
  isend/irecv on gloo), so no topology can deadlock. Receive
  buffers are preallocated from ``compressor.spec()``. The received payloads are
  decoded together and mixed with the node's row of W as one small product
  ``W[i, nodes] @ decoded[nodes]`` over the in-neighbours and self in node order
  (the simulator's ``W @ decoded`` restricted to the non-zero terms).
* ``mix_scalars`` the same for the push-sum weights; ``ring_pass`` sends to rank+1
  and receives from rank−1; ``mean_over_nodes`` is an all-reduce, ``gather_nodes``
  an all-gather (metrics only).
* ``bytes_sent`` grows at the send call by ``numel · element_size`` of every tensor
  handed to torch.distributed.

Backends: gloo for CPU tensors, NCCL for CUDA tensors (device ``cuda:LOCAL_RANK``).
Every peer-to-peer exchange waits at most ``timeout_s``; collectives use the same
value as the process-group timeout. A peer that dies, hangs or closes its connection
makes this process raise :class:`PeerError` naming it (``node 2 did not answer within
30 s (exchange at step 41, seen by node 3)``). Every failing process reports what it
saw to the rendezvous store ("I waited on node p"); following those reports to the one
node that reported nothing names the root cause, so every process reports the dead or
hung node, not the neighbour that was blocked behind it.

Trust model: the nodes of one run trust each other's *code* (they run the same
decent8) but not the *bytes* they receive. Nothing received is unpickled (set-up data
travels as JSON bytes in a tensor); the first message of every phase is preceded by
a 32-byte header (magic, tensor count, bytes, a fingerprint of the layout) that every
receiver checks before posting a receive, and every received payload is checked
(dtypes, shapes, index range) before it is decoded, so a peer that sends something
else is named in one line. The rendezvous store and gloo's connections are not
authenticated or encrypted: run multi-host jobs only on a network you trust
(docs/distributed.md).

Start the processes with ``torchrun --nproc-per-node N -m decent8 train
backend=distributed …`` or ``decent8 launch --nodes N …`` (see docs/distributed.md).
"""
from __future__ import annotations

import contextlib
import datetime
import json
import math
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import torch
import torch.distributed as dist

from ..compression.base import Compressor
from ..compression.payload import Payload
from ..errors import ConfigError, TrainingError
from ..topology import Topology
from .base import Communicator

#: The variables torchrun (and ``decent8 launch``) set for every process.
ENV_VARS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
#: Store key prefix under which a failing process reports what it saw (per rank).
FAILURE_KEY = "decent8/failure"
#: After a failure, how long a process waits for the others' reports (also the store's timeout).
STORE_GRACE_S = 2.0
#: First word of the header a node sends each peer before the first payload of a phase.
HEADER_MAGIC = 0x64656338  # "dec8"
#: Set-up data broadcast as JSON (run folder name, config) is at most this many bytes.
MAX_BROADCAST_BYTES = 1 << 20

ENV_HELP = (
    "backend=distributed needs torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT); "
    "start with `torchrun --nproc-per-node N -m decent8 train …` or `decent8 launch --nodes N …`"
)


#: dtype codes of the per-message size header (anything else is -1)
_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int16,
           torch.int32, torch.int64, torch.bool)
#: first word of a size header
SIZES_MAGIC = 0x64387A73  # "d8zs"


def _size_header(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """int64 ``[1 + 2m]`` (CPU): magic, then (bytes, dtype code) of each of the m messages."""
    words = [SIZES_MAGIC]
    for t in tensors:
        words += [t.numel() * t.element_size(), _DTYPES.index(t.dtype) if t.dtype in _DTYPES else -1]
    return torch.tensor(words, dtype=torch.int64)


def _describe_sizes(h: torch.Tensor) -> str:
    words = h.tolist()
    if not words or words[0] != SIZES_MAGIC:
        return "no decent8 message header"
    parts = []
    for nbytes, code in zip(words[1::2], words[2::2]):
        name = str(_DTYPES[code]).replace("torch.", "") if 0 <= code < len(_DTYPES) else f"dtype #{code}"
        parts.append(f"{nbytes} B of {name}")
    return ", ".join(parts) or "no messages"


class PeerError(TrainingError):
    """Another node died, hung or closed its connection; the message names it
    (the CLI prints it as one line and exits with status 1)."""


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


def _short(text: str) -> str:
    """First line of a c10d/gloo message without its source location and advice."""
    line = text.strip().splitlines()[0] if text.strip() else "unknown error"
    line = re.sub(r"^\[[^\]]*\.(?:cc|cpp|h):\d+\]\s*", "", line)
    line = line.split(" This is typically caused")[0]
    return line.strip()


def _classify(text: str) -> str:
    low = text.lower()
    if "timed out" in low or "timeout" in low:
        return "timeout"
    if any(s in low for s in ("connection reset", "connection closed", "broken pipe", "closed by peer",
                              "end of file", "eof", "connection refused")):
        return "closed"
    return "other"


@dataclass
class _Plan:
    """One phase of the topology as seen from this node."""

    sources: list[int]        # in-neighbours (self excluded), ascending
    destinations: list[int]   # out-neighbours (self excluded), ascending
    nodes: list[int]          # sources and self, ascending: the order of the mixing sum
    self_pos: int             # position of this node in ``nodes``
    weights: torch.Tensor     # float32 [1, len(nodes)]: W[i, nodes]
    weights64: torch.Tensor   # the same in float64 (exchange(..., dtype=torch.float64))


class DistributedCommunicator(Communicator):
    """The communicator of the node this process runs (``local_nodes == [rank]``).

    Joins the process group from torchrun's environment unless one is already
    initialised (then its rank and world size are used). ``timeout_s`` bounds every
    peer-to-peer exchange and is the process-group timeout for collectives.
    """

    def __init__(self, topology: Topology, device: torch.device | str = "cpu", timeout_s: float = 60.0) -> None:
        timeout_s = float(timeout_s)
        if not timeout_s > 0:
            raise ConfigError("dist_timeout_s", f"must be > 0 seconds, got {timeout_s:g}")
        dev = torch.device(device)
        self._owns_group = False
        if dist.is_available() and dist.is_initialized():
            rank, world = dist.get_rank(), dist.get_world_size()
            if world != topology.n:
                raise ConfigError("nodes", f"the config has nodes={topology.n} but the process group has {world} processes")
            dev = rank_device(dev, int(os.environ.get("LOCAL_RANK", rank)))
        else:
            if not dist.is_available():
                raise ConfigError("backend", "this torch build has no torch.distributed support")
            env = torchrun_env(topology.n)
            rank = env.rank
            dev = rank_device(dev, env.local_rank)
            if dev.type == "cuda":
                torch.cuda.set_device(dev)
            init_process_group(env, dev, timeout_s)
            self._owns_group = True
        super().__init__(topology, [rank], dev)
        self.rank = rank
        self.timeout_s = timeout_s
        self.backend = str(dist.get_backend())
        self._plans: dict[int, _Plan] = {}
        self._recv: dict[tuple[int, tuple], dict[str, torch.Tensor]] = {}
        self._checked_specs: set[tuple] = set()
        self._handshakes: set[tuple] = set()
        self._closed = False
        # One collective with every process before any batched P2P (NCCL needs it) —
        # it also checks that all of them are up.
        self.barrier()

    # ------------------------------------------------------------------ helpers
    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def _plan(self, step: int) -> _Plan:
        phase = self.topology.phase(step)
        plan = self._plans.get(phase)
        if plan is None:
            i = self.rank
            sources = self.topology.in_neighbors(i, phase)
            nodes = sorted([*sources, i])
            w = torch.tensor(self.topology.weights_np(phase)[i, nodes], dtype=torch.float64, device=self.device)
            plan = _Plan(sources, self.topology.out_neighbors(i, phase), nodes, nodes.index(i),
                         w.to(torch.float32).unsqueeze(0), w.unsqueeze(0))
            if len(self._plans) >= 64:  # per-round random topologies: every step is a new phase
                self._plans.clear()
            self._plans[phase] = plan
        return plan

    def _mix_rows(self, plan: _Plan, own: torch.Tensor, received: torch.Tensor | None,
                  dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """``W[i, nodes] @ rows[nodes]``: own row ``[1, m]`` and the sources' ``[s, m]``,
        summed in ``dtype`` (float32, or float64 for accumulating callers)."""
        w = plan.weights64 if dtype == torch.float64 else plan.weights
        if received is None or received.shape[0] == 0:
            return w[:, plan.self_pos : plan.self_pos + 1] * own.to(w.dtype)
        p = plan.self_pos
        rows = torch.cat([received[:p].to(w.dtype), own.to(w.dtype), received[p:].to(w.dtype)], dim=0)
        return w @ rows

    def _buffers(self, spec: dict[str, tuple[tuple[int, ...], torch.dtype]], source: int) -> dict[str, torch.Tensor]:
        key = (source, tuple((n, tuple(s), d) for n, (s, d) in sorted(spec.items())))
        bufs = self._recv.get(key)
        if bufs is None:
            bufs = {n: torch.empty((1, *s), dtype=d, device=self.device) for n, (s, d) in spec.items()}
            self._recv[key] = bufs
        return bufs

    def _check_payload(self, payload: Payload, spec: dict[str, tuple[tuple[int, ...], torch.dtype]]) -> None:
        if payload.num_nodes != 1:
            raise ValueError(f"a distributed rank holds one node, got a payload for {payload.num_nodes}")
        key = (tuple((n, tuple(t.shape), t.dtype) for n, t in sorted(payload.tensors.items())),
               tuple((n, tuple(sh), d) for n, (sh, d) in sorted(spec.items())))
        if key in self._checked_specs:
            return
        if sorted(spec) != payload.names():
            raise ValueError(f"payload tensors {payload.names()} differ from the compressor's spec {sorted(spec)}")
        for name in payload.names():
            t, (shape, dtype) = payload.tensors[name], spec[name]
            if tuple(t.shape[1:]) != tuple(shape) or t.dtype != dtype:
                raise ValueError(f"payload tensor {name!r} is {tuple(t.shape[1:])} {t.dtype}, "
                                 f"but the compressor's spec declares {tuple(shape)} {dtype}")
        self._checked_specs.add(key)

    @staticmethod
    def spec_header(spec: dict[str, tuple[tuple[int, ...], torch.dtype]]) -> torch.Tensor:
        """int64 ``[4]``: magic, number of tensors, bytes per message, and a 48-bit
        fingerprint of the tensors' names, shapes and dtypes."""
        import hashlib

        text = ";".join(f"{n}:{'x'.join(map(str, sh))}:{str(d).replace('torch.', '')}" for n, (sh, d) in sorted(spec.items()))
        nbytes = sum(math.prod(sh) * torch.empty((), dtype=d).element_size() for sh, d in spec.values())
        fp = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=6).digest(), "little")
        return torch.tensor([HEADER_MAGIC, len(spec), nbytes, fp], dtype=torch.int64)

    def _handshake(self, plan: _Plan, spec: dict[str, tuple[tuple[int, ...], torch.dtype]], step: int, what: str) -> None:
        """Before the first payload of a phase (per payload spec), every node sends its
        out-neighbours a 32-byte header describing what it will send, and checks the
        headers of its in-neighbours: a peer that would send a message of another size,
        dtype or layout (a different config, another program) is named in one line
        before any payload is received (gloo aborts the process on a size mismatch)."""
        key = (self.topology.phase(step), tuple(sorted((n, tuple(sh), str(d)) for n, (sh, d) in spec.items())))
        if key in self._handshakes:
            return
        mine = self.spec_header(spec).to(self.device)
        inbox = [torch.zeros(4, dtype=torch.int64, device=self.device) for _ in plan.sources]
        self._transfer([(mine, dst) for dst in plan.destinations], list(zip(inbox, plan.sources)),
                       f"payload header, {what}", count=False)
        ref = mine.cpu().tolist()
        for src, got in zip(plan.sources, inbox):
            h = got.cpu().tolist()
            if h[0] != HEADER_MAGIC:
                raise PeerError(f"node {src} did not send a decent8 payload header ({what}, seen by node {self.rank})")
            if h != ref:
                raise PeerError(f"node {src} would send {h[1]} tensor(s) of {h[2]} bytes per message, but this node "
                                f"expects {ref[1]} of {ref[2]} bytes (a different payload layout: the nodes run "
                                f"different configs) ({what}, seen by node {self.rank})")
        self._handshakes.add(key)

    def _transfer(self, sends: Sequence[tuple[torch.Tensor, int]], recvs: Sequence[tuple[torch.Tensor, int]], what: str,
                  count: bool = True) -> None:
        """Send and receive (see :meth:`_post`), each batch of messages preceded by a
        header of their byte counts and dtypes that is checked before any of them is
        received (:meth:`_check_sizes`)."""
        self._check_sizes(sends, recvs, what)
        self._post(sends, recvs, what, count)

    def _check_sizes(self, sends: Sequence[tuple[torch.Tensor, int]], recvs: Sequence[tuple[torch.Tensor, int]],
                     what: str) -> None:
        """Every peer first learns the byte count and dtype of each message it will get
        from this node, and checks them against its receive buffers: gloo aborts the
        process (SIGABRT, no message) on a larger message and silently accepts a smaller
        or empty one, so a peer that would send either is named in one line before any
        payload is read. (A header is one small fixed-size message per peer, not counted
        in ``bytes_sent``; a peer that lies in it as well is beyond this check.)"""
        out = {dst: _size_header([t for t, d in sends if d == dst]) for dst in dict.fromkeys(d for _, d in sends)}
        want = {src: _size_header([t for t, s in recvs if s == src]) for src in dict.fromkeys(s for _, s in recvs)}
        inbox = {src: torch.zeros(h.shape, dtype=h.dtype, device=self.device) for src, h in want.items()}
        self._post([(h.to(self.device), dst) for dst, h in out.items()], [(b, src) for src, b in inbox.items()],
                   f"message sizes, {what}", count=False)
        for src, expected in want.items():
            got = inbox[src].cpu()
            if not torch.equal(got, expected):
                raise PeerError(f"node {src} sent a malformed message: {_describe_sizes(got)} where this node expects "
                                f"{_describe_sizes(expected)} ({what}, seen by node {self.rank})")

    def _post(self, sends: Sequence[tuple[torch.Tensor, int]], recvs: Sequence[tuple[torch.Tensor, int]], what: str,
              count: bool = True) -> None:
        """Post all sends and receives at once, count the sent bytes, wait (bounded).

        NCCL gets one coalesced ``batch_isend_irecv``; gloo (which runs a batch as
        separate isend/irecv calls anyway) gets them posted one by one, so a failure
        while posting names its peer."""
        ops = [(dist.isend, t, peer) for t, peer in sends] + [(dist.irecv, t, peer) for t, peer in recvs]
        if not ops:
            return
        for t, _ in sends:  # the bytes handed to torch.distributed (protocol headers not counted)
            if count:
                self.bytes_sent += float(t.numel() * t.element_size())
        peers = [peer for _, _, peer in ops]
        if self.backend == "nccl":
            try:
                works = dist.batch_isend_irecv([dist.P2POp(fn, t, peer) for fn, t, peer in ops])
            except Exception as e:
                raise self._peer_error(sorted(set(peers)), e, what) from None
            blame = [[p] for p in peers] if len(works) == len(ops) else [sorted(set(peers))] * len(works)
        else:
            works, blame = [], []
            for fn, t, peer in ops:
                try:
                    works.append(fn(t, peer))
                except Exception as e:  # the connection was already gone
                    raise self._peer_error([peer], e, what) from None
                blame.append([peer])
        deadline = time.monotonic() + self.timeout_s
        for work, who in zip(works, blame):
            left = max(deadline - time.monotonic(), 1e-3)
            try:
                done = work.wait(timeout=datetime.timedelta(seconds=left))
            except Exception as e:
                raise self._peer_error(who, e, what) from None
            if done is False:
                raise self._peer_error(who, TimeoutError("timed out"), what)

    # ------------------------------------------------------------ failure report
    def _failure_store(self):
        """A fresh client of the rendezvous store (torchrun's agent, `decent8 launch`'s, or
        rank 0's): independent of the process group's own client, whose state is unknown
        after a failure."""
        addr, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
        if not addr or not port:
            return None
        try:
            return dist.TCPStore(addr, int(port), is_master=False, wait_for_workers=False,
                                 timeout=datetime.timedelta(seconds=STORE_GRACE_S))
        except Exception:  # the store went down with its host
            return None

    def _peer_name(self, peer: int | None) -> str:
        """How a failure report names process ``peer`` (None: the prefix of a list of them)."""
        return "one of nodes " if peer is None else f"node {peer}"

    def _describe(self, rec: dict[str, Any], seen_by: int) -> str:
        peers, kind, what = rec["peers"], rec["kind"], rec["what"]
        if not peers:
            reason = {"timeout": f"no answer within {self.timeout_s:g} s",
                      "closed": "a connection was closed"}.get(kind, rec["detail"])
            return f"lost contact with the other nodes during {what}: {reason} (seen by {self._peer_name(seen_by)})"
        who = self._peer_name(peers[0]) if len(peers) == 1 else self._peer_name(None) + ", ".join(map(str, peers))
        if kind == "timeout":
            return f"{who} did not answer within {self.timeout_s:g} s ({what}, seen by {self._peer_name(seen_by)})"
        if kind == "closed":
            return f"connection closed by {who} ({what}, seen by {self._peer_name(seen_by)})"
        return f"{what} with {who} failed: {rec['detail']} (seen by {self._peer_name(seen_by)})"

    def _culprit(self, records: dict[int, dict[str, Any]]) -> tuple[int, int] | None:
        """(culprit, the node that saw it) from every failing node's report.

        A node blocked behind the dead or hung one times out too (and gloo closes a pair
        on a timeout, so its neighbours see "connection closed"), but it reports; the
        dead or hung node does not. So: follow "r waited on p" from this node to a node
        that reported nothing; failing that (a cycle of mutual timeouts, a collective),
        the one node someone waited on that reported nothing; failing that, the one node
        that reported nothing at all."""
        r, visited = self.rank, set()
        while r in records and len(records[r]["peers"]) == 1 and r not in visited:
            visited.add(r)
            p = records[r]["peers"][0]
            if p not in records:
                return p, r
            r = p
        silent = {p for rec in records.values() for p in rec["peers"]} - set(records)
        if len(silent) != 1:
            silent = set(range(getattr(self, "world_size", self.num_nodes))) - set(records)
        if len(silent) != 1:
            return None
        (p,) = silent
        waited = [r for r, rec in records.items() if p in rec["peers"]]
        return p, min(waited or records)

    def _report(self, peers: list[int], exc: BaseException, what: str) -> PeerError:
        """Report what this node saw to the rendezvous store, give the others a moment
        to report theirs, and name the root cause."""
        rec = {"peers": list(peers), "kind": _classify(str(exc)), "what": what, "detail": _short(str(exc))}
        own = self._describe(rec, self.rank)
        store = self._failure_store()
        if store is None:
            return PeerError(own)
        prefix = f"{FAILURE_KEY}/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}"
        try:
            store.set(f"{prefix}/{self.rank}", json.dumps(rec))
            time.sleep(STORE_GRACE_S)
            records = {}
            for i in range(getattr(self, "world_size", self.num_nodes)):
                key = f"{prefix}/{i}"
                if store.check([key]):
                    records[i] = json.loads(store.get(key))
        except Exception:  # the store went down with its host
            return PeerError(own)
        found = self._culprit(records)
        if found is None:
            return PeerError(own)
        culprit, seen_by = found
        return PeerError(self._describe(records[seen_by] | {"peers": [culprit]}, seen_by))

    def _peer_error(self, peers: list[int], exc: BaseException, what: str) -> PeerError:
        return self._report(peers, exc, what)

    @contextlib.contextmanager
    def _collective(self, what: str) -> Iterator[None]:
        try:
            yield
        except PeerError:
            raise
        except Exception as e:
            raise self._report([], e, what) from None

    # ------------------------------------------------------------------- gossip
    def exchange(
        self, payload: Payload, compressor: Compressor, step: int, decoded: torch.Tensor | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> torch.Tensor:
        spec = compressor.spec()
        self._check_payload(payload, spec)
        plan = self._plan(step)
        names = payload.names()
        out_tensors = [payload.tensors[n].to(self.device).contiguous() for n in names]
        sends = [(t, dst) for dst in plan.destinations for t in out_tensors]
        inbox = [self._buffers(spec, src) for src in plan.sources]
        recvs = [(bufs[n], src) for src, bufs in zip(plan.sources, inbox) for n in names]
        what = f"exchange at step {step}"
        self._handshake(plan, spec, step, what)
        self._transfer(sends, recvs, what)
        for src, bufs in zip(plan.sources, inbox):
            why = compressor.check_received(Payload(dict(bufs)))
            if why is not None:
                raise PeerError(f"node {src} sent a malformed payload: {why} ({what}, seen by node {self.rank})")
        own = decoded if decoded is not None else compressor.decode(payload)
        received = compressor.decode(Payload.stack([Payload(dict(b)) for b in inbox])) if inbox else None
        return self._mix_rows(plan, own.to(self.device), received, dtype)

    def mix_scalars(self, values: torch.Tensor, step: int) -> torch.Tensor:
        plan = self._plan(step)
        v = values.to(self.device, torch.float32).contiguous()
        inbox = [torch.empty_like(v) for _ in plan.sources]
        self._transfer([(v, dst) for dst in plan.destinations], list(zip(inbox, plan.sources)),
                       f"push-sum weights at step {step}")
        return self._mix_rows(plan, v, torch.cat(inbox) if inbox else None)

    def ring_pass(self, chunk: torch.Tensor) -> torch.Tensor:
        c = chunk.to(self.device).contiguous()
        out = torch.empty_like(c)
        n = self.num_nodes
        self._transfer([(c, (self.rank + 1) % n)], [(out, (self.rank - 1) % n)], "ring pass")
        return out.to(chunk.device)

    def permute_pass(self, chunk: torch.Tensor, dst: "list[int] | tuple[int, ...]") -> torch.Tensor:
        """Send this node's ``chunk[1, ...]`` to node ``dst[rank]``; return what the node j
        with ``dst[j] == rank`` sent (a node mapped to itself keeps its chunk, no bytes)."""
        dst = [int(d) for d in dst]
        n = self.num_nodes
        if sorted(dst) != list(range(n)):
            raise ValueError(f"permute_pass needs a permutation of 0..{n - 1}, got {dst}")
        to, source = dst[self.rank], dst.index(self.rank)
        if to == self.rank:
            return chunk.clone()
        c = chunk.to(self.device).contiguous()
        out = torch.empty_like(c)
        self._transfer([(c, to)], [(out, source)], "permute pass")
        return out.to(chunk.device)

    # --------------------------------------------------------------- reductions
    def mean_over_nodes(self, x: torch.Tensor) -> torch.Tensor:
        y = x.sum(dim=0).to(self.device).contiguous()
        with self._collective("all_reduce"):
            dist.all_reduce(y, op=dist.ReduceOp.SUM)
        return (y / self.num_nodes).to(x.device)

    def gather_nodes(self, x: torch.Tensor) -> torch.Tensor:
        y = x.to(self.device).contiguous()
        parts = [torch.empty_like(y) for _ in range(dist.get_world_size())]
        with self._collective("all_gather"):
            dist.all_gather(parts, y)
        return torch.cat(parts, dim=0).to(x.device)

    def broadcast_object(self, obj: Any) -> Any:
        """``obj`` as node 0 has it, sent as JSON bytes in a uint8 tensor (never a pickle:
        no process unpickles what another sent). ``obj`` must be JSON data (tuples come
        back as lists) of at most MAX_BROADCAST_BYTES."""
        data = json.dumps(obj).encode("utf-8") if self.rank == 0 else b""
        if len(data) > MAX_BROADCAST_BYTES:
            raise ValueError(f"broadcast_object: {len(data)} bytes, at most {MAX_BROADCAST_BYTES}")
        size = torch.tensor([len(data)], dtype=torch.int64, device=self.device)
        with self._collective("broadcast"):
            dist.broadcast(size, src=0)
        n = int(size.item())
        if not 0 < n <= MAX_BROADCAST_BYTES:
            raise PeerError(f"node 0 announced {n} bytes of set-up data (at most {MAX_BROADCAST_BYTES}) "
                            f"(broadcast, seen by node {self.rank})")
        if self.rank == 0:
            buf = torch.frombuffer(bytearray(data), dtype=torch.uint8).to(self.device)
        else:
            buf = torch.empty(n, dtype=torch.uint8, device=self.device)
        with self._collective("broadcast"):
            dist.broadcast(buf, src=0)
        try:
            return json.loads(bytes(buf.cpu().numpy().tobytes()).decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise PeerError(f"node 0 sent set-up data that is not JSON (broadcast, seen by node {self.rank})") from None

    def barrier(self) -> None:
        with self._collective("barrier"):
            if self.backend == "nccl":
                dist.barrier(device_ids=[self.device.index])
            else:
                dist.barrier()

    def close(self) -> None:
        """Leave the process group (if this communicator joined it)."""
        if self._owns_group and not self._closed and dist.is_initialized():
            dist.destroy_process_group()
        self._closed = True


__all__ = ["DistributedCommunicator", "PeerError", "RankEnv", "torchrun_env", "init_process_group", "backend_for",
           "rank_device", "ENV_VARS", "FAILURE_KEY"]
