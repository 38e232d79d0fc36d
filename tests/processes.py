"""`decent8 train` as a real process without paying for the interpreter's imports each time.

A fresh ``python -m decent8`` spends ~6 s importing torch, sklearn and matplotlib before it
trains a step; tests that start many short runs (the signal test) fork them instead from a
multiprocessing *forkserver* that imported all of it once. Each run is still its own process
(its own pid, signal handlers, exit code and stderr), running the CLI's ``main`` from the
start; the forkserver never runs a torch kernel, so forking it is safe.
"""
from __future__ import annotations

import multiprocessing
import os
import sys
from pathlib import Path

#: what a `decent8 train` run imports (preloaded once by the forkserver)
PRELOAD = ["tests._train_imports"]

_ctx = None


def _context():
    global _ctx
    if _ctx is None:
        _ctx = multiprocessing.get_context("forkserver")
        _ctx.set_forkserver_preload(PRELOAD)
    return _ctx


def _decent8_process(argv: list[str], cwd: str, stderr_path: str) -> None:
    """The child: stdout to nowhere, stderr to a file, one thread, ``decent8 argv`` from ``cwd``."""
    import torch

    from decent8.cli.main import main

    os.chdir(cwd)
    out = os.open(os.devnull, os.O_WRONLY)
    err = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(out, 1)
    os.dup2(err, 2)
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)
    sys.exit(main(argv))


def start_decent8(argv: list[str], cwd: Path, stderr_path: Path):
    """Start ``decent8 argv`` in ``cwd`` as its own process; a started
    :class:`multiprocessing.Process` (``pid``, ``join``, ``exitcode``; its stderr lands in
    ``stderr_path``)."""
    p = _context().Process(target=_decent8_process, args=(list(argv), str(cwd), str(stderr_path)), daemon=True)
    p.start()
    return p
