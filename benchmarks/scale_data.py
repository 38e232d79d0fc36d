"""Data for 10,000 nodes: MNIST labels, each partition and the sampler (docs/results/scale_10k.md)."""
import os, time, resource
import numpy as np
from decent8.config import load_config
from decent8.data.registry import dataset_from_config
from decent8.data.partition import class_counts, dirichlet_partition, make_partition
from decent8.errors import ConfigError
from decent8.data.sampler import NodeSampler
t = time.perf_counter()
SMOKE = os.environ.get("DECENT8_BENCH_SMOKE", "") not in ("", "0")  # digits and 100 nodes: a check that it runs
data = ["data.name=digits"] if SMOKE else ["data.name=mnist", "data.root=/work/shared/data/mnist/rasbt-mnist-pngs.tar.gz"]
ds = dataset_from_config(load_config(None, data).data, 0)
print(f"load MNIST (cached arrays): {time.perf_counter() - t:.2f} s", flush=True)
y, n = ds.partition_labels, (100 if SMOKE else 10000)
for name, kw in [("skew", dict(skew=0.0)), ("skew", dict(skew=0.8)), ("shards", dict(shards_per_node=2)),
                 ("dirichlet", dict(alpha=10.0))]:
    t = time.perf_counter()
    parts = make_partition(name, y, n, 0, **kw)
    dt = time.perf_counter() - t
    sizes = np.array([len(p) for p in parts])
    print(f"{name} {kw}: {dt:.3f} s; samples per node min {sizes.min()} mean {sizes.mean():.2f} max {sizes.max()}", flush=True)
for alpha in (0.1, 1.0, 100.0):  # every node needs >= 1 sample: resampled up to 20 times here (make_partition: 1000)
    t = time.perf_counter()
    try:
        dirichlet_partition(y, n, alpha, 0, max_tries=20)
        what = "ok"
    except ConfigError:
        what = "no partition with every node non-empty in 20 tries"
    print(f"dirichlet alpha={alpha}: {what}, {time.perf_counter() - t:.2f} s", flush=True)
parts = make_partition("shards", y, n, 0, shards_per_node=2)
t = time.perf_counter(); class_counts(parts, y, 10); print(f"class_counts: {time.perf_counter() - t:.3f} s")
t = time.perf_counter(); s = NodeSampler(parts, range(n), 6, 0); print(f"NodeSampler init: {time.perf_counter() - t:.3f} s")
t = time.perf_counter(); idx = s.epoch_indices(0); print(f"epoch_indices (vectorised): {time.perf_counter() - t:.3f} s {tuple(idx.shape)}")
t = time.perf_counter(); xb = ds.x_train[idx[:, 0]]; print(f"one gather [10000, 6, 1, 28, 28] uint8: {time.perf_counter() - t:.4f} s")
print(f"sampler state: {s.flat.nbytes + s.offsets.nbytes} B = {(s.flat.nbytes + s.offsets.nbytes) / n:.1f} B per node")
print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.2f} GB")
print(f"\n| nodes | sampler state (B / node) | peak RSS (GB) |\n|---:|---:|---:|\n| {n} | "
      f"{(s.flat.nbytes + s.offsets.nbytes) / n:.1f} | {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.2f} |")
