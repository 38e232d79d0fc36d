"""decent8: decentralized (gossip) deep-learning training with 8-bit low precision,
compressed communication and non-IID data — a fast n-node simulator and a
torch.distributed backend sharing one implementation of every algorithm."""
from .version import __version__
from .registry import register  # noqa: E402  (decent8.register(kind, name): a component for the API and configs)

from . import train  # noqa: E402  (callable: decent8.train(model, data, …) → decent8.api.train)

__all__ = ["__version__", "register", "train"]
