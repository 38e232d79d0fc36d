"""Node-batched neural-network layers (activations carry a leading node axis)."""
from .layers import AvgPool2d, Conv2d, Flatten, GlobalAvgPool, Linear, MaxPool2d

__all__ = ["Linear", "Conv2d", "Flatten", "MaxPool2d", "AvgPool2d", "GlobalAvgPool"]
