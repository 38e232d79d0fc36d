"""``python -m decent8.experiments.regenerate``."""
from .cli import main

raise SystemExit(main())
