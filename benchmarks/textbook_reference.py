"""decent8's CIFAR-10 ResNet-20 trained by a textbook single-model loop: the reference a
decentralized run is compared with (docs/results/cifar10_findings.md, "A textbook loop").

One model (decent8's ``make_model``, so the same architecture and initialization), plain
``torch.optim.SGD`` (Nesterov momentum 0.9, weight decay 5e-4 on every parameter, as the
local optimizer of the findings preset), a per-step cosine decay to 0 without warm-up, the
same data, crops and flips as a decent8 run (its batch transform, one "node"), batches
drawn without replacement each epoch, test accuracy on the whole test split after each
epoch. Prints one row per epoch. No gossip, no stacked buffer: if a decent8 run with exact
averaging (complete graph) matches this at the same global batch, the decentralized
machinery costs nothing of its own.

    python benchmarks/textbook_reference.py --root CIFAR --image-size 16 --epochs 2 --batch 256 --lr 0.1
"""
from __future__ import annotations

import argparse
import math
import os
import time

import torch
import torch.nn.functional as F

from decent8.data.augment import make_batch_transform
from decent8.data.registry import load_dataset
from decent8.models import make_model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", help="CIFAR-10 (any format decent8 reads)")
    ap.add_argument("--image-size", type=int, default=32)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--warmup-epochs", type=float, default=0.0, help="linear warm-up from 0 (then cosine)")
    ap.add_argument("--norm", default="evonorm")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    if os.environ.get("DECENT8_BENCH_SMOKE", "") not in ("", "0"):  # random 8 px images, 1 epoch: a check that it runs
        from decent8.data.dataset import ArrayDataset
        x = torch.randint(0, 256, (64, 3, 8, 8), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
        ds = ArrayDataset(x, torch.arange(64) % 10, x[:16], torch.arange(16) % 10, 10, [str(c) for c in range(10)],
                          "random", mean=(0.5,) * 3, std=(0.25,) * 3, augment="crop_flip")
        args.epochs, args.batch, args.image_size = 1, 16, 8
    elif args.root is None:
        ap.error("--root is required")
    else:
        ds = load_dataset("cifar10", args.root, image_size=args.image_size)
    model = make_model("resnet20", ds.input_shape, ds.num_classes, norm=args.norm, seed=args.seed)
    transform = make_batch_transform(ds, True, args.seed, [0])
    x_test, y_test = transform.prepare_eval(ds.x_test), ds.y_test
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, nesterov=True, weight_decay=5e-4)
    per_epoch = len(ds.y_train) // args.batch
    total, warm = args.epochs * per_epoch, int(args.warmup_epochs * per_epoch)

    def factor(t: int) -> float:
        if t < warm:
            return (t + 1) / warm
        return 0.5 * (1 + math.cos(math.pi * (t - warm) / max(1, total - warm)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
    gen = torch.Generator().manual_seed(args.seed)
    print(f"| epoch | train loss | test acc. | wall s |  (resnet20/{args.norm}, {args.image_size} px, batch "
          f"{args.batch}, lr {args.lr}, warm-up {args.warmup_epochs}, seed {args.seed})\n|---:|---:|---:|---:|")
    t0, step = time.perf_counter(), 0
    for epoch in range(args.epochs):
        model.train()
        perm, loss_sum = torch.randperm(len(ds.y_train), generator=gen), 0.0
        for i in range(per_epoch):
            idx = perm[i * args.batch:(i + 1) * args.batch]
            x = transform(ds.x_train[idx].unsqueeze(0), step)[0]
            loss = F.cross_entropy(model(x), ds.y_train[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            loss_sum += loss.item()
            step += 1
        model.eval()
        with torch.no_grad():
            correct = sum((model(x_test[j:j + 1000]).argmax(1) == y_test[j:j + 1000]).sum().item()
                          for j in range(0, len(y_test), 1000))
        print(f"| {epoch + 1} | {loss_sum / per_epoch:.3f} | {100 * correct / len(y_test):.2f} % | "
              f"{time.perf_counter() - t0:.0f} |", flush=True)


if __name__ == "__main__":
    main()
