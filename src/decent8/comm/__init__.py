"""Communication layer: one interface, a simulator and a torch.distributed backend."""
from .base import Communicator
from .simulator import SimulatorCommunicator

__all__ = ["Communicator", "SimulatorCommunicator"]
