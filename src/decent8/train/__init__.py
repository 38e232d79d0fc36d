"""The training run: build (validation), engine (one iteration), loop, run folder, plots.

The package is also the Python API's entry point: ``decent8.train(model, data, ...)``
calls :func:`decent8.api.train` (``decent8/__init__.py`` makes the package callable).
"""
