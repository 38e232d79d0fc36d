"""The ``decent8`` command: train, sweep, topology, partition."""
from __future__ import annotations

import signal
import sys

from .. import __version__, signals
from ..errors import ConfigError, Terminated, TrainingError
from . import cost_cmd, inspect_cmds, launch_cmd, report_cmd, sweep_cmd, train_cmd
from .common import OneLineParser, fail


def make_parser() -> OneLineParser:
    parser = OneLineParser(prog="decent8", description="Decentralized low-precision training: simulate n nodes or run them "
                                                      "on torch.distributed. The algorithms are described in docs/algorithms.md.")
    parser.add_argument("--version", action="version", version=f"decent8 {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    train_cmd.add_parser(sub)
    launch_cmd.add_parser(sub)
    sweep_cmd.add_parser(sub)
    report_cmd.add_parser(sub)
    inspect_cmds.add_parsers(sub)
    cost_cmd.add_parser(sub)
    return parser


def _subparsers(parser: OneLineParser) -> dict[str, OneLineParser]:
    for action in parser._actions:
        if action.__class__.__name__ == "_SubParsersAction":
            return dict(action.choices)  # type: ignore[attr-defined]
    return {}


#: exit statuses of a run stopped by SIGINT (Ctrl-C) and SIGTERM, as shells report them
EXIT_SIGINT = 128 + signal.SIGINT
EXIT_SIGTERM = 128 + signal.SIGTERM


def main(argv: list[str] | None = None) -> int:
    previous = signals.install()  # SIGINT / SIGTERM raise and are recorded (never lost, see decent8.signals)
    try:
        return _main(argv)
    finally:
        signals.restore(previous)


def _main(argv: list[str] | None = None) -> int:
    parser = make_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    sub = _subparsers(parser)
    if argv and argv[0] == "launch":
        # launch's own options; everything else goes to `decent8 train` unchanged
        ns, rest = sub["launch"].parse_known_args(argv[1:])
        ns.train_args = rest
        ns.command = argv[0]
    elif argv and argv[0] in sub:
        # options may sit anywhere among the key=value overrides
        ns = sub[argv[0]].parse_intermixed_args(argv[1:])
        ns.command = argv[0]
    else:
        ns = parser.parse_args(argv)
    if ns.command is None:
        parser.print_help()
        return 0
    try:
        return int(ns.func(ns) or 0)
    except ConfigError as e:
        return fail(str(e))
    except TrainingError as e:
        fail(str(e))
        return 1
    except KeyboardInterrupt as e:  # Ctrl-C, and SIGTERM (Terminated): with the resume line of a run
        return _stopped(e)
    except MemoryError:
        return fail("out of memory; use fewer nodes, a smaller model.width or a smaller data set")
    except OSError as e:  # a full or read-only disk, a vanished folder: the system's one line
        where = f": {e.filename}" if getattr(e, "filename", None) else ""
        return fail(f"{e.strerror or e}{where}")


def _stopped(e: KeyboardInterrupt) -> int:
    """The one line (and exit status 130 / 143) of a command stopped by SIGINT / SIGTERM."""
    term = isinstance(e, Terminated) or getattr(e, "sigterm", False)
    what = "terminated (SIGTERM)" if term else "interrupted"
    run_dir = getattr(e, "run_dir", None)
    if run_dir is None:
        fail(what)
    elif getattr(e, "resumable", False):
        fail(f"{what}; the run folder is {run_dir}; continue it with `decent8 train --resume {run_dir}`")
    else:
        fail(f"{what}; the run folder is {run_dir} (checkpoint=false: it cannot be resumed)")
    return EXIT_SIGTERM if term else EXIT_SIGINT


if __name__ == "__main__":
    raise SystemExit(main())
