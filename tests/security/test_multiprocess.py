"""The import gate under ``decent8 launch`` (ranks start as ``python -P -m decent8``) and under
torchrun (``python -m torch.distributed.run … -m decent8 train``): crafted run folders run no
code, trusted or not, named again or not; library files in the working folder shadow nothing.

torchrun is itself started with ``-P`` here: without it ``python -m torch.distributed.run``
would import a ``torch.py`` of the working folder before any decent8 code runs.
"""
from __future__ import annotations

import sys

import pytest

from tests.security.crafted import (BIN, TINY, Case, copy_run, markers, name_code, plant, problems, run_all, set_top,
                                    shadow)

REFUSED = "never runs code from a run folder"
TORCHRUN = [sys.executable, "-P", "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m",
            "decent8", "train"]


@pytest.fixture(scope="module")
def dist_run(tmp_path_factory):
    """A finished 2-node run of the distributed backend, made by `decent8 launch`."""
    root = tmp_path_factory.mktemp("dist")
    r = run_all([Case("make", [str(BIN / "decent8"), "launch", "--nodes", "2", *TINY, f"out_dir={root}", "name=dist",
                               "checkpoint=true", "--quiet"], root, codes=(0,))])[0]
    assert r.rc == 0, r.stderr
    return root / "dist"


@pytest.mark.slow   # about 8 processes of 2 ranks each
def test_launch_and_torchrun_run_no_code_from_a_run_folder(dist_run, tmp_path):
    marks = tmp_path / "MARKERS"
    marks.mkdir()
    m = marks / "m"
    runs = tmp_path / "d8runs_multi"
    runs.mkdir()
    cases = []
    for start, cmd in (("launch", [str(BIN / "decent8"), "launch", "--nodes", "2"]), ("torchrun", TORCHRUN)):
        ev = copy_run(dist_run, runs / f"evil_{start}")
        value = plant(ev, "payload", "pyc" if start == "launch" else "ns", m)
        name_code(ev, "  name: mlp", value)
        shadow(ev, m)
        ev2 = copy_run(dist_run, runs / f"evil2_{start}")   # named again from the parent folder
        named = f"model={runs.name}.{ev2.name}.{plant(ev2, 'payload', 'so' if start == 'launch' else 'pkg', m)}"
        name_code(ev2, "  name: mlp", named.split("=", 1)[1])
        sh = copy_run(dist_run, tmp_path / f"shadow_{start}")
        set_top(sh, "tensorboard", "auto")
        shadow(sh, m)
        # torchrun reports a failed worker in its own words (exit 1); the worker's line is decent8's
        refused = (2,) if start == "launch" else (1,)
        cases += [Case(f"{start} trusted", [*cmd, "--resume", ".", "--trust-config"], ev, codes=refused),
                  Case(f"{start} plain", [*cmd, "--resume", "."], ev, codes=refused),
                  Case(f"{start} named again", [*cmd, "--resume", f"{runs.name}/{ev2.name}", named], tmp_path,
                       codes=refused),
                  Case(f"{start} shadowed libraries", [*cmd, "--resume", ".", "--quiet"], sh, codes=(0,))]
    results = run_all(cases, workers=2)
    launch = [r for r in results if r.case.name.startswith("launch")]
    assert problems(launch) == []
    for r in results:
        assert r.rc in r.case.codes, (r.case.name, r.rc, r.stderr[-2000:])
        if r.rc:
            assert REFUSED in r.stderr, (r.case.name, r.stderr[-2000:])
    assert markers(marks) == []
