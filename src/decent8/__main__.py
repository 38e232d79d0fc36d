"""``python -m decent8``: the ``decent8`` command (importing :mod:`decent8.cli` first takes the
current folder off ``sys.path`` and installs the signal handlers)."""
from .cli import start_command

start_command()
from .cli.main import main  # noqa: E402

raise SystemExit(main())
