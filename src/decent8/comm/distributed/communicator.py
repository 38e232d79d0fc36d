"""The communicator of the node this process runs: gossip by peer-to-peer sends (every
message checked against the headers of :mod:`.wire` before it is read), reductions by
collectives, failures named by :class:`.diagnosis.PeerDiagnosis`."""
from __future__ import annotations

import datetime
import json
import os
import time
from dataclasses import dataclass
from typing import Any, Sequence

import torch
import torch.distributed as dist

from ...compression.base import Compressor
from ...compression.payload import Payload
from ...errors import ConfigError
from ...topology import Topology
from ..base import Communicator
from .diagnosis import PeerDiagnosis, PeerError
from .rendezvous import init_process_group, rank_device, torchrun_env
from .wire import HEADER_MAGIC, MAX_BROADCAST_BYTES, _describe_sizes, _size_header, frame, receive_buffer, spec_header, unframe


@dataclass
class _Plan:
    """One phase of the topology as seen from this node."""

    sources: list[int]        # in-neighbours (self excluded), ascending
    destinations: list[int]   # out-neighbours (self excluded), ascending
    nodes: list[int]          # sources and self, ascending: the order of the mixing sum
    self_pos: int             # position of this node in ``nodes``
    weights: torch.Tensor     # float32 [1, len(nodes)]: W[i, nodes]
    weights64: torch.Tensor   # the same in float64 (exchange(..., dtype=torch.float64))


class DistributedCommunicator(PeerDiagnosis, Communicator):
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
        self.world_size = int(dist.get_world_size())
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

    spec_header = staticmethod(spec_header)

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
        """Send and receive every message framed (:func:`.wire.frame`: its bytes, then a
        trailer of bytes, dtype and shape), each received into a fresh buffer with room to
        spare and checked against what this node expects before it is copied into its
        tensor (:func:`.wire.unframe`): a short, long or mistyped message from a peer is
        named in one line and never read. Counts the sent bytes (bodies only: headers and
        trailers are protocol)."""
        if not sends and not recvs:
            return
        if count:
            for t, _ in sends:
                self.bytes_sent += float(t.numel() * t.element_size())
        raw_in = [(receive_buffer(t, self.backend), peer) for t, peer in recvs]
        self._wire([(frame(t), peer) for t, peer in sends], raw_in, what)
        for (raw, peer), (t, _) in zip(raw_in, recvs):
            why = unframe(raw, t)
            if why is not None:
                raise self._malformed(peer, f"sent {why}", what)

    def _wire(self, sends: Sequence[tuple[torch.Tensor, int]], recvs: Sequence[tuple[torch.Tensor, int]],
              what: str) -> None:
        """Post all sends and receives at once, wait (bounded).

        NCCL gets one coalesced ``batch_isend_irecv``; gloo (which runs a batch as
        separate isend/irecv calls anyway) gets them posted one by one, so a failure
        while posting names its peer."""
        ops = [(dist.isend, t, peer) for t, peer in sends] + [(dist.irecv, t, peer) for t, peer in recvs]
        if not ops:
            return
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

    # ------------------------------------------------------------------- gossip
    def _exchange(
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

    def _mix_scalars(self, values: torch.Tensor, step: int) -> torch.Tensor:
        plan = self._plan(step)
        v = values.to(self.device, torch.float32).contiguous()
        inbox = [torch.empty_like(v) for _ in plan.sources]
        self._transfer([(v, dst) for dst in plan.destinations], list(zip(inbox, plan.sources)),
                       f"push-sum weights at step {step}")
        return self._mix_rows(plan, v, torch.cat(inbox) if inbox else None)

    def _ring_pass(self, chunk: torch.Tensor) -> torch.Tensor:
        c = chunk.to(self.device).contiguous()
        out = torch.empty_like(c)
        n = self.num_nodes
        self._transfer([(c, (self.rank + 1) % n)], [(out, (self.rank - 1) % n)], "ring pass")
        return out.to(chunk.device)

    def _permute_pass(self, chunk: torch.Tensor, dst: "list[int] | tuple[int, ...]") -> torch.Tensor:
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


