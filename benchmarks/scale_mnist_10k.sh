#!/usr/bin/env bash
# 10,000 MNIST nodes in one process (issue 32; docs/results/scale_10k.md): 6 images per node
# (partition=dirichlet_fixed α=1: a per-node Dirichlet class mix, a fixed size), the MLP at
# width 16 (13,002 parameters), D-PSGD on the sparse exponential graph (14 out-neighbours),
# batch 1 (6 steps per epoch), lr 0.1 with a cosine schedule, EPOCHS epochs (default 10),
# intermediate evaluations of 64 sampled nodes on a tenth of the test set (1,000 images), the
# last epoch's and the final evaluation of all nodes. Peak memory from /usr/bin/time -v.
set -euo pipefail
N=${NODES:-10000}
E=${EPOCHS:-10}
OUT=${OUT:-/tmp/scale}
OMP_NUM_THREADS=1 /usr/bin/time -v python -m decent8 train data.name=mnist \
  data.root=/work/shared/data/mnist/rasbt-mnist-pngs.tar.gz data.test_subset=0.1 model=mlp model.width=16 nodes=$N \
  partition=dirichlet_fixed partition.alpha=1 data.batch_size=1 topology=exponential algorithm=dpsgd \
  compression=identity algorithm.consensus_rounds=0 optimizer.lr=0.1 optimizer.schedule=cosine epochs=$E \
  eval_every=1 eval.nodes=64 device=cpu progress=false checkpoint=false tensorboard=false sim.chunk=layers:1024 \
  sim.compile=false device_model.name=fixed device_model.step_s=0.01 out_dir=$OUT name=mnist-n$N-e$E
