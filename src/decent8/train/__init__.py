"""The training run: build (validation), engine (one iteration), loop, run folder, plots.

The package is also the Python API's entry point: ``decent8.train(model, data, ...)``
calls :func:`decent8.api.train` (the module is made callable, so the name means the
same whether or not a submodule such as ``decent8.train.loop`` was imported first).
``help(decent8.train)`` and ``decent8.train.__doc__`` give the API function's
docstring (then this package's description); submodules import as usual.
"""
import sys as _sys
import types as _types

_PACKAGE_DOC = __doc__


class _CallablePackage(_types.ModuleType):
    def __call__(self, *args, **kwargs):
        """``decent8.train(model, data, loss=…, **options) -> (summary, run_folder)``; see :func:`decent8.api.train`."""
        from ..api import train as _train
        return _train(*args, **kwargs)

    @property
    def __doc__(self) -> str:  # type: ignore[override]
        """What ``help(decent8.train)`` prints first: the API function's signature and docstring."""
        import inspect

        from ..api import train as _train
        return (f"decent8.train{inspect.signature(_train)}\n\n{inspect.cleandoc(_train.__doc__ or '')}\n\n"
                f"The package decent8.train:\n{_PACKAGE_DOC}")


_sys.modules[__name__].__class__ = _CallablePackage
