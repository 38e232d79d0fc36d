"""Multi-hop collectives written once on the communicator's ring passes: ring and 2-D
torus all-reduce (reduce-scatter, then all-gather) with pluggable message codecs."""
from .ring import (
    ALLREDUCE_TOPOLOGIES,
    Codec,
    Ring,
    RingAllReduce,
    SumCodec,
    all_gather,
    allreduce,
    check_allreduce_topology,
    reduce_scatter,
)

__all__ = ["ALLREDUCE_TOPOLOGIES", "Codec", "Ring", "RingAllReduce", "SumCodec", "all_gather", "allreduce",
           "check_allreduce_topology", "reduce_scatter"]
