"""Signals from the first instruction: SIGTERM / SIGINT at any moment of a command, start-up
(while the command's modules import) included, end it with one line and 143 / 130."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.security.crafted import STARTS, TINY

DELAYS = (0.0, 0.05, 0.3, 1.0, 2.0)


def _handler_installed(pid: int) -> bool:
    """True once the process catches SIGTERM (decent8's first instruction installed it)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    caught = next((ln.split()[1] for ln in status.splitlines() if ln.startswith("SigCgt:")), "0")
    return bool(int(caught, 16) & (1 << (signal.SIGTERM - 1)))


def _stop(cmd: list[str], cwd: Path, signum: int, delay: float, out: dict) -> None:
    p = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    deadline = time.monotonic() + 60
    while not _handler_installed(p.pid) and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    time.sleep(delay)
    p.send_signal(signum)
    _, err = p.communicate(timeout=120)
    out[(tuple(cmd[:2]), signum, delay)] = (p.returncode, err)


@pytest.mark.slow   # 12 processes side by side
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to know the process started")
def test_early_signals_give_one_line_and_130_or_143(tmp_path):
    jobs, out = [], {}
    for i, delay in enumerate(DELAYS):
        for signum in (signal.SIGTERM, signal.SIGINT):
            start = "console" if delay not in (0.05, 1.0) or signum == signal.SIGTERM else "module"
            long_tiny = [o for o in TINY if not o.startswith("epochs=")] + ["epochs=200"]   # one epochs= (no warning)
            cmd = [*STARTS[start], "train", *long_tiny, f"out_dir={tmp_path}", f"name=s{i}_{signum}"]
            jobs.append(threading.Thread(target=_stop, args=(cmd, tmp_path, signum, delay, out)))
    jobs.append(threading.Thread(target=_stop, args=([*STARTS["module"], "cost", "--model", "resnet20"], tmp_path,
                                                     signal.SIGTERM, 0.3, out)))
    for t in jobs:
        t.start()
    for t in jobs:
        t.join()
    bad = []
    for (cmd, signum, delay), (rc, err) in out.items():
        lines = [ln for ln in err.splitlines() if ln.strip()]
        want = 128 + signum
        what = "terminated (SIGTERM)" if signum == signal.SIGTERM else "interrupted"
        if rc != want or len(lines) != 1 or not lines[0].startswith(f"decent8: error: {what}") or "Traceback" in err:
            bad.append((cmd, signal.Signals(signum).name, delay, rc, err[-800:]))
    assert len(out) == len(jobs) and bad == []


@pytest.mark.parametrize("signum,code,line", [(signal.SIGINT, 130, "interrupted"),
                                              (signal.SIGTERM, 143, "terminated (SIGTERM)")])
def test_what_a_signal_cut_short_fails_with_the_signals_line(monkeypatch, capsys, signum, code, line):
    """A signal that lands inside an import leaves the module half made; importing it again
    raises (numpy: "cannot load module more than once per process"). The command still
    ends with the signal's one line and status."""
    import decent8.cli.main as cli_main
    import decent8.signals as signals

    def interrupted_import(argv=None):
        signals._pending.append(signum)
        raise ImportError("cannot load module more than once per process")

    monkeypatch.setattr(cli_main, "_main", interrupted_import)
    assert cli_main.main(["train"]) == code
    assert capsys.readouterr().err.strip() == f"decent8: error: {line}"
