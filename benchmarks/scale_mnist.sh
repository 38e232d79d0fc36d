#!/usr/bin/env bash
# One MNIST run at the simulator's node limit (docs/results/scale_10k.md): N nodes, 2 shards of
# MNIST each, the MLP (width 16, 13,002 parameters), D-PSGD on a ring, 2 epochs, one thread.
# Peak memory from /usr/bin/time -v. NODES defaults to 4096 (MAX_NODES).
set -euo pipefail
N=${NODES:-4096}
OUT=${OUT:-/tmp/scale}
OMP_NUM_THREADS=1 /usr/bin/time -v python -m decent8 train data.name=mnist \
  data.root=/work/shared/data/mnist/rasbt-mnist-pngs.tar.gz model=mlp model.width=16 nodes=$N \
  partition=shards partition.shards_per_node=2 data.batch_size=14 topology=ring algorithm=dpsgd \
  compression=identity algorithm.consensus_rounds=0 epochs=2 eval_every=1 eval.nodes=64 \
  device=cpu progress=false checkpoint=false tensorboard=false sim.chunk=layers:1024 sim.compile=false \
  device_model.name=fixed device_model.step_s=0.01 out_dir=$OUT name=mnist-n$N
