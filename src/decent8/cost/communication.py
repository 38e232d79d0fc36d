"""Communication volume of a run (paper Table 3, "Data (GB)").

Two figures per node for the whole run:

* **paper convention** — what Table 3 reports: every iteration each node puts one
  message on the wire, counted once however many out-neighbours it has; a dense
  message is 4 B per parameter, a top-k message (4 + 2) B per kept value (an FP32 value
  and an int16 index), and 8-bit training divides the FP32 figure by 4. Iterations =
  epochs · ceil(N / (n · b)) (N training samples, n nodes, b per node); GB = 10^9 B.
  This reproduces ResNet-20 on the 8-node directed ring, 200 epochs: 42.85 / 10.71 GB
  dense and 0.651 / 0.163 GB at 99 % top-k (and ResNet-54: 119.2 / 29.81 / 1.808 / 0.452).
* **real payload** — what decent8 sends: ``compressor.nbytes()`` (the bytes of the
  payload tensors of one message, with their real dtypes) × the node's out-degree
  (one copy per out-neighbour) × iterations. With ``precision=int8`` a dense message
  travels as ``quantize`` (uint8 + per-tensor scale/zero) and top-k as ``topk_int8``
  (:func:`decent8.compression.wire.wire_compression`), so the 8-bit figure is the real 8-bit payload, not /4.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from ..compression import make_compressor
from ..compression.topk import keep_count
from ..compression.wire import INT8_WIRE, wire_compression  # noqa: F401  (re-exported)
from ..errors import ConfigError
from ..layout import ParamLayout

#: The paper's GB.
GB = 1e9
#: Table 3's convention: bytes per dense value, per sparse value, per sparse index.
PAPER_VALUE_BYTES = 4
PAPER_INDEX_BYTES = 2
#: Training-set sizes of the data sets (per run, before the partition).
TRAIN_SIZES = {"cifar10": 50000, "mnist": 60000, "imagenette": 9469, "agnews": 120000}
#: Compressors whose message the paper convention can count (dense or top-k style).
DENSE = ("identity", "none", "quantize", "int8")
SPARSE = ("topk", "topk_int8", "randomk")


def iterations(epochs: int, dataset_size: int, nodes: int, batch: int) -> int:
    """Training iterations of a run: ``epochs · ceil(N / (n · b))`` (what decent8's sampler runs)."""
    for option, value, low in (("epochs", epochs, 0), ("dataset_size", dataset_size, 1), ("nodes", nodes, 1),
                               ("batch", batch, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ConfigError(option, f"must be an integer ≥ {low}, got {value!r}")
    return epochs * max(1, math.ceil(dataset_size / nodes / batch))


def paper_message_bytes(layout: ParamLayout, compression: str, ratio: float, precision: str) -> float:
    """One node's message per iteration under Table 3's convention (may be fractional: 8-bit is /4)."""
    key = compression.strip().lower()
    if key in DENSE:
        values = layout.dim
        per_value = PAPER_VALUE_BYTES
    elif key in SPARSE:
        values = sum(keep_count(n, ratio) for n in layout.numels)
        per_value = PAPER_VALUE_BYTES + PAPER_INDEX_BYTES
    else:
        raise ConfigError("compression", f"the paper's Table 3 convention counts dense and top-k messages, "
                                         f"not {compression!r}; the real-payload figure still applies")
    full = float(values * per_value)
    return full / 4 if precision == "int8" else full


@dataclass
class CommunicationVolume:
    """Per-node bytes of a whole run, paper convention and real payload."""

    nodes: int
    topology: str
    epochs: int
    dataset_size: int
    batch: int
    iterations: int
    compression: str
    ratio: float
    precision: str
    wire_compression: str
    parameters: int
    mean_out_degree: float
    paper_message_bytes: float | None
    real_message_bytes: int

    @property
    def paper_gb(self) -> float | None:
        """Table 3's "Data (GB)" for this run (None when the convention does not cover the compressor)."""
        if self.paper_message_bytes is None:
            return None
        return self.paper_message_bytes * self.iterations / GB

    @property
    def real_gb(self) -> float:
        """Bytes decent8 hands to the network per node (payload × out-degree × iterations), in GB."""
        return self.real_message_bytes * self.mean_out_degree * self.iterations / GB

    def to_dict(self) -> dict:
        d = asdict(self)
        d["paper_gb"] = self.paper_gb
        d["real_gb"] = self.real_gb
        return d


def mean_out_degree(topology) -> float:
    """Mean out-degree over nodes and over the phases of a time-varying topology (the
    expected degree of a per-round random one: :meth:`Topology.mean_out_degree`)."""
    return topology.mean_out_degree()


def communication_volume(layout: ParamLayout, nodes: int, topology, epochs: int, dataset_size: int, batch: int,
                         compression: str = "identity", ratio: float = 0.99, precision: str = "fp32",
                         value_bits: int = 32, bits: int = 8, index_dtype: str = "auto",
                         wire: str = "auto") -> CommunicationVolume:
    """The communication volume of a run; ``topology`` is a :class:`~decent8.topology.Topology`;
    ``wire``: ``compression.wire`` (auto: 8-bit values at precision=int8)."""
    its = iterations(epochs, dataset_size, nodes, batch)
    wire = wire_compression(compression, precision, wire, value_bits)
    comp = make_compressor(wire, layout, ratio=ratio, value_bits=value_bits, bits=bits, index_dtype=index_dtype)
    try:
        paper = paper_message_bytes(layout, compression, ratio, precision)
    except ConfigError:
        paper = None
    return CommunicationVolume(nodes, topology.name, epochs, dataset_size, batch, its, compression, float(ratio),
                               precision, wire, layout.dim, mean_out_degree(topology), paper, comp.nbytes())


__all__ = ["GB", "PAPER_VALUE_BYTES", "PAPER_INDEX_BYTES", "TRAIN_SIZES", "wire_compression", "iterations",
           "paper_message_bytes", "CommunicationVolume", "mean_out_degree", "communication_volume"]
