"""Per-node (personalized) evaluation: each node's accuracy on the test set reweighted to its
own training label distribution (issue 33; train/personal.py)."""
from __future__ import annotations

import numpy as np
import torch

from decent8.train.personal import class_weights


def test_class_weights_hand_computed():
    y_train = torch.tensor([0, 0, 0, 1, 2, 2])
    y_test = torch.tensor([0, 1, 1, 2])           # q = (1/4, 1/2, 1/4)
    parts = [np.array([0, 1, 2, 3]), np.array([4, 5])]
    w = class_weights(parts, y_train, y_test)
    # node 0: π = (3/4, 1/4, 0) → w = (3, 1/2, 0); node 1: π = (0, 0, 1) → w = (0, 0, 4)
    np.testing.assert_allclose(w.numpy(), [[3.0, 0.5, 0.0], [0.0, 0.0, 4.0]])
    # the reweighted test set has the node's label distribution: Σ_s w(y_s) [y_s = c] / Σ_s w(y_s) = π(c)
    mass = np.array([[w[i, y].item() for y in y_test.tolist()] for i in range(2)])
    np.testing.assert_allclose(mass[0] / mass[0].sum(), [3 / 4, 1 / 8, 1 / 8, 0])
    assert class_weights(parts, y_train.float(), y_test) is None      # regression targets: no classes
    # a class the test set lacks gets weight 0 (no division by zero)
    w2 = class_weights([np.array([0, 3])], torch.tensor([0, 0, 0, 3]), torch.tensor([0, 0]))
    np.testing.assert_allclose(w2.numpy(), [[0.5, 0, 0, 0]])   # π = (1/2, 0, 0, 1/2), q = (1, 0, 0, 0)


def test_engine_personalized_accuracy_equals_per_class_accuracy_weighted_by_own_labels():
    from decent8.config import load_config
    from decent8.train.build import build
    from decent8.train.engine import Engine
    cfg = load_config(None, ["nodes=4", "device=cpu", "progress=false", "model.width=4", "sim.chunk=1", "skew=0.9"])
    c = build(cfg)
    engine = Engine(c.model, c.algorithm, c.optimizer, c.comm, c.x0)
    idx = c.sampler.epoch_indices(0)
    for s in range(3):   # the nodes differ after a few local steps
        engine.train_step(c.dataset.x_train[idx[:, s]], c.dataset.y_train[idx[:, s]], lr=0.1)
    ds = c.dataset
    w = class_weights(c.parts, ds.y_train, ds.y_test)
    out = engine.evaluate(ds.x_test, ds.y_test, 97, class_weights=w)   # odd batch: sums across batches
    pred = c.model.logits(engine.params(), ds.x_test).argmax(-1)        # [n, N]
    y = ds.y_test.numpy()
    C = int(max(ds.y_train.max(), ds.y_test.max())) + 1
    expect = []
    for i, p in enumerate(c.parts):
        pi = np.bincount(ds.y_train.numpy()[p], minlength=C) / len(p)
        acc_c = np.array([(pred[i].numpy()[y == k] == k).mean() if (y == k).any() else 0.0 for k in range(C)])
        present = np.array([(y == k).any() for k in range(C)])
        expect.append((pi * acc_c).sum() / pi[present].sum())
    np.testing.assert_allclose(out["personalized_accuracies"], expect, atol=1e-6)
    assert abs(out["min_personalized_accuracy"] - min(expect)) < 1e-6
    acc = np.array(out["node_accuracies"])
    assert abs(out["p10_node_accuracy"] - np.percentile(acc, 10)) < 1e-6
    assert abs(out["p10_personalized_accuracy"] - np.percentile(expect, 10)) < 1e-6
    assert "personalized_accuracies" not in engine.evaluate(ds.x_test, ds.y_test, 1024)
