"""torch.distributed backend: one process per node (k = 1), gossip by peer-to-peer sends.

Every process holds one node (``local_nodes == [rank]``) and computes exactly what the
simulator computes for that node's row:

* ``exchange``: the compact payload tensors (in :meth:`Payload.names` order, with
  their declared dtypes — int8/uint8 values, int16/int32 indices, packed bits, fp32
  scales; never pickled objects) go to every out-neighbour and come from every
  in-neighbour of the step's phase, all posted at once before waiting on any (one
  coalesced :func:`torch.distributed.batch_isend_irecv` on NCCL, non-blocking
  isend/irecv on gloo), so no topology can deadlock. Receive
  buffers are sized from ``compressor.spec()``, a fresh one per message. The received payloads are
  decoded together and mixed with the node's row of W as one small product
  ``W[i, nodes] @ decoded[nodes]`` over the in-neighbours and self in node order
  (the simulator's ``W @ decoded`` restricted to the non-zero terms).
* ``mix_scalars`` the same for the push-sum weights; ``ring_pass`` sends to rank+1
  and receives from rank−1; ``mean_over_nodes`` is an all-reduce, ``gather_nodes``
  an all-gather (metrics only).
* ``bytes_sent`` grows at the send call by ``numel · element_size`` of every tensor
  handed to torch.distributed.

Backends: gloo for CPU tensors, NCCL for CUDA tensors (device ``cuda:LOCAL_RANK``).
Every peer-to-peer exchange waits at most ``timeout_s``; collectives use the same
value as the process-group timeout. A peer that dies, hangs or closes its connection
makes this process raise :class:`PeerError` naming it (``node 2 did not answer within
30 s (exchange at step 41, seen by node 3)``). Every failing process reports what it
saw to the rendezvous store ("I waited on node p"); following those reports to the one
node that reported nothing names the root cause, so every process reports the dead or
hung node, not the neighbour that was blocked behind it.

Trust model: the nodes of one run trust each other's *code* (they run the same
decent8) but not the *bytes* they receive. Nothing received is unpickled (set-up data
travels as JSON bytes in a tensor); the first message of every phase is preceded by
a 32-byte header (magic, tensor count, bytes, a fingerprint of the layout) that every
receiver checks before posting a receive, every message ends with a trailer (bytes,
dtype, shape) checked in a fresh buffer against what was announced, and every received
payload is checked (dtypes, shapes, index range) before it is decoded, so a peer that
sends something else (short, long, empty or mistyped) is named in one line. The rendezvous store and gloo's connections are not
authenticated or encrypted: run multi-host jobs only on a network you trust
(docs/distributed.md).

Start the processes with ``torchrun --nproc-per-node N -m decent8 train
backend=distributed …`` or ``decent8 launch --nodes N …`` (see docs/distributed.md).

The package's modules, one job each: :mod:`.rendezvous` (joining the run), :mod:`.wire`
(the protocol headers), :mod:`.diagnosis` (naming the failed peer) and
:mod:`.communicator` (:class:`DistributedCommunicator`).
"""
from .communicator import DistributedCommunicator
from .diagnosis import FAILURE_KEY, STORE_GRACE_S, PeerError
from .rendezvous import ENV_HELP, ENV_VARS, RankEnv, backend_for, init_process_group, rank_device, torchrun_env
from .wire import HEADER_MAGIC, MAX_BROADCAST_BYTES, SIZES_MAGIC

__all__ = ["DistributedCommunicator", "PeerError", "RankEnv", "torchrun_env", "init_process_group", "backend_for",
           "rank_device", "ENV_VARS", "ENV_HELP", "FAILURE_KEY", "STORE_GRACE_S", "HEADER_MAGIC", "SIZES_MAGIC",
           "MAX_BROADCAST_BYTES"]
