"""A run folder is data: no code inside it runs, however decent8 is started.

Crafted run folders (a real tiny run, copied) name code shipped inside them in every form
a module can take (``.py``, sourceless ``.pyc``, an extension-module name, a package, a
namespace package) or hold files named like the libraries decent8 imports. Each payload
appends to a marker file when imported: every case must leave it empty. In-process cases
cover the gate itself; the subprocess cases start ``decent8`` as the console script and as
``python -m decent8`` (``test_multiprocess.py``: ``decent8 launch`` and torchrun).
"""
from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import pytest

from decent8.errors import ConfigError
from decent8.plugins import import_library, load_factory, module_files, read_as_data, refuse_run_folder_code
from tests.helpers import call
from tests.security.crafted import (FORMS, STARTS, Case, copy_run, markers, name_code, plant, problems, run_all,
                                    set_top, shadow)

REFUSED = "never runs code from a run folder"


def _unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


@pytest.fixture
def marks(tmp_path) -> Path:
    d = tmp_path / "MARKERS"
    d.mkdir()
    return d


# ------------------------------------------------------------------ the gate itself
@pytest.mark.parametrize("form", FORMS)
def test_every_form_inside_a_run_folder_is_found_without_running_and_refused(tmp_path, marks, monkeypatch, form):
    run = tmp_path / "run"
    run.mkdir()
    name = _unique("d8pay")
    value = plant(run, name, form, marks / "m")
    mod = value.split(":")[0]
    files = module_files(mod, [str(run)])
    assert files and all(run in f.resolve().parents or f.resolve() == run for f in files), files
    read_as_data(run)
    with pytest.raises(ConfigError, match=REFUSED):
        refuse_run_folder_code(mod, "model", [str(run)])
    # on sys.path through a link from outside the folder: still inside it, still refused
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    target = next(p for p in run.iterdir() if p.name.split(".")[0] == name)
    (outside / target.name).symlink_to(target, target_is_directory=target.is_dir())
    monkeypatch.syspath_prepend(str(outside))
    with pytest.raises(ConfigError, match=REFUSED):
        load_factory(value, "model")
    # the working folder is the run folder: it is not on the path the import uses
    monkeypatch.chdir(run)
    with pytest.raises(ConfigError):
        load_factory(value, "model")
    assert markers(marks) == []


def test_a_dotted_name_is_checked_at_every_level_without_importing_the_parents(tmp_path, marks, monkeypatch):
    top = _unique("d8runs")
    run = tmp_path / top / "evil"
    run.mkdir(parents=True)
    (tmp_path / top / "__init__.py").write_text(f"open({str(marks / 'm')!r}, 'a').write('parent package ran\\n')\n")
    plant(run, "payload", "ns", marks / "m")
    read_as_data(run)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=REFUSED):
        load_factory(f"{top}.evil.payload.mod:make", "model")
    assert markers(marks) == []


def test_optional_libraries_never_come_from_the_working_folder_or_a_run_folder(tmp_path, marks, monkeypatch):
    run = tmp_path / "run"
    run.mkdir()
    lib = _unique("d8lib")
    (run / f"{lib}.py").write_text(f"open({str(marks / 'm')!r}, 'a').write('lib ran\\n')\n")
    read_as_data(run)
    monkeypatch.chdir(run)
    monkeypatch.syspath_prepend(str(run))   # even when put on sys.path by hand
    with pytest.raises(ImportError):
        import_library(lib)
    # reached from outside through a link: counted as not installed, with a one-line warning
    outside = tmp_path / "site"
    outside.mkdir()
    (outside / f"{lib}.py").symlink_to(run / f"{lib}.py")
    monkeypatch.syspath_prepend(str(outside))
    with pytest.warns(RuntimeWarning, match="inside the run folder"), pytest.raises(ImportError):
        import_library(lib)
    # a shadowing file in the working folder (not a run folder) is not taken either
    work = tmp_path / "work"
    work.mkdir()
    (work / "tensorboardX.py").write_text(f"open({str(marks / 'm')!r}, 'a').write('tensorboardX shadow\\n')\n")
    monkeypatch.chdir(work)
    monkeypatch.syspath_prepend(str(work))
    try:
        mod = import_library("tensorboardX")
        assert Path(mod.__file__).resolve().parent != work
    except ImportError:
        pass
    assert markers(marks) == []


# ------------------------------------------------------------------ resume, in this process
def _crafted(base: Path, parent: Path, form: str, marker: Path, dotted: bool, tag: str = "") -> tuple[Path, str]:
    """A copy of ``base`` under ``parent`` whose model is a payload inside it."""
    run = copy_run(base, parent / f"{'b' if dotted else 'a'}_{form}{tag}")
    value = plant(run, _unique("d8pay"), form, marker)
    if dotted:
        value = f"{parent.name}.{run.name}.{value}"
    name_code(run, "  name: mlp", value)
    return run, value


def test_resume_refuses_every_form_with_or_without_trust_or_naming_it_again(base_run, tmp_path, marks, monkeypatch):
    parent = tmp_path / _unique("d8runs")
    parent.mkdir()
    for form in FORMS:
        for dotted in (False, True):
            run, value = _crafted(base_run, parent, form, marks / "m", dotted)
            monkeypatch.chdir(tmp_path if dotted else run)
            where = f"{parent.name}/{run.name}" if dotted else "."
            variants = ([], ["--trust-config"], [f"model={value}"]) + ((["--check", "--trust-config"],) if form == "py" else ())
            for extra in variants:
                rc, _, lines = call(["train", "--resume", where, *extra])
                assert rc == 2 and len(lines) == 1 and REFUSED in lines[0], (form, dotted, extra, lines)
    assert markers(marks) == []


# ------------------------------------------------------------------ as the console script and python -m
@pytest.mark.slow   # 26 processes (about 40 s on 2 cores)
def test_crafted_run_folders_run_no_code_as_the_console_script_or_python_m(base_run, tmp_path, marks):
    m = marks / "m"
    cases: list[Case] = []
    for start, cmd in STARTS.items():
        parent = tmp_path / _unique("d8runs")
        parent.mkdir()
        for form in FORMS:   # the working folder is the run folder, trusted
            run, _ = _crafted(base_run, parent, form, m, dotted=False)
            cases.append(Case(f"{start} {form} trusted", [*cmd, "train", "--resume", ".", "--trust-config"], run,
                              needle=REFUSED))
        run, _ = _crafted(base_run, parent, "py", m, dotted=False, tag="_plain")
        cases.append(Case(f"{start} plain", [*cmd, "train", "--resume", "."], run, needle=REFUSED))
        run, value = _crafted(base_run, parent, "pyc", m, dotted=True)
        where = f"{parent.name}/{run.name}"
        cases.append(Case(f"{start} named again", [*cmd, "train", "--resume", where, f"model={value}"], tmp_path,
                          needle=REFUSED))
        cases.append(Case(f"{start} check trusted", [*cmd, "train", "--check", "--resume", where, "--trust-config"],
                          tmp_path, needle=REFUSED))
        # libraries shadowed in the working folder: a plain resume runs, imports none of them
        sh = copy_run(base_run, tmp_path / f"shadow_{start}")
        set_top(sh, "tensorboard", "auto")
        shadow(sh, m)
        cases.append(Case(f"{start} shadowed libraries", [*cmd, "train", "--resume", ".", "--quiet"], sh, codes=(0,)))
        tr = copy_run(base_run, tmp_path / f"tracking_{start}")
        set_top(tr, "tracking", "mlflow" if start == "console" else "wandb")
        shadow(tr, m)
        cases.append(Case(f"{start} shadowed tracking", [*cmd, "train", "--resume", ".", "--quiet"], tr, codes=(0, 2)))
        # cost, report, compare read the folder as data
        ev = copy_run(base_run, tmp_path / f"evil_{start}")
        value = plant(ev, _unique("d8pay"), "py", m)
        name_code(ev, "  name: mlp", value)
        name_code(ev, "  name: choco", value.replace(":make", ":Algo"))
        shadow(ev, m)
        cases += [Case(f"{start} cost", [*cmd, "cost", "."], ev, needle="not built-in"),
                  Case(f"{start} report", [*cmd, "report", "."], ev, codes=(0,)),
                  Case(f"{start} compare", [*cmd, "compare", ".", str(base_run), "--out", str(tmp_path / f"cmp_{start}")],
                       ev, codes=(0,))]
    results = run_all(cases)
    assert problems(results) == []
    assert markers(marks) == []
    assert (tmp_path / "cmp_console" / "report.md").is_file()
    for r in results:   # the report of one run went beside it, not into it
        if r.case.name.endswith("report"):
            shutil.rmtree(next(r.case.cwd.parent.glob("compare-*")), ignore_errors=True)
    assert not any(os.path.exists(tmp_path / f"evil_{s}" / "report.md") for s in STARTS)
