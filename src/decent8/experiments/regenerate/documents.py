"""The documents' side: the text between ``<!-- results:NAME -->`` markers read, one cell of it
looked up, and rewritten."""
from __future__ import annotations

import re

from ...atomic import atomic_write_text
from .catalog import REPO, Priced, Result


def _pattern(name: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- results:{re.escape(name)} -->)(.*?)(<!-- /results:{re.escape(name)} -->)", re.S)


def documented(result: Result | Priced, marker: str | None = None) -> str | None:
    """The text between the markers of ``result`` (or ``marker``) in its document (None if the
    markers are missing)."""
    m = _pattern(marker or result.name).search((REPO / result.doc).read_text(encoding="utf-8"))
    return m.group(2).strip("\n") if m else None


def documented_cell(result: Result, label: str, column: str, text: str | None = None) -> str | None:
    """One cell of the documented table (row ``label``, header ``column``), or None if absent.
    ``text``: a rendered table instead of the document's."""
    table = documented(result) if text is None else text
    if table is None:
        return None
    rows = [[c.strip() for c in line.strip().strip("|").split(" | ")] for line in table.splitlines() if line.startswith("|")]
    if not rows or column not in rows[0]:
        return None
    j = rows[0].index(column)
    return next((row[j] for row in rows[2:] if row[0] == label and len(row) > j), None)


def write(result: Result | Priced, table: str, marker: str | None = None) -> None:
    path = REPO / result.doc
    text = path.read_text(encoding="utf-8")
    marker = marker or result.name
    new, n = _pattern(marker).subn(lambda m: m.group(1) + "\n" + table + "\n" + m.group(3), text)
    if n != 1:
        raise SystemExit(f"{result.doc}: no <!-- results:{marker} --> markers")
    atomic_write_text(path, new)
