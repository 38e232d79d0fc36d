"""The runs behind the documented tables: each cell × seed trained with the pinned execution
(summaries optionally cached), and the priced sweeps run and priced."""
from __future__ import annotations

import contextlib
import io
import json
import tempfile
from pathlib import Path
from typing import Any

from ...config import load_config
from ...errors import ConfigError, TrainingError
from ...train.loop import train
from ..sweep import run_sweep
from ..tta import main as tta
from .catalog import PINNED, Priced, Result


def price(priced: Priced, sweeps_dir: str, figures: Path) -> dict[str, str]:
    """Run ``priced``'s sweeps into ``sweeps_dir`` (finished cells are skipped) and price them:
    table → its markdown; PNGs and the tables' .md files are written under ``figures``."""
    for name, cells, overrides in priced.sweeps:
        args = [*PINNED, *overrides, f"out_dir={sweeps_dir}"]
        with contextlib.redirect_stdout(io.StringIO()):
            try:
                failed = run_sweep(args, cells, name=name, quiet=True) != 0
            except ConfigError as e:
                raise SystemExit(f"{priced.name}: sweep {name}: {e}") from None
        if failed:
            command = " ".join(["decent8 sweep", *[f"--cell {c!r}" for c in cells], *args, "--name", name])
            raise SystemExit(f"{priced.name}: sweep {name} failed ({command})")
    out: dict[str, str] = {}
    for table, args in priced.tables:
        prefix = figures / table
        with contextlib.redirect_stdout(io.StringIO()):
            rc = tta([a.replace("{S}", sweeps_dir) for a in args] + ["--out", str(prefix)])
        if rc != 0:
            raise SystemExit(f"{priced.name}: pricing {table} failed")
        out[table] = prefix.with_suffix(".md").read_text(encoding="utf-8").strip("\n")
    return out


def run_one(result: Result, index: int, seed: int, out: str, cache: str | None = None) -> dict[str, Any] | None:
    """One cell × seed of ``result``: the run's summary, or None if it diverged.

    With ``cache`` (a folder) a run whose summary is already there is not rerun (resume an
    interrupted regeneration; delete the folder after a code change)."""
    key = Path(cache) / f"{result.name}-{index}-s{seed}.json" if cache else None
    if key is not None and key.exists():
        return json.loads(key.read_text(encoding="utf-8"))
    overrides = [*PINNED, *result.common, *result.cells[index][1]]     # a cell may set sim.chunk itself
    cfg = load_config(None, [*overrides, f"seed={seed}", f"out_dir={out}", f"name={result.name}-{index}-s{seed}"])
    try:
        summary, _ = train(cfg, quiet=True)
    except TrainingError as e:
        if "diverged" not in str(e):
            raise
        summary = None
    if key is not None:
        key.parent.mkdir(parents=True, exist_ok=True)
        key.write_text(json.dumps(summary), encoding="utf-8")
    return summary


def run_cells(result: Result, out_dir: str | None = None,
              only: list[int] | None = None, cache: str | None = None) -> dict[str, list[dict[str, Any] | None]]:
    """Every cell × seed of ``result`` (or the cells ``only``): label → the runs' summaries."""
    out = out_dir or tempfile.mkdtemp(prefix=f"d8-{result.name}-")
    summaries: dict[str, list[dict[str, Any] | None]] = {}
    for i, (label, _) in enumerate(result.cells):
        if only is not None and i not in only:
            continue
        summaries[label] = [run_one(result, i, seed, out, cache) for seed in result.seeds]
    return summaries
