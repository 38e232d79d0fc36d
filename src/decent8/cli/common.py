"""CLI plumbing: one-line errors with exit code 2, tables."""
from __future__ import annotations

import argparse
import sys
from typing import Any, Sequence

EXIT_USAGE = 2


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports usage errors as one line and exits with 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"decent8: error: {message} (see `{self.prog} --help`)\n")
        raise SystemExit(EXIT_USAGE)


def fail(message: str) -> int:
    sys.stderr.write(f"decent8: error: {message}\n")
    return EXIT_USAGE


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(h) for h in headers]] + [[_fmt(v) for v in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        if v != 0 and (abs(v) < 1e-3 or abs(v) >= 1e6):
            return f"{v:.3e}"
        return f"{v:.4f}"
    return str(v)


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n:.0f} B"
        n /= 1000.0
    return f"{n:.1f} TB"
