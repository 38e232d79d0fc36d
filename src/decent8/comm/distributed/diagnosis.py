"""Naming the peer that failed: every failing process reports what it saw ("I waited on
node p") to the rendezvous store; following those reports to the one node that reported
nothing names the root cause (:class:`PeerDiagnosis`, mixed into the communicator)."""
from __future__ import annotations

import contextlib
import datetime
import json
import os
import re
import time
from typing import Any, Iterator

import torch.distributed as dist

from ...errors import TrainingError

#: Store key prefix under which a failing process reports what it saw (per rank).
FAILURE_KEY = "decent8/failure"
#: After a failure, how long a process waits for the others' reports (also the store's timeout).
STORE_GRACE_S = 2.0


class PeerError(TrainingError):
    """Another node died, hung or closed its connection; the message names it
    (the CLI prints it as one line and exits with status 1)."""


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


class PeerDiagnosis:
    """Failure reports of the node this process runs; needs ``rank``, ``num_nodes`` and
    ``timeout_s`` from the class it is mixed into."""

    rank: int
    timeout_s: float

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
        """How a failure report names process ``peer`` (None: the prefix of a list of them);
        the node-block communicator names ranks with their nodes."""
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

    def _malformed(self, peer: int, why: str, what: str) -> PeerError:
        """The error for a message from ``peer`` that is not what was announced, reported to
        the store first (so that the nodes that lose contact with this one name ``peer``)."""
        store = self._failure_store()
        if store is not None:
            prefix = f"{FAILURE_KEY}/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}"
            try:
                store.set(f"{prefix}/{self.rank}", json.dumps({"peers": [peer], "kind": "malformed", "what": what,
                                                                "detail": why}))
            except Exception:  # the store went down with its host
                pass
        return PeerError(f"{self._peer_name(peer)} {why} ({what}, seen by {self._peer_name(self.rank)})")

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
