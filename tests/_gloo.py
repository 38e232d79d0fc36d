"""Shared by the multi-process tests: waiting for a :class:`decent8.cli.launch_cmd.LocalNodes`
group of gloo ranks (one clock for the whole group; a group that overruns it is stopped)."""
from __future__ import annotations

import time

import pytest


def wait_nodes(group, limit_s: float, what: str = "nodes", *, deadline: float | None = None,
               poll_s: float = 0.05) -> list[int]:
    """Wait for every rank of ``group``; their exit codes. Past ``limit_s`` (or the absolute
    ``deadline`` on ``time.monotonic()``, shared between groups started together) the group is
    stopped and the test fails naming ``what``."""
    if deadline is None:
        deadline = time.monotonic() + limit_s
    while any(c is None for c in group.poll()):
        if time.monotonic() > deadline:
            group.stop()
            pytest.fail(f"{what} still running after {limit_s} s: {group.poll()}")
        time.sleep(poll_s)
    group.close()
    return list(group.poll())
