"""The run folder: config.yaml, metrics.jsonl, summary.json, checkpoint.pt, PNG curves.

Every file is written atomically (temporary file + ``os.replace``), so a killed run
never leaves a half-written file; the folder itself is created only after the whole
config has been validated, and removed again if writing its first files fails.

Checkpoints are loaded with ``torch.load(weights_only=True)``: a checkpoint holds
tensors, numbers, strings and containers only, and a crafted ``checkpoint.pt`` cannot
run code on ``--resume``. Everything read back from a run folder (config, metrics,
checkpoint) is checked; damage gives one line naming the file, never a traceback.
"""
from __future__ import annotations

import json
import math
import os
import secrets
import re
import warnings
from pathlib import Path
from typing import Any

import torch

from ..atomic import atomic_torch_save, atomic_write_text
from ..errors import ConfigError, first_line
from ..config import _yaml_loader

CONFIG = "config.yaml"
METRICS = "metrics.jsonl"
SUMMARY = "summary.json"
CHECKPOINT = "checkpoint.pt"
#: every file name decent8 writes into a run folder (checkpoint-rank<r>[.prev].pt too)
RUN_FILES = (CONFIG, METRICS, SUMMARY, CHECKPOINT, "curves.png", "time.png", "partition.csv", "partition.png",
             "curves.pdf", "time.pdf", "partition.pdf",      # each figure's vector copy (decent8.figstyle.save)
             "execution.json")
#: the one sub-folder decent8 writes (TensorBoard event files, see :mod:`decent8.train.tb_log`)
EVENTS_DIR = "tensorboard"
_EVENTS_FILE = re.compile(r"^events\.out\.tfevents\.[^/]+$")
_RUN_FILE = re.compile(r"^(?:" + "|".join(re.escape(f) for f in RUN_FILES) + r"|checkpoint-rank\d+(?:\.prev)?\.pt)$")
#: the temporary files of :func:`decent8.atomic.atomic_path` (``.<name>.<random>.tmp``)
_TMP_FILE = re.compile(r"^\.(?P<name>.+)\.[A-Za-z0-9_]+\.tmp$")
#: longest run name in bytes (file systems allow 255 per path component)
MAX_NAME_BYTES = 200


def check_run_name(name: object, option: str = "name") -> str:
    """A run (or sweep) name is one path component: not empty or blank, not ``.``/``..``,
    no ``/`` or ``\\``, no control characters, at most MAX_NAME_BYTES bytes."""
    if not isinstance(name, str):
        raise ConfigError(option, f"must be a folder name (text), got {name!r}")
    allowed = "one folder name under out_dir (letters, digits, -_.+=,@ …; no '/', not '.' or '..')"
    if not name.strip():
        raise ConfigError(option, f"must be {allowed}, got {name!r}")
    if name in (".", "..") or "/" in name or "\\" in name or os.sep in name or (os.altsep and os.altsep in name):
        raise ConfigError(option, f"must be {allowed}, got {name!r}")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in name) or name != name.strip():
        raise ConfigError(option, f"must be {allowed} without control characters or surrounding blanks, got {name!r}")
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        raise ConfigError(option, f"must be valid text, got {name!r}") from None
    if size > MAX_NAME_BYTES:
        raise ConfigError(option, f"must be at most {MAX_NAME_BYTES} bytes long, got {size}")
    return name


def is_run_file(name: str) -> bool:
    """True for a file name decent8 writes into a run folder (or a temporary one of those)."""
    m = _TMP_FILE.match(name)
    return bool(_RUN_FILE.match(m.group("name") if m else name))


def is_events_dir(entry: os.DirEntry) -> bool:
    """True for the ``tensorboard/`` folder decent8 writes: event files only."""
    if entry.name != EVENTS_DIR or not entry.is_dir(follow_symlinks=False):
        return False
    return all(e.is_file(follow_symlinks=False) and _EVENTS_FILE.match(e.name) for e in os.scandir(entry.path))


def foreign_entries(path: Path) -> list[str]:
    """The entries of a folder that decent8 did not write (other sub-folders, other files)."""
    out = []
    for e in sorted(os.scandir(path), key=lambda e: e.name):
        if not ((e.is_file(follow_symlinks=False) and is_run_file(e.name)) or is_events_dir(e)):
            out.append(e.name + ("/" if e.is_dir(follow_symlinks=False) else ""))
    return out


def remove_own_folder(path: Path) -> None:
    """Remove a run folder holding only decent8's own files (the caller checked that with
    :func:`foreign_entries`): its files, its ``tensorboard/`` event files, then itself."""
    for e in os.scandir(path):
        if is_events_dir(e):
            for f in os.scandir(e.path):
                os.unlink(f.path)
            os.rmdir(e.path)
        else:
            os.unlink(e.path)
    path.rmdir()


#: a temporary file untouched this long is a killed writer's (a live one is renamed within seconds)
STALE_AFTER_S = 600.0


def remove_stale_temporaries(path: str | os.PathLike, older_than_s: float = 0.0) -> list[str]:
    """Delete the temporary files of run files a killed process left in ``path``
    (``.<run file>.<random>.tmp``, e.g. ``.curves.png.k2j3.tmp``); their names.
    ``older_than_s`` spares younger ones: a reader of a folder that may be written right
    now (``report`` during a sweep) must not delete a live writer's file."""
    import time

    now, gone = time.time(), []
    try:
        entries = list(os.scandir(path))
    except OSError:
        return gone
    for e in entries:
        m = _TMP_FILE.match(e.name)
        if m and _RUN_FILE.match(m.group("name")) and e.is_file(follow_symlinks=False):
            try:
                if older_than_s and now - e.stat(follow_symlinks=False).st_mtime < older_than_s:
                    continue
                os.unlink(e.path)
                gone.append(e.name)
            except OSError:
                pass
    return gone


def check_creatable(path: Path) -> None:
    """Would :meth:`RunDir.create` succeed? (Nothing is created.)"""
    if path.exists() or path.is_symlink():
        if not path.is_dir():
            raise ConfigError("name", f"{str(path)!r} exists and is not a folder")
        if any(path.iterdir()):
            raise ConfigError("name", f"run folder {str(path)!r} already exists; pick another name or resume it "
                                      f"with --resume {path}")
        return
    parent = path.parent
    while not parent.exists():
        if parent.is_symlink():
            raise ConfigError("out_dir", f"{str(parent)!r} is a broken link")
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigError("out_dir", f"{str(parent)!r} is a file, not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError("out_dir", f"cannot create folders in {str(parent)!r} (permission denied)")


def finite_json(obj: Any) -> Any:
    """``obj`` with every NaN / infinity replaced by None (strict JSON has no NaN)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: finite_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_json(v) for v in obj]
    return obj


def _json_line(row: dict[str, Any]) -> str:
    return json.dumps(finite_json(row), allow_nan=False)


class RunDir:
    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    @classmethod
    def create(cls, path: str | os.PathLike) -> "RunDir":
        """Create the folder atomically (``mkdir`` without ``exist_ok``): of two processes
        asking for the same name, exactly one gets it; an existing folder is refused."""
        p = Path(path)
        check_creatable(p)
        if p.exists() and p.is_dir():  # check_creatable allows an empty folder; a run never shares one
            raise ConfigError("name", f"run folder {str(p)!r} already exists; pick another name or resume it with "
                                      f"--resume {p}")
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.mkdir()
        except FileExistsError:
            raise ConfigError("name", f"run folder {str(p)!r} already exists; pick another name or resume it with "
                                      f"--resume {p}") from None
        except OSError as e:
            raise ConfigError("out_dir", f"cannot create {str(p)!r}: {e.strerror or e}") from None
        run = cls(p)
        run._created = True
        return run

    @classmethod
    def create_unique(cls, parent: str | os.PathLike, stem: str, attempts: int = 20) -> "RunDir":
        """A new folder ``parent/stem-XXXXXX`` with a random suffix, retried on a collision."""
        for _ in range(attempts):
            p = Path(parent) / f"{stem}-{secrets.token_hex(3)}"
            if p.exists():
                continue
            try:
                return cls.create(p)
            except ConfigError as e:
                if e.option != "name":
                    raise
        raise ConfigError("name", f"could not create a new run folder under {str(parent)!r} after {attempts} attempts")

    def remove_new(self) -> None:
        """Undo :meth:`create` after a failure: remove the folder if this process made it
        and it holds only decent8's own files."""
        if getattr(self, "_created", False) and self.path.is_dir() and not foreign_entries(self.path):
            remove_own_folder(self.path)

    @classmethod
    def existing(cls, path: str | os.PathLike, clean: bool = True) -> "RunDir":
        p = Path(path)
        if not (p / CONFIG).is_file():
            raise ConfigError("resume", f"{str(p)!r} is not a run folder (no {CONFIG} in it)")
        run = cls(p)
        if clean:
            run.remove_stale_temporaries()
        return run

    def remove_stale_temporaries(self) -> list[str]:
        return remove_stale_temporaries(self.path)

    def file(self, name: str) -> Path:
        return self.path / name

    def write_config(self, text: str) -> None:
        atomic_write_text(self.file(CONFIG), text)

    def read_config(self) -> dict[str, Any]:
        """config.yaml as a mapping (one-line ConfigError when it is damaged)."""
        import yaml


        f = self.file(CONFIG)
        try:
            raw = yaml.load(f.read_bytes().decode("utf-8"), Loader=_yaml_loader())
        except (UnicodeDecodeError, yaml.YAMLError, RecursionError, OSError) as e:
            raise ConfigError("resume", f"{f} is damaged ({type(e).__name__}); it cannot be resumed") from None
        if not isinstance(raw, dict):
            raise ConfigError("resume", f"{f} is damaged (not a mapping of options); it cannot be resumed")
        return raw

    def read_metrics(self) -> list[dict[str, Any]]:
        """The rows of metrics.jsonl; a damaged line (a torn or edited file) and everything
        after it is dropped, since the rows are rewritten from the checkpoint's epoch."""
        f = self.file(METRICS)
        if not f.exists():
            return []
        rows: list[dict[str, Any]] = []
        try:
            lines = f.read_bytes().decode("utf-8", "replace").splitlines()
        except OSError:
            return rows
        for line in lines:
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError:
                break
            if not isinstance(row, dict) or not isinstance(row.get("epoch"), (int, float)) \
                    or isinstance(row.get("epoch"), bool):
                break
            rows.append(row)
        return rows

    def write_metrics(self, rows: list[dict[str, Any]]) -> None:
        atomic_write_text(self.file(METRICS), "".join(_json_line(r) + "\n" for r in rows))

    def write_summary(self, summary: dict[str, Any]) -> None:
        atomic_write_text(self.file(SUMMARY), json.dumps(finite_json(summary), indent=2, allow_nan=False) + "\n")

    def save_checkpoint(self, state: dict[str, Any], name: str = CHECKPOINT) -> None:
        atomic_torch_save(state, self.file(name))

    def load_checkpoint(self, name: str = CHECKPOINT) -> dict[str, Any] | None:
        """A checkpoint, loaded with ``weights_only=True`` (no code runs) and checked for
        the keys a decent8 checkpoint has; None if the file does not exist."""
        f = self.file(name)
        if not f.exists():
            return None
        try:
            with warnings.catch_warnings():  # torch warns about odd pickle protocols of crafted files
                warnings.simplefilter("ignore")
                state = torch.load(f, map_location="cpu", weights_only=True)
        except Exception as e:  # UnpicklingError (also: a forbidden global), EOFError, RuntimeError (zip)
            reason = first_line(e, 160)
            raise ConfigError("resume", f"{f} is not a readable decent8 checkpoint ({type(e).__name__}: "
                                        f"{reason})") from None
        check_checkpoint(state, f)
        return state


def check_checkpoint(state: Any, f: Path) -> None:
    """The structure every decent8 checkpoint has (the engine checks the tensors' shapes)."""
    def bad(why: str) -> ConfigError:
        return ConfigError("resume", f"{f} is not a valid decent8 checkpoint ({why})")

    if not isinstance(state, dict):
        raise bad(f"holds a {type(state).__name__}, not a dict")
    epoch = state.get("epoch")
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise bad(f"epoch is {epoch!r}")
    wall = state.get("wall_time_s")
    if isinstance(wall, bool) or not isinstance(wall, (int, float)) or not math.isfinite(wall):
        raise bad(f"wall_time_s is {wall!r}")
    engine = state.get("engine")
    if not isinstance(engine, dict):
        raise bad("no engine state")
    if not isinstance(engine.get("z"), torch.Tensor) or not isinstance(engine.get("step"), int):
        raise bad("the engine state has no parameters or step")
    for key in ("algorithm", "optimizer"):
        part = engine.get(key)
        if not isinstance(part, dict) or not all(isinstance(v, torch.Tensor) for v in part.values()):
            raise bad(f"the engine's {key} state is not a set of tensors")
    if not isinstance(engine.get("bytes_sent"), torch.Tensor) or not isinstance(engine.get("generators", []), list):
        raise bad("the engine state has no byte counts or generator states")
