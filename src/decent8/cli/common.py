"""CLI plumbing: one-line errors with exit code 2, tables."""
from __future__ import annotations

import argparse
import sys

from ..text_table import format_table, human_bytes

EXIT_USAGE = 2

__all__ = ["EXIT_USAGE", "OneLineParser", "fail", "format_table", "human_bytes"]


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports usage errors as one line and exits with 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"decent8: error: {message} (see `{self.prog} --help`)\n")
        raise SystemExit(EXIT_USAGE)


def fail(message: str) -> int:
    sys.stderr.write(f"decent8: error: {message}\n")
    return EXIT_USAGE
