"""``python -m decent8.experiments.regenerate``: rerun, check or print the documented tables."""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from .catalog import PRICED, REPO, RESULTS, Priced, Result
from .documents import documented, write
from .kernels import use_reference_kernels
from .render import render
from .run import price, run_cells


def main(argv: list[str] | None = None) -> int:
    if not use_reference_kernels():
        print("decent8: warning: the AVX2 kernels of the documented numbers are not in use; "
              "tables may differ in the last digits", file=sys.stderr)
    ap = argparse.ArgumentParser(prog="python -m decent8.experiments.regenerate", description=sys.modules[__package__].__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help=f"tables to regenerate (default: all of {', '.join([*RESULTS, *PRICED])})")
    ap.add_argument("--check", action="store_true", help="compare with the documents, write nothing; exit 1 if stale")
    ap.add_argument("--print", dest="print_only", action="store_true", help="print the tables, write nothing")
    ap.add_argument("--cache", metavar="DIR", help="keep each run's summary here and reuse it (resume)")
    args = ap.parse_args(argv)
    unknown = [n for n in args.names if n not in RESULTS and n not in PRICED]
    if unknown:
        print(f"decent8: error: unknown result {unknown[0]!r}; allowed: {', '.join([*RESULTS, *PRICED])}",
              file=sys.stderr)
        return 2
    mode = "print" if args.print_only else "check" if args.check else "write"
    stale = 0
    for name in args.names or [*RESULTS, *PRICED]:
        if name in PRICED:
            stale += _regenerate_priced(PRICED[name], mode, args.cache)
        else:
            result = RESULTS[name]
            stale += _emit(result, name, render(result, run_cells(result, cache=args.cache)), mode)
    return 1 if stale else 0


def _emit(result: Result | Priced, marker: str, text: str, mode: str) -> int:
    """Print, check or write the table ``text`` of ``marker``; 1 if it is stale (mode "check")."""
    if mode == "print":
        print(f"<!-- results:{marker} -->\n{text}\n<!-- /results:{marker} -->", flush=True)
        return 0
    if mode == "check":
        same = documented(result, marker) == text
        print(f"{marker}: {'up to date' if same else 'STALE'} ({result.doc})")
        return int(not same)
    write(result, text, marker)
    print(f"{marker}: written to {result.doc}")
    return 0


def _regenerate_priced(priced: Priced, mode: str, cache: str | None) -> int:
    """Write (or check, or print) every table of ``priced``; the number of stale tables."""
    sweeps = str(Path(cache) / priced.name) if cache else tempfile.mkdtemp(prefix=f"d8-{priced.name}-")
    figures = (REPO / priced.doc).with_suffix("") if mode == "write" else Path(tempfile.mkdtemp(prefix="d8-figures-"))
    return sum(_emit(priced, priced.marker(table), text, mode)
               for table, text in price(priced, sweeps, figures).items())
