"""One rank of tests/comm/test_hybrid.py: every case of hybrid_steps on node blocks over
WORLD_SIZE gloo ranks in one process group; rank 0 saves the results."""
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hybrid_steps import CASES, UNEVEN, comm_checks, config, run_steps  # noqa: E402

out, graph, placement = sys.argv[1], sys.argv[2], sys.argv[3]
R = int(os.environ["WORLD_SIZE"])
cases = dict(CASES)
if R == 4:
    cases.update(UNEVEN)
results = {}
report = comm_checks(graph, placement)
for name, case in cases.items():
    cfg = config(case, graph, ["backend=distributed", f"dist.ranks={R}", f"dist.placement={placement}",
                               "dist_timeout_s=60"])
    params, sent, record = run_steps(cfg)
    results[name] = {"params": params, "bytes": sent, "record": record}
torch.save(report, os.path.join(out, f"comm-R{R}-{placement}-rank{dist.get_rank()}.pt"))
if dist.get_rank() == 0:
    torch.save(results, os.path.join(out, f"hybrid-R{R}-{placement}.pt"))
dist.barrier()
dist.destroy_process_group()
