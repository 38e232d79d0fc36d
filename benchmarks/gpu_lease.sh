#!/bin/bash
# The one-call script of a GPU lease (the device tool; docs/results/execution_speed.md "Measured on a GPU"):
# first FP32 vs 8-bit eager vs 8-bit compiled steps (benchmarks/lowprec_step.py, docs/results/lowprec_overhead.md),
# then CUDA checks, a throughput table, then the issue-34 CIFAR-10 cells that are not finished,
# JOBS at a time, until DEADLINE seconds; finished cells come back in $OUT/cells.tgz.
#
# Prepare the carried folder .gpu/ (git-ignored) on the development machine:
#   .gpu/cifar10.tar.gz  the CIFAR-10 tarball (../shared/data/cifar10/YoongiKim-CIFAR-10-images.tar.gz)
#   .gpu/site/           pip install --no-deps --target .gpu/site omegaconf antlr4-python3-runtime==4.9.3
#                        (the lent machine's image has torch, numpy, PyYAML, tqdm, matplotlib, scikit-learn)
#   .gpu/src/            the decent8 source the sweep's cells were run with (a pinned worktree's src/)
#   .gpu/run.sh          this file
# and run it with carry [".gpu"]: `DEADLINE=540 bash .gpu/run.sh`. Then unpack cells.tgz, copy the
# finished cell folders into docs/results/cifar10_fast and register them with `decent8 sweep ... --plan-only`.
START=$(date +%s); DEADLINE=${DEADLINE:-515}
el() { echo $(( $(date +%s) - START )); }
SITE=$PWD/.gpu/site
mkdir -p $OUT/logs
{ nvidia-smi; python3 -c "import torch,sys,os;print(sys.version);print(torch.__version__, torch.cuda.get_device_name(0), 'cpus', os.cpu_count(), len(os.sched_getaffinity(0)))"; } > $OUT/logs/env.txt 2>&1
grep -E "cpus" $OUT/logs/env.txt
CPUS=$(python3 -c "import os;print(len(os.sched_getaffinity(0)))")
JOBS=${JOBS:-$(( CPUS/2 < 6 ? CPUS/2 : 6 ))}; [ $JOBS -lt 1 ] && JOBS=1
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 MKL_NUM_THREADS=2
echo "[$(el)s] 8-bit vs FP32 steps on the GPU, before anything else: eager (the fused quantizer and the eager passes)"
PYTHONPATH=src:$SITE timeout 120 python3 benchmarks/lowprec_step.py --device cuda --cases resnet20:8:16 cnn:64 \
  --no-compile --rounds 10 > $OUT/logs/lowprec_eager.txt 2>&1
grep -v "^  " $OUT/logs/lowprec_eager.txt
echo "[$(el)s] ... and compiled (sim.compile=true: Triton; the first step compiles)"
PYTHONPATH=src:$SITE timeout 240 python3 benchmarks/lowprec_step.py --device cuda --cases resnet20:8:16 \
  --rounds 10 --no-ops > $OUT/logs/lowprec_compiled.txt 2>&1
cat $OUT/logs/lowprec_compiled.txt
( PYTHONPATH=.gpu/src:$SITE python3 -c "
from decent8.data.cifar10 import load_cifar10; d=load_cifar10('.gpu/cifar10.tar.gz', image_size=16); print('decoded')" ) > $OUT/logs/decode.txt 2>&1 &
DEC=$!
echo "[$(el)s] CUDA checks: sim.chunk=auto on an augmented ResNet"
PYTHONPATH=src:$SITE timeout 90 python3 -m pytest -p no:cacheprovider -n 0 -o addopts="" -q tests/train/test_cuda.py -k "auto" > $OUT/logs/pytest_auto.txt 2>&1
RC=$?; tail -n 3 $OUT/logs/pytest_auto.txt
CHUNK=auto; [ $RC -ne 0 ] && CHUNK=1
echo "[$(el)s] sim_throughput on CUDA (alone)"
PYTHONPATH=src:$SITE timeout 45 python3 benchmarks/sim_throughput.py --device cuda --nodes 8 64 --steps 10 > $OUT/logs/sim_throughput.txt 2>&1
tail -n 8 $OUT/logs/sim_throughput.txt
wait $DEC; tail -n 1 $OUT/logs/decode.txt
echo "[$(el)s] cells: sim.chunk=$CHUNK, $JOBS at a time"
S="paper/cifar10_findings_fast data.root=.gpu/cifar10.tar.gz out_dir=/tmp/gpu --name cifar10_fast sim.chunk=$CHUNK"
: > /tmp/cells.txt
for seed in 1 2 0; do
  for c in "algorithm=choco comp=0 skew=0 precision=int8" "algorithm=choco comp=0 skew=0 precision=fp32" \
           "algorithm=choco comp=0 skew=0.9 precision=fp32" "algorithm=choco comp=0 skew=0.9 precision=int8" \
           "algorithm=choco comp=99 skew=0 precision=fp32" "algorithm=choco comp=99 skew=0 precision=int8" \
           "algorithm=deepsqueeze comp=99 skew=0 precision=fp32"; do
    if [ $seed = 0 ]; then case "$c" in *comp=99*int8*|*deepsqueeze*) ;; *) continue;; esac; fi
    echo "$c seed=$seed" >> /tmp/cells.txt
  done
done
cat > /tmp/pool.sh <<POOL
cd $PWD
xargs -P $JOBS -L 1 sh -c 'n=\$(echo "\$*" | tr " =" "_-"); PYTHONPATH=.gpu/src:$SITE python3 -m decent8.cli.main sweep $S "\$@" --quiet > $OUT/logs/cell_\$n.log 2>&1; echo "[\$(date +%T)] \$n rc=\$?"' sh < /tmp/cells.txt
POOL
date +%T > $OUT/logs/pool.txt
setsid bash /tmp/pool.sh >> $OUT/logs/pool.txt 2>&1 &
POOL=$!
sleep 30
PYTHONPATH=src:$SITE timeout 150 python3 -m pytest -p no:cacheprovider -n 0 -o addopts="" -q tests/train/test_cuda.py \
  tests/compression/test_compression.py::test_cuda tests/data/test_augment.py::test_cpu_and_cuda_draw_the_same_crops > $OUT/logs/pytest_cuda.txt 2>&1 &
while kill -0 $POOL 2>/dev/null && [ $(el) -lt $DEADLINE ]; do sleep 5; done
if kill -0 $POOL 2>/dev/null; then echo "[$(el)s] deadline: SIGTERM to the pool"; kill -TERM -- -$POOL; sleep 15; kill -KILL -- -$POOL 2>/dev/null; fi
tail -n 3 $OUT/logs/pytest_cuda.txt
cat $OUT/logs/pool.txt
cd /tmp/gpu && tar czf $OUT/cells.tgz --exclude=checkpoint.pt --exclude='*.pdf' --exclude='*.png' --exclude=tensorboard cifar10_fast
for f in cifar10_fast/*/summary.json; do python3 -c "
import json,sys;s=json.load(open('$f'));print('$f'.split('/')[1], round(100*s['mean_node_accuracy'],2), round(s['wall_time_s']), s.get('measured_compute_s_per_step'), s.get('sim_chunk'))"; done 2>/dev/null
cd - >/dev/null; tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $OUT/logs
echo "[$(el)s] done"
