"""decent8's C libraries (the 8-bit quantizer's loop, the top-k selection, the dither draws) are loaded from the
user's cache only where nobody else may write them, however decent8 is started (console
script, ``python -m decent8``, ``decent8 launch`` and torchrun, whose ranks load them too).

A library planted at the cached path announces itself when loaded (a constructor appends to a
marker file). In a folder anyone may write it must never be loaded: the run builds its own in a
private folder. In the user's own private folder it is the user's file and is loaded — the
control that shows the check is what keeps the first case out — and then rejected by the
load-time probe (it does not compute what PyTorch computes), so the run falls back to the torch
operators, saying so in one line."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from decent8 import dither_kernel
from decent8.compression import topk_kernel
from decent8.quant import cpu_kernel
from tests.security.crafted import BIN, STARTS

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler to build the planted library")

PAYLOAD = r"""
#include <stdio.h>
__attribute__((constructor)) static void announce(void) {
    FILE *f = fopen("%s", "a");
    if (f) { fputs("loaded\n", f); fclose(f); }
}
"""


def payload(marker, built) -> str:
    """A library that announces itself and exports every function of ``built`` (doing nothing)."""
    return PAYLOAD % marker + "".join(f"int {name}(void) {{ return 0; }}\n" for name in built.functions)

#: library → (its exported function, the run that uses it, the probe's words when it rejects it)
LIBRARIES = {
    "quantizer": (cpu_kernel.LIBRARY, ["precision=int8"], "does not round as PyTorch does"),
    "topk": (topk_kernel.LIBRARY, [], "does not select what torch.topk selects"),
    "dither": (dither_kernel.LIBRARY, ["precision=int8"], "does not draw what torch.Generator draws"),
}


@pytest.mark.parametrize("library", list(LIBRARIES))
@pytest.mark.parametrize("start", list(STARTS))
@pytest.mark.parametrize("writable_by_others", [True, False], ids=["shared_folder", "private_folder"])
def test_a_planted_library_loads_only_from_a_private_folder(tmp_path, monkeypatch, library, start,
                                                            writable_by_others):
    built, options, rejected = LIBRARIES[library]
    cache, marker = tmp_path / "cache", tmp_path / "loaded.txt"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    lib = built.library_path()
    lib.parent.mkdir(parents=True)
    src = tmp_path / "payload.c"
    src.write_text(payload(marker, built))
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    lib.parent.chmod(0o777 if writable_by_others else 0o755)
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([*STARTS[start], "train", *options, "nodes=2", "epochs=1", "progress=false",
                           "checkpoint=false", "tensorboard=false", f"out_dir={tmp_path / 'runs'}"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    if writable_by_others:
        assert not marker.exists()
        assert "no C loop" not in done.stderr        # it built and used its own
    else:
        assert marker.read_text() == "loaded\n"     # the user's own file is loaded ...
        assert rejected in done.stderr              # ... and rejected by the probe


#: the multi-process starts: two ranks, each loading the libraries
RANKS = {"launch": [str(BIN / "decent8"), "launch", "--nodes", "2"],
         "torchrun": [sys.executable, "-P", "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                      "-m", "decent8", "train"]}


@pytest.mark.slow   # two ranks per run
@pytest.mark.parametrize("start", list(RANKS))
@pytest.mark.parametrize("writable_by_others", [True, False], ids=["shared_folder", "private_folder"])
def test_planted_libraries_load_only_from_a_private_folder_in_every_rank(tmp_path, monkeypatch, start,
                                                                         writable_by_others):
    """All three libraries planted at once; an 8-bit run of two ranks loads each of them (the
    quantizer, the dither draws, the top-k of the MLP's large layer)."""
    cache, marker = tmp_path / "cache", tmp_path / "loaded.txt"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    for built, _, _ in LIBRARIES.values():
        lib = built.library_path()
        lib.parent.mkdir(parents=True, exist_ok=True)
        src = tmp_path / f"{built.name}.c"
        src.write_text(payload(marker, built))
        subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
        lib.parent.chmod(0o777 if writable_by_others else 0o755)
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([*RANKS[start], "precision=int8", "device=cpu", "nodes=2", "epochs=1", "progress=false",
                           "data.subset=200", "checkpoint=false", "tensorboard=false", f"out_dir={tmp_path / 'runs'}"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    if writable_by_others:
        assert not marker.exists()
    else:
        loads = marker.read_text().splitlines()
        assert set(loads) == {"loaded"} and len(loads) >= 2 * len(LIBRARIES)   # each rank loads each one ...
        for _, _, rejected in LIBRARIES.values():
            assert rejected in done.stderr                                  # ... and rejects it
