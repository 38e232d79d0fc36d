"""C loops built at run time with the system compiler and called through ``ctypes``.

A few elementwise and per-row passes (the 8-bit quantizer's Q_b, SPEC §5; the top-k
selection, SPEC §4) are memory-bound loops that eager PyTorch runs as several kernels. Each
is written here as one C loop, compiled once per user, machine and source
(``cc -O3 -shared -fno-fast-math -ffp-contract=off``, AVX2 where the CPU has it; about half
a second) and cached under ``$XDG_CACHE_HOME/decent8/kernels``. A call costs a few
microseconds and releases the GIL; there are no compiler guards (unlike a ``torch.compile``
region on the CPU, ~40 µs a call).

Trust: a cached library is loaded only if it and its folder belong to the user and nobody
else may write them; otherwise (or where the cache cannot be written, or holds a library
that does not load) it is built afresh in a private temporary folder, removed once loaded.
Every library is checked by its owner's probe when loaded (the same values as the eager
operators, bit for bit, or the same selection); a library that fails it is not used. Where
no C compiler works, :meth:`CLibrary.available` is False and the caller runs its eager
operators (the same values, slower).
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import warnings
from pathlib import Path
from typing import Any, Callable

_FLAGS = ["-O3", "-shared", "-fPIC", "-fno-fast-math", "-ffp-contract=off", "-fno-math-errno"]


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def _isa_flags() -> list[str]:
    """AVX2 (8 floats a vector, a rounding instruction) where the CPU has it; SSE4.1 else on
    x86-64. The results do not depend on the vector width, only the speed."""
    flags = _cpu_flags()
    if "avx2" in flags:
        return ["-mavx2"]
    if "sse4_1" in flags:
        return ["-msse4.1"]
    return []


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/decent8/kernels`` (``~/.cache`` when unset)."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "decent8" / "kernels"


def _private(path: Path) -> bool:
    """``path`` and its folder belong to this user and no one else may write them (a library
    anyone could replace is not loaded)."""
    if not hasattr(os, "getuid"):
        return True
    try:
        for p in (path, path.parent):
            st = p.stat()
            if st.st_uid != os.getuid() or st.st_mode & 0o022:
                return False
    except OSError:
        return False
    return True


#: the reasons already warned about (a machine without a compiler says so once, not per library)
_WARNED: set[str] = set()


def warn_unavailable(why: str, what: str, fallback: str, stacklevel: int = 3) -> None:
    """One warning line ``{what}: no C loop ({why}); {fallback}``, once per reason."""
    if why in _WARNED:
        return
    _WARNED.add(why)
    warnings.warn(f"{what}: no C loop ({why}); {fallback}", RuntimeWarning, stacklevel=stacklevel + 1)


class CLibrary:
    """One C source built into a shared library on first use.

    ``functions`` maps each exported name to ``(restype, argtypes)``; ``probe`` checks a loaded
    library against the eager operators and raises :class:`OSError` when it disagrees.
    """

    def __init__(self, name: str, source: str, functions: dict[str, tuple[Any, list[Any]]],
                 probe: Callable[[ctypes.CDLL], None]) -> None:
        self.name = name
        self.source = source
        self.functions = functions
        self.probe = probe
        self._lock = threading.Lock()
        self._lib: list[ctypes.CDLL | None] = []   # the loaded library (None: none), once tried
        self._why: list[str] = []                  # why it could not be built

    def _recipe(self) -> tuple[list[str], list[str], Path]:
        """The compiler command, its flags and the cached library's path (keyed by all of them)."""
        cc = shlex.split(os.environ.get("CC", "")) or [shutil.which("cc") or shutil.which("gcc")
                                                        or shutil.which("clang") or ""]
        if not cc[0]:
            raise OSError("no C compiler (cc, gcc or clang) on PATH")
        flags = [*_FLAGS, *_isa_flags()]
        key = "\0".join([self.source, *cc, *flags, sys.platform, platform.machine()])
        return cc, flags, cache_dir() / f"{self.name}-{hashlib.sha256(key.encode()).hexdigest()[:16]}.so"

    def library_path(self) -> Path:
        """Where this process looks for the cached library."""
        return self._recipe()[2]

    def _compile(self, cc: list[str], flags: list[str], lib: Path) -> None:
        """Build the library at ``lib`` (atomically: a concurrent process sees all of it or none)."""
        with tempfile.TemporaryDirectory(dir=lib.parent) as tmp:
            src, out = Path(tmp) / f"{self.name}.c", Path(tmp) / lib.name
            src.write_text(self.source, encoding="utf-8")
            done = subprocess.run([*cc, *flags, "-o", str(out), str(src), "-lm"], capture_output=True, text=True,
                                  errors="replace", timeout=120, check=False)
            if done.returncode != 0:
                raise OSError(f"{' '.join(cc)} failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
            os.chmod(out, 0o755)              # whatever the umask: only its owner may write it
            os.replace(out, lib)

    def _load(self, lib: Path) -> ctypes.CDLL:
        so = ctypes.CDLL(str(lib))
        for fname, (restype, argtypes) in self.functions.items():
            fn = getattr(so, fname)
            fn.restype = restype
            fn.argtypes = argtypes
        return so

    def _build(self) -> ctypes.CDLL:
        """The library: from the per-user cache, built there on first use (or in a private
        temporary folder, removed once loaded, where the cache cannot be written, is not
        private or holds a library that does not load), checked by the probe."""
        cc, flags, lib = self._recipe()
        so = None
        try:
            if not lib.exists():
                lib.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                self._compile(cc, flags, lib)
            if _private(lib):
                so = self._load(lib)
        except (OSError, AttributeError, subprocess.SubprocessError):
            so = None
        if so is None:
            tmp = Path(tempfile.mkdtemp(prefix="decent8-kernels-"))   # mode 0700
            try:
                self._compile(cc, flags, tmp / lib.name)
                so = self._load(tmp / lib.name)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)                 # (a loaded library stays mapped)
        self.probe(so)
        return so

    def available(self) -> bool:
        """Whether the library can run here (built, loaded and probed on the first call)."""
        if not self._lib:
            with self._lock:
                if not self._lib:
                    try:
                        self._lib.append(self._build())
                    except (OSError, AttributeError, subprocess.SubprocessError) as e:
                        self._why.append(str(e).splitlines()[0][:160] if str(e) else type(e).__name__)
                        self._lib.append(None)
        return self._lib[0] is not None

    def why_unavailable(self) -> str:
        """The reason :meth:`available` is False ("" when it is True or not yet asked)."""
        return self._why[0] if self._why else ""

    @property
    def lib(self) -> ctypes.CDLL:
        """The loaded library (requires :meth:`available`)."""
        so = self._lib[0] if self._lib else None
        assert so is not None, f"the {self.name} library is not available"
        return so

    def reset(self, lib: ctypes.CDLL | None | str = "unset", why: str = "") -> None:
        """Forget the loaded library (the next :meth:`available` builds or loads it again), or
        set it: ``None`` with ``why`` stands for a machine without a compiler (tests)."""
        self._lib.clear()
        self._why.clear()
        if lib != "unset":
            self._lib.append(lib)   # type: ignore[arg-type]
            if why:
                self._why.append(why)


__all__ = ["CLibrary", "cache_dir", "warn_unavailable"]
