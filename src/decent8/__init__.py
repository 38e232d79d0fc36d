"""decent8: decentralized (gossip) deep-learning training with 8-bit low precision,
compressed communication and non-IID data — a fast n-node simulator and a
torch.distributed backend sharing one implementation of every algorithm.

``decent8.train`` is the package of the training run and also the Python API's entry point:
``decent8.train(model, data, ...)`` calls :func:`decent8.api.train` (the package is made
callable here, so the name means the same whether or not a submodule such as
``decent8.train.loop`` was imported first). ``help(decent8.train)`` gives the API function's
docstring, then the package's description; submodules import as usual.
"""
import types as _types

from .version import __version__
from .registry import register  # decent8.register(kind, name): a component for the API and configs
from . import train

_TRAIN_DOC = train.__doc__


class _CallablePackage(_types.ModuleType):
    def __call__(self, *args, **kwargs):
        """``decent8.train(model, data, loss=…, **options) -> (summary, run_folder)``; see :func:`decent8.api.train`."""
        from .api import train as _train
        return _train(*args, **kwargs)

    @property
    def __doc__(self) -> str:  # type: ignore[override]
        """What ``help(decent8.train)`` prints first: the API function's signature and docstring."""
        import inspect

        from .api import train as _train
        return (f"decent8.train{inspect.signature(_train)}\n\n{inspect.cleandoc(_train.__doc__ or '')}\n\n"
                f"The package decent8.train:\n{_TRAIN_DOC}")


train.__class__ = _CallablePackage

__all__ = ["__version__", "register", "train"]
