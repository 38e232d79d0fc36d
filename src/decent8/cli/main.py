"""The ``decent8`` command: train, sweep, topology, partition."""
from __future__ import annotations

import signal
import sys
import importlib
import warnings

from .. import signals
from ..version import __version__
from ..errors import ConfigError, Terminated, TrainingError
from .common import OneLineParser, fail

#: every command: its module (``add_parser`` / ``add_parsers``) and the one line the top-level
#: ``--help`` shows. Only the module of the command being run is imported, so ``decent8 --help``
#: and ``decent8 train`` with a bad option answer without importing torch or matplotlib
#: (tests/cli/test_cli.py checks that these lines are the modules' own).
COMMANDS: dict[str, tuple[str, str]] = {
    "train": ("train_cmd", "train n nodes (the default: digits, 8 nodes, directed ring, skew 0.8, Choco-SGD, 99% top-k)"),
    "launch": ("launch_cmd", "run `decent8 train backend=distributed …` on N local processes (one per node)"),
    "sweep": ("sweep_cmd", "run a grid of configs (or a paper preset) and print a results table"),
    "report": ("report_cmd", "write the table and figures of a sweep folder, or compare run folders"),
    "compare": ("report_cmd", "compare run folders: one table, curves on shared axes"),
    "topology": ("inspect_cmds", "print the mixing matrix W and its spectral gap"),
    "partition": ("inspect_cmds", "print (and plot) the per-node class counts"),
    "list": ("inspect_cmds", "list the algorithms, compressors, topologies, partitions, models, data sets and presets"),
    "cost": ("cost_cmd", "compute energy, memory and communication per node, FP32 vs 8-bit (the paper's Section 5)"),
}


def make_parser(commands: "list[str] | tuple[str, ...] | None" = None) -> OneLineParser:
    """The ``decent8`` parser with the real subparsers of ``commands`` (None: all of them,
    importing every command module); the other commands get a placeholder with their help line."""
    parser = OneLineParser(prog="decent8", description="Decentralized low-precision training: simulate n nodes or run them "
                                                      "on torch.distributed. The algorithms are described in docs/algorithms.md.")
    parser.add_argument("--version", action="version", version=f"decent8 {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    wanted = set(COMMANDS) if commands is None else set(commands)
    modules = {COMMANDS[c][0] for c in wanted if c in COMMANDS}
    added: set[str] = set()
    for name, (module_name, help_line) in COMMANDS.items():
        if module_name in modules and module_name not in added:
            module = importlib.import_module(f"{__package__}.{module_name}")
            (getattr(module, "add_parsers", None) or module.add_parser)(sub)
            added.add(module_name)
        elif module_name not in modules:
            sub.add_parser(name, help=help_line.replace("%", "%%"))
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
    """The command: every moment of it, parsing and importing the command's module
    included, is inside the handling below: SIGINT / SIGTERM end it with one line and
    130 / 143 (with the resume line once a run folder exists), never a traceback."""
    previous: dict = {}
    formatwarning = warnings.formatwarning
    try:
        previous = signals.install()  # SIGINT / SIGTERM raise and are recorded (never lost, see decent8.signals)
        warnings.formatwarning = _one_line_warning
        return _main(argv)
    except KeyboardInterrupt as e:  # landed while the command was being set up (parser, its module's imports)
        signals.disarm()            # a second signal now stops at once with its own line
        return _stopped(e)
    except Exception:
        signum = signals.pending()
        if signum is None:
            raise
        # what a signal cut short fails after it (a module whose import it interrupted cannot be
        # imported again: numpy's "cannot load module more than once"): the signal's line, not that
        signals.disarm()
        return _stopped(Terminated() if signum == signal.SIGTERM else KeyboardInterrupt())
    finally:
        signals.disarm()
        warnings.formatwarning = formatwarning
        signals.restore(previous)


def _one_line_warning(message, category, filename, lineno, line=None) -> str:
    """Warnings on the command line: one line each, like the errors."""
    return f"decent8: warning: {message}\n"


def _option(item: str) -> str | None:
    """The option a ``key=value`` argument sets (``model=x`` sets ``model.name``); None for others."""
    from ..config import GROUPS

    if item.startswith("-") or "=" not in item or item.startswith("="):
        return None
    key = item.split("=", 1)[0].strip().replace("__", ".")
    return f"{key}.name" if key in GROUPS else key


def warn_repeated_keys(args: list[str]) -> None:
    """One line per option given twice with different values among ``key=value`` arguments
    (the last one is used); the same value twice overrides nothing and is not warned."""
    given: dict[str, list[str]] = {}
    for item in args:
        key = _option(item)
        if key is not None:
            given.setdefault(key, []).append(item)
    for key, items in given.items():
        if len({item.split("=", 1)[1].strip() for item in items}) > 1:
            sys.stderr.write(f"decent8: warning: {key} is given {len(items)} times ({', '.join(items)}); "
                             f"the last one is used\n")


def _main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = make_parser([argv[0]] if argv and argv[0] in COMMANDS else [])
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
    warn_repeated_keys(list(getattr(ns, "args", None) or getattr(ns, "train_args", None) or []))
    try:
        return int(ns.func(ns) or 0)
    except ConfigError as e:
        return fail(str(e))
    except TrainingError as e:
        fail(str(e))
        return 1
    except KeyboardInterrupt as e:  # Ctrl-C, and SIGTERM (Terminated): with the resume line of a run
        signals.disarm()
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
