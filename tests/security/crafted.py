"""Crafted run folders for the security suite: a real tiny run, copied, whose config names
code shipped inside the folder (each payload appends to a marker file when imported), or
that holds files shadowing libraries; and the ways decent8 is started, run side by side."""
from __future__ import annotations

import importlib.machinery
import os
import py_compile
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

#: the forms a module inside a run folder can take
FORMS = ("py", "pyc", "so", "pkg", "ns")
#: libraries decent8 imports (eagerly or lazily) that a file in the working folder could shadow
SHADOWED = ("torch", "numpy", "yaml", "matplotlib", "tensorboardX", "mlflow", "wandb", "transformers")
#: a tiny run: 2 nodes, 100 samples, one epoch
TINY = ["device=cpu", "model=mlp", "model.width=4", "nodes=2", "progress=false", "data.subset=100",
        "algorithm.consensus_rounds=2", "epochs=1", "tensorboard=false"]
BIN = Path(sys.executable).parent
#: how decent8 is started: the console script and ``python -m decent8``
STARTS = {"console": [str(BIN / "decent8")], "module": [sys.executable, "-m", "decent8"]}


def payload_source(marker: Path, label: str) -> str:
    return (f"open({str(marker)!r}, 'a').write({label!r} + '\\n')\n"
            "def make(*args, **kwargs):\n    raise SystemExit('payload factory called')\n"
            "class Algo:\n    state_buffers = 0\n")


def plant(folder: Path, name: str, form: str, marker: Path) -> str:
    """Module ``name`` in ``folder`` in the given form; returns the attribute path to name
    in a config (``name:make``, or ``name.mod:make`` for a namespace package)."""
    src = payload_source(marker, f"{form}:{folder}/{name}")
    if form == "py":
        (folder / f"{name}.py").write_text(src)
    elif form == "pyc":   # sourceless bytecode beside no source
        tmp = folder / f"_{name}_src.py"
        tmp.write_text(src)
        py_compile.compile(str(tmp), cfile=str(folder / f"{name}.pyc"), doraise=True)
        tmp.unlink()
    elif form == "so":    # an extension module's name: refused before the loader is asked
        (folder / f"{name}{importlib.machinery.EXTENSION_SUFFIXES[0]}").write_bytes(b"\x7fELF garbage" * 8)
    elif form == "pkg":
        (folder / name).mkdir()
        (folder / name / "__init__.py").write_text(src)
    elif form == "ns":    # a namespace package: a folder without __init__.py
        (folder / name).mkdir()
        (folder / name / "mod.py").write_text(src)
        return f"{name}.mod:make"
    else:
        raise ValueError(form)
    return f"{name}:make"


def name_code(run: Path, option_line: str, value: str) -> None:
    """Point the config's ``option_line`` (e.g. ``  name: mlp``) at ``value``."""
    cfg = run / "config.yaml"
    text = cfg.read_text()
    assert option_line in text, option_line
    cfg.write_text(text.replace(option_line, f"  name: {value}", 1))


def set_top(run: Path, key: str, value: str) -> None:
    """Set a top-level key of the run's config.yaml."""
    cfg = run / "config.yaml"
    lines = cfg.read_text().splitlines()
    lines = [f"{key}: {value}" if ln.startswith(f"{key}:") else ln for ln in lines]
    cfg.write_text("\n".join(lines) + "\n")


def copy_run(base: Path, dest: Path) -> Path:
    shutil.copytree(base, dest)
    return dest


def shadow(folder: Path, marker: Path, names=SHADOWED) -> None:
    for n in names:
        (folder / f"{n}.py").write_text(f"open({str(marker)!r}, 'a').write('shadow {n} in {folder}\\n')\n")


def markers(folder: Path) -> list[str]:
    return [ln for f in sorted(folder.glob("*")) for ln in f.read_text().splitlines()]


@dataclass
class Case:
    name: str
    argv: list[str]
    cwd: Path
    codes: tuple[int, ...] = (2,)
    needle: str | None = None      # in the one error line (None: no error line expected when rc == 0)
    env: dict[str, str] = field(default_factory=dict)
    timeout: float = 300.0


@dataclass
class Result:
    case: Case
    rc: int
    stdout: str
    stderr: str

    @property
    def err_lines(self) -> list[str]:
        return [ln for ln in self.stderr.splitlines() if ln.strip()]


def run_case(case: Case) -> Result:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", **case.env}
    p = subprocess.run(case.argv, cwd=case.cwd, capture_output=True, text=True, env=env, timeout=case.timeout)
    return Result(case, p.returncode, p.stdout, p.stderr)


def run_all(cases: list[Case], workers: int = 3) -> list[Result]:
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(run_case, cases))


def problems(results: list[Result]) -> list[str]:
    """What went wrong, one entry per case: an unexpected status, a traceback, or not
    exactly one error line carrying the needle."""
    bad = []
    for r in results:
        c = r.case
        why = []
        if r.rc not in c.codes:
            why.append(f"exit {r.rc}")
        if "Traceback" in r.stderr or "Traceback" in r.stdout:
            why.append("traceback")
        if r.rc != 0:
            errs = [ln for ln in r.err_lines if not ln.startswith("decent8: warning:")]
            if len(errs) != 1 or not errs[0].startswith("decent8: error: "):
                why.append(f"{len(errs)} error lines")
            elif c.needle is not None and c.needle not in errs[0]:
                why.append(f"no {c.needle!r}")
        if why:
            bad.append(f"{c.name}: {', '.join(why)}: {r.stderr[-600:]!r}")
    return bad
