"""Imported once by the forkserver of tests/processes.py: what a `decent8 train` run imports
(measured: the modules a run adds to ``sys.modules``), so that no forked run imports them again."""
import matplotlib.figure  # noqa: F401
import matplotlib.style  # noqa: F401
import sklearn.datasets  # noqa: F401
import sklearn.metrics  # noqa: F401
import sklearn.model_selection  # noqa: F401
import sympy  # noqa: F401
import torch  # noqa: F401
import torch._dynamo  # noqa: F401
import torch._inductor.config  # noqa: F401
from fontTools import subset  # noqa: F401
from matplotlib.backends import backend_agg, backend_pdf  # noqa: F401
from PIL import Image, PngImagePlugin  # noqa: F401

import decent8.cli.main  # noqa: F401
import decent8.cli.train_cmd  # noqa: F401
import decent8.cost  # noqa: F401
import decent8.train.build  # noqa: F401
import decent8.train.loop  # noqa: F401
import tests.processes  # noqa: F401
