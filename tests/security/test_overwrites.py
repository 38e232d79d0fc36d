"""Nothing the user had changes: ``compare --out``, ``report … --out``, ``partition --plot``
and ``cost --plot`` refuse (one line, exit 2, nothing written) to overwrite a file decent8
did not write, and rewrite their own."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from tests.helpers import call


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _refused(rc, lines, name) -> None:
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("decent8: error: "), lines
    assert name in lines[0] and "not written by decent8" in lines[0], lines


def test_compare_and_report_never_overwrite_a_users_file_in_out(base_run, tmp_path):
    other = shutil.copytree(base_run, tmp_path / "other")
    own = tmp_path / "own"
    rc, _, lines = call(["compare", str(base_run), str(other), "--out", str(own)])
    assert rc == 0, lines
    written = sorted(tree(own))
    assert "report.md" in written and any(w.endswith(".pdf") for w in written), written
    rc, _, lines = call(["compare", str(base_run), str(other), "--out", str(own)])   # its own files: rewritten
    assert rc == 0 and sorted(tree(own)) == written, lines
    pdf = next(w for w in written if w.endswith(".pdf"))
    for command, victim in (("compare", "report.md"), ("report", pdf), ("compare", pdf.replace(".pdf", ".png"))):
        out = tmp_path / f"mine_{command}_{Path(victim).stem}"
        (out / Path(victim).parent).mkdir(parents=True, exist_ok=True)
        (out / victim).write_bytes(os.urandom(100))
        (out / "notes.txt").write_text("my notes")
        before = tree(out)
        rc, _, lines = call([command, str(base_run), str(other), "--out", str(out)])
        _refused(rc, lines, victim)
        assert tree(out) == before and sorted(p.name for p in out.iterdir()) == sorted(
            {Path(victim).parts[0], "notes.txt"})


def test_partition_and_cost_plots_never_overwrite_a_users_file(tmp_path):
    png = tmp_path / "classes.png"
    for victim in (png, png.with_suffix(".pdf")):   # the PNG, or the PDF written beside it
        victim.write_bytes(b"my own figure")
        rc, _, lines = call(["partition", "nodes=4", "data.subset=100", "--plot", str(png)])
        _refused(rc, lines, victim.name)
        assert victim.read_bytes() == b"my own figure" and len(list(tmp_path.iterdir())) == 1
        victim.unlink()
    rc, _, lines = call(["partition", "nodes=4", "data.subset=100", "--plot", str(png)])
    assert rc == 0 and png.is_file(), lines
    rc, _, lines = call(["partition", "nodes=4", "data.subset=100", "--plot", str(png)])   # its own: rewritten
    assert rc == 0, lines
    mine = tmp_path / "cost.png"
    mine.write_bytes(b"mine")
    rc, _, lines = call(["cost", "--model", "mlp", "--dataset", "digits", "--plot", str(mine)])
    _refused(rc, lines, "cost.png")
    assert mine.read_bytes() == b"mine"
