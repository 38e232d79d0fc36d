#!/usr/bin/env bash
# AD-PSGD vs D-PSGD time-to-accuracy on digits with stragglers (docs/results/adpsgd.md).
# 16 nodes on a ring, skew 0.8, MLP, 30 epochs, fixed 10 ms compute per step, 10 % of the
# nodes (2) 4x slower, 50 us / 1000 Mbit/s links; one run at a time, one thread.
set -euo pipefail
OUT=${OUT:-docs/results/adpsgd}
COMMON="data.name=digits model=mlp nodes=16 topology=ring compression=identity epochs=30 eval_every=1
 algorithm.consensus_rounds=0 device=cpu progress=false checkpoint=false tensorboard=false
 network.name=custom network.latency_s=5e-5 network.bandwidth_mbit_s=1000
 device_model.name=fixed device_model.step_s=0.01 out_dir=$OUT"
run() { OMP_NUM_THREADS=1 python -m decent8 train $COMMON "$@" > /dev/null; }
for seed in ${SEEDS:-0 1 2}; do
  for algo in dpsgd adpsgd; do
    run algorithm=$algo seed=$seed device_model.straggler_fraction=0.1 device_model.straggler_factor=4 \
        name=$algo-straggler-seed$seed
  done
done
for algo in dpsgd adpsgd; do  # the same without stragglers (seed 0)
  run algorithm=$algo seed=0 name=$algo-uniform-seed0
done
