"""One real tiny run per test worker, copied into every crafted run folder."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import call
from tests.security.crafted import TINY


@pytest.fixture(scope="session")
def base_run(tmp_path_factory) -> Path:
    """A finished simulator run (config.yaml, checkpoint.pt, summary.json, …) made by `decent8 train`."""
    root = tmp_path_factory.mktemp("base")
    rc, _, lines = call(["train", *TINY, f"out_dir={root}", "name=base", "checkpoint=true", "--quiet"])
    assert rc == 0, lines
    return root / "base"
