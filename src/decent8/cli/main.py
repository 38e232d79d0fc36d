"""The ``decent8`` command: train, sweep, topology, partition."""
from __future__ import annotations

import sys

from ..errors import ConfigError
from . import inspect_cmds, sweep_cmd, train_cmd
from .common import OneLineParser, fail


def make_parser() -> OneLineParser:
    parser = OneLineParser(prog="decent8", description="Decentralized low-precision training: simulate n nodes or run them on torch.distributed.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    train_cmd.add_parser(sub)
    sweep_cmd.add_parser(sub)
    inspect_cmds.add_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = make_parser()
    ns = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if ns.command is None:
        parser.print_help()
        return 0
    try:
        return int(ns.func(ns) or 0)
    except ConfigError as e:
        return fail(str(e))
    except KeyboardInterrupt:
        return fail("interrupted")


if __name__ == "__main__":
    raise SystemExit(main())
