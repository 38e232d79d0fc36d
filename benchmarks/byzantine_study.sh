#!/usr/bin/env bash
# The Byzantine study (docs/results/byzantine.md) in the order its sweeps ran: every graph and skew
# at seed 0, the headline graph (4x4 torus, skew 0.8) first, then more seeds, the Erdős–Rényi graph
# (configs/paper/byzantine_er16.edges), Choco-SGD on the torus (paper/byzantine_choco_digits16) and an
# MNIST subset at 64 nodes (paper/byzantine_mnist64). One process, one thread; a sweep skips its
# finished cells. Each sweep's process CPU time is appended to docs/results/byzantine_cpu_times.txt
# (GNU time: user + system seconds).
set -u
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1
ATT="attack=sign_flip,alie,dissensus"
DEG2_DEF="defence=mean,clipped_gossip,self_centered_clipping"   # trimmed_mean refuses in-degree 2 (ring, er)
TIMES=docs/results/byzantine_cpu_times.txt

dpsgd() {   # graph skew seed
  local extra=""; [ "$1" != torus ] && extra="$DEG2_DEF"
  for part in "byz=0 attack=none" "byz=1,2,4 $ATT"; do
    /usr/bin/time -a -o $TIMES -f "graph=$1 skew=$2 seed=$3 $part: %U user %S sys %e wall" \
      decent8 sweep paper/byzantine_digits16 out_dir=docs/results --name byzantine --quiet \
        graph=$1 skew=$2 seed=$3 $part $extra
  done
}

choco() {   # seed
  for part in "byz=0 attack=none" "byz=1,2,4 $ATT"; do
    /usr/bin/time -a -o $TIMES -f "choco seed=$1 $part: %U user %S sys %e wall" \
      decent8 sweep paper/byzantine_choco_digits16 out_dir=docs/results --name byzantine_choco --quiet seed=$1 $part
  done
}

for gss in "torus 0.8 0" "ring 0.8 0" "torus 0 0" "torus 0.8 1" "ring 0 0" "torus 0.8 2" "torus 0 1" \
           "er 0.8 0" "er 0.8 1" "er 0.8 2" "ring 0.8 1" "ring 0.8 2"; do
  dpsgd $gss
done
for seed in 0 1 2; do choco $seed; done
for gss in "torus 0 2" "ring 0 1" "ring 0 2" "er 0 0" "er 0 1" "er 0 2"; do
  dpsgd $gss
done
for part in "byz=0 attack=none" "byz=4 attack=sign_flip,dissensus" "byz=8 attack=sign_flip,dissensus"; do
  /usr/bin/time -a -o $TIMES -f "mnist64 $part: %U user %S sys %e wall" \
    decent8 sweep paper/byzantine_mnist64 out_dir=docs/results --name byzantine_mnist64 --quiet \
      data.root="${MNIST:-../shared/data/mnist/rasbt-mnist-pngs.tar.gz}" $part
done
