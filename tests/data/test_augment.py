"""Batched augmentation: equals a per-image reference, is per-node deterministic, normalizes with train stats."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from decent8.data.augment import BatchTransform, make_batch_transform
from decent8.data.dataset import ArrayDataset

MEAN, STD = (0.5, 0.4, 0.3), (0.25, 0.2, 0.3)


def _pixels(k=3, b=5, c=3, h=8, w=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (k, b, c, h, w), generator=g, dtype=torch.uint8)


def _normalize(x):
    m = torch.tensor(MEAN).view(-1, 1, 1)
    s = torch.tensor(STD).view(-1, 1, 1)
    return (x.float() / 255 - m) / s


def test_crop_flip_equals_a_per_image_reference():
    t = BatchTransform("crop_flip", MEAN, STD, seed=1, local_nodes=[0, 1, 2])
    x = _pixels()
    out = t(x, step=7)
    assert out.shape == x.shape and out.dtype == torch.float32
    dy, dx, flip = t.crop_flip_params(7, 5, 8)
    for n in range(3):
        for i in range(5):
            padded = F.pad(x[n, i], (4, 4, 4, 4))                     # zero (black) padding, as torchvision
            crop = padded[:, dy[n, i]:dy[n, i] + 8, dx[n, i]:dx[n, i] + 8]
            if flip[n, i]:
                crop = crop.flip(-1)
            torch.testing.assert_close(out[n, i], _normalize(crop), rtol=0, atol=1e-5)


def test_crop_flip_parameters_cover_the_range():
    t = BatchTransform("crop_flip", MEAN, STD, seed=0, local_nodes=list(range(8)))
    dy, dx, flip = t.crop_flip_params(0, 512, 8)
    assert dy.min() == 0 and dy.max() == 8 and dx.min() == 0 and dx.max() == 8
    assert 0.45 < flip.float().mean().item() < 0.55


def test_a_node_draws_the_same_crops_alone_or_with_the_others():
    """The simulator (all nodes in one process) and a distributed rank (one node) agree."""
    x = _pixels(k=4)
    together = BatchTransform("crop_flip", MEAN, STD, seed=3, local_nodes=[0, 1, 2, 3])(x, step=11)
    for node in range(4):
        alone = BatchTransform("crop_flip", MEAN, STD, seed=3, local_nodes=[node])(x[node:node + 1], step=11)
        torch.testing.assert_close(alone[0], together[node], rtol=0, atol=0)


def test_randomness_depends_on_step_and_seed_only():
    x = _pixels()
    a = BatchTransform("crop_flip", MEAN, STD, seed=0, local_nodes=[0, 1, 2])
    b = BatchTransform("crop_flip", MEAN, STD, seed=0, local_nodes=[0, 1, 2])
    torch.testing.assert_close(a(x, 5), b(x, 5), rtol=0, atol=0)
    a(x, 6)                                          # no hidden state: step 5 again gives the same
    torch.testing.assert_close(a(x, 5), b(x, 5), rtol=0, atol=0)
    assert not torch.equal(a(x, 5), a(x, 6))
    c = BatchTransform("crop_flip", MEAN, STD, seed=1, local_nodes=[0, 1, 2])
    assert not torch.equal(a(x, 5), c(x, 5))


def test_resized_crop_boxes_follow_torchvisions_rule():
    t = BatchTransform("resized_crop_flip", MEAN, STD, seed=0, local_nodes=[0, 1])
    top, left, bh, bw, flip = t.resized_crop_params(0, 2000, 32, 48)
    assert (top >= 0).all() and (left >= 0).all() and (top + bh <= 32).all() and (left + bw <= 48).all()
    area = bh * bw / (32 * 48)
    assert area.min() >= 0.08 - 0.02 and area.max() <= 1.0
    ratio = bw / bh
    assert ratio.min() >= 3 / 4 - 0.1 and ratio.max() <= 4 / 3 + 0.1
    assert 0.45 < flip.float().mean().item() < 0.55


def test_resized_crop_of_the_whole_image_is_the_image_and_flip_mirrors():
    t = BatchTransform("resized_crop_flip", MEAN, STD, seed=0, local_nodes=[0])
    x = torch.rand(2, 3, 16, 16)
    full = torch.tensor([0.0, 0.0]), torch.tensor([0.0, 0.0]), torch.tensor([16.0, 16.0]), torch.tensor([16.0, 16.0])
    out = t.resized_crop(x, *full, torch.tensor([False, True]))
    torch.testing.assert_close(out[0], x[0], rtol=0, atol=1e-5)
    torch.testing.assert_close(out[1], x[1].flip(-1), rtol=0, atol=1e-5)
    # a box is resampled from its own pixels: the top-left quarter, upsampled ×2 (nearest pixels agree)
    out = t.resized_crop(x, torch.tensor([0.0, 0.0]), torch.tensor([0.0, 0.0]), torch.tensor([8.0, 8.0]),
                         torch.tensor([8.0, 8.0]), torch.tensor([False, False]))
    torch.testing.assert_close(out[:, :, 1::2, 1::2][:, :, :7, :7],
                               (0.75 * x[:, :, :7, :7] + 0.25 * x[:, :, 1:8, :7]) * 0.75
                               + (0.75 * x[:, :, :7, 1:8] + 0.25 * x[:, :, 1:8, 1:8]) * 0.25, rtol=0, atol=1e-5)


def test_resized_crop_batch_shapes_and_normalization():
    t = BatchTransform("resized_crop_flip", MEAN, STD, seed=0, local_nodes=[0, 1])
    x = torch.full((2, 3, 3, 16, 16), 128, dtype=torch.uint8)
    out = t(x, step=0)
    assert out.shape == (2, 3, 3, 16, 16)
    torch.testing.assert_close(out, _normalize(x), rtol=0, atol=1e-5)   # a flat image stays flat


def test_prepare_eval_normalizes_without_augmenting():
    t = BatchTransform("crop_flip", MEAN, STD, seed=0, local_nodes=[0])
    x = _pixels(k=1)[0]
    torch.testing.assert_close(t.prepare_eval(x, chunk=2), _normalize(x), rtol=0, atol=1e-6)


def test_float_and_token_data_pass_through():
    ds = ArrayDataset(torch.rand(4, 1, 8, 8), torch.zeros(4, dtype=torch.long), torch.rand(2, 1, 8, 8),
                      torch.zeros(2, dtype=torch.long), 10, [str(i) for i in range(10)], "digits")
    t = make_batch_transform(ds, True, 0, [0, 1])
    xb = torch.rand(2, 2, 1, 8, 8)
    assert t(xb, 0) is xb and t.prepare_eval(ds.x_test) is ds.x_test
    tokens = torch.randint(0, 100, (2, 3, 16))
    assert t(tokens, 0) is tokens


def test_augment_false_only_normalizes():
    ds = ArrayDataset(_pixels(k=1)[0], torch.zeros(5, dtype=torch.long), _pixels(k=1)[0], torch.zeros(5, dtype=torch.long),
                      10, [str(i) for i in range(10)], "cifar10", mean=MEAN, std=STD, augment="crop_flip")
    t = make_batch_transform(ds, False, 0, [0, 1, 2])
    x = _pixels()
    torch.testing.assert_close(t(x, 3), _normalize(x), rtol=0, atol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cpu_and_cuda_draw_the_same_crops():
    x = _pixels()
    cpu = BatchTransform("crop_flip", MEAN, STD, seed=2, local_nodes=[0, 1, 2])(x, 4)
    gpu = BatchTransform("crop_flip", MEAN, STD, seed=2, local_nodes=[0, 1, 2], device="cuda")(x.cuda(), 4)
    torch.testing.assert_close(gpu.cpu(), cpu, rtol=0, atol=1e-5)
