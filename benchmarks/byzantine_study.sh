#!/usr/bin/env bash
# The Byzantine study (docs/results/byzantine.md) in the order its cells ran: every graph and skew
# at seed 0, the headline graph (4x4 torus, skew 0.8) first, then more seeds, as far as the shared
# 2-core machine allowed (docs/results/byzantine.md says which cells ran). One process, one thread; each sweep's process CPU time is
# appended to docs/results/byzantine_cpu_times.txt (GNU time: user + system seconds).
set -u
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1
ATT="attack=sign_flip,alie,dissensus"
RING_DEF="defence=mean,clipped_gossip,self_centered_clipping"   # trimmed_mean refuses in-degree 2
for gss in "torus 0.8 0" "ring 0.8 0" "torus 0 0" "torus 0.8 1" "ring 0 0" "torus 0.8 2" \
           "ring 0.8 1" "torus 0 1" "ring 0 1" "ring 0.8 2" "torus 0 2" "ring 0 2"; do
  set -- $gss
  extra=""; [ "$1" = ring ] && extra="$RING_DEF"
  for part in "byz=0 attack=none" "byz=1,2,4 $ATT"; do
    /usr/bin/time -a -o docs/results/byzantine_cpu_times.txt -f "graph=$1 skew=$2 seed=$3 $part: %U user %S sys %e wall" \
      decent8 sweep paper/byzantine_digits16 out_dir=docs/results --name byzantine --quiet \
        graph=$1 skew=$2 seed=$3 $part $extra
  done
done
