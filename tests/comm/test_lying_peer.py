"""A lying peer: after an honest size header, one rank sends a short, long, empty or
mistyped message. Every rank (the distributed backend, one node per rank, and node blocks
on ``dist.ranks=2``) exits non-zero with one line, no traceback: the receiver names the
liar, the liar names the receiver that hung up on it."""
from __future__ import annotations

import os
import sys
import time

import pytest
import torch

from decent8.cli.launch_cmd import LocalNodes
from tests._gloo import wait_nodes

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not torch.distributed.is_available(), reason="needs torch.distributed")]

#: Rank 1 runs `decent8 train` with its messages changed after their size header was sent:
#: `short`, `long` and `empty` change the bytes on the wire (the frame), `mistyped` sends the
#: same bytes as another dtype.
LYING_RANK = '''
import os, sys
import torch
from decent8.comm.distributed import communicator as C

mode = sys.argv[1]
PROTOCOL = ("message sizes", "payload header")

if os.environ["RANK"] == "1":
    wire, post = C.DistributedCommunicator._wire, C.DistributedCommunicator._post

    def lying_wire(self, sends, recvs, what):
        if not what.startswith(PROTOCOL) and mode != "mistyped":
            sends = [({"short": t[: t.numel() // 2], "empty": t[:0],
                       "long": torch.cat([t, torch.full((24,), 7, dtype=torch.uint8)])}[mode], p) for t, p in sends]
        return wire(self, sends, recvs, what)

    def lying_post(self, sends, recvs, what, count=True):
        if not what.startswith(PROTOCOL) and mode == "mistyped":
            other = {torch.float32: torch.int32, torch.int32: torch.float32, torch.uint8: torch.int8}
            sends = [(t.view(other.get(t.dtype, torch.uint8)), p) for t, p in sends]
        return post(self, sends, recvs, what, count)

    C.DistributedCommunicator._wire = lying_wire
    C.DistributedCommunicator._post = lying_post

from decent8.cli.main import main
sys.exit(main(sys.argv[2:]))
'''

CONFIG = ["device=cpu", "data.name=digits", "data.subset=0.2", "model=mlp", "model.width=4", "topology=ring",
          "epochs=1", "algorithm.consensus_rounds=0", "progress=false", "tensorboard=false", "dist_timeout_s=20",
          "backend=distributed", "--quiet"]
MODES = ("short", "long", "empty", "mistyped")


CASES = [(ranks, mode) for ranks in ("distributed", "blocks") for mode in MODES]


@pytest.fixture(scope="module")
def lying_runs(tmp_path_factory):
    """Every case at once (their start-up overlaps): exit codes and logs per case."""
    root = tmp_path_factory.mktemp("lying")
    script = root / "lying_rank.py"
    script.write_text(LYING_RANK)
    groups = {}
    for ranks, mode in CASES:
        logs = root / f"logs-{ranks}-{mode}"
        logs.mkdir()
        nodes = ["nodes=2"] if ranks == "distributed" else ["nodes=4", "dist.ranks=2"]
        groups[(ranks, mode)] = LocalNodes(2, [sys.executable, str(script), mode, "train", *CONFIG, *nodes,
                                               f"out_dir={root}", f"name=run-{ranks}-{mode}"], log_dir=logs,
                                           env={**os.environ, "OMP_NUM_THREADS": "1"})
    deadline = time.monotonic() + 300
    out = {}
    for case, group in groups.items():
        codes = wait_nodes(group, 300, f"{case[0]} ranks, {case[1]} message", deadline=deadline, poll_s=0.2)
        out[case] = codes, [(root / f"logs-{case[0]}-{case[1]}" / f"node{r}.log").read_text() for r in range(2)]
    return out


@pytest.mark.parametrize("ranks,mode", CASES)
def test_a_lying_peer_stops_every_rank_with_one_line(lying_runs, ranks, mode):
    codes, texts = lying_runs[(ranks, mode)]
    liar = "node 1" if ranks == "distributed" else "rank 1 (nodes 2–3)"
    for r, (code, text) in enumerate(zip(codes, texts)):
        lines = [ln for ln in text.splitlines() if ln.strip()]
        assert code not in (0, None) and len(lines) == 1 and lines[0].startswith("decent8: error: "), (r, code, text)
        assert "Traceback" not in text
    assert liar in texts[0] and {"short": "shorter", "empty": "shorter", "long": "longer",
                                 "mistyped": "another dtype"}[mode] in texts[0], texts[0]
