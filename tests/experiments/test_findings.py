"""The paper's findings checked with mean ± standard error (decent8.experiments.findings)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import pytest

from decent8.experiments.findings import Comparison, compare, markdown, summary_verdict, t975


@dataclass
class Cell:
    settings: dict
    acc: float
    summary: dict = field(init=False)

    def __post_init__(self) -> None:
        self.summary = {"mean_node_accuracy": self.acc / 100}


def get(cell: Cell, key: str):
    return cell.settings.get(key)


def test_t_quantiles_round_the_degrees_of_freedom_down():
    assert t975(1) == 12.706 and t975(4) == 2.776 and t975(4.9) == 2.776 and t975(11) == 2.228
    assert t975(0.3) == 12.706 and t975(1e6) == 1.96


def test_difference_standard_error_and_interval_by_hand():
    c = Comparison("a", "x", [90.0, 91.0, 92.0], [89.0, 89.0, 92.0], -1.0, 1.0)
    # means 91 and 90; sample variances 1 and 3 → SE = sqrt(1/3 + 3/3) = sqrt(4/3)
    assert c.diff == pytest.approx(1.0)
    assert c.se == pytest.approx(math.sqrt(4 / 3))
    # Welch df = (4/3)² / ((1/3)²/2 + 1²/2) = 3.2 → t(3) = 3.182
    lo, hi = c.interval()
    assert lo == pytest.approx(1.0 - 3.182 * math.sqrt(4 / 3)) and hi == pytest.approx(1.0 + 3.182 * math.sqrt(4 / 3))
    assert c.verdict() == "cannot tell"          # [-2.67, 4.67] straddles both ends of [-1, 1]


def test_verdicts_inside_outside_and_one_run():
    tight = [90.0, 90.1, 89.9]
    assert Comparison("a", "", tight, [89.9, 90.0, 90.1], -1, 1).verdict() == "holds"
    assert Comparison("a", "", [95.0, 95.1, 94.9], tight, -1, 1).verdict() == "does not hold"
    assert Comparison("d", "", [95.0, 95.1, 94.9], tight, lo=0).verdict() == "holds"
    assert Comparison("d", "", tight, [95.0, 95.1, 94.9], lo=0).verdict() == "does not hold"
    assert Comparison("a", "", [90.0], tight, -1, 1).verdict() == "cannot tell (one run)"


def _sweep(values) -> list[Cell]:
    """Three seeds per cell, accuracy ``values(algorithm, precision, compressed, skew) ± 0.1``."""
    cells = []
    for algo in ("choco", "deepsqueeze"):
        for prec in ("fp32", "int8"):
            for comp in ("identity", "topk"):
                for skew in (0.0, 0.9):
                    base = values(algo, prec, comp == "topk", skew)
                    for noise in (-0.1, 0.0, 0.1):
                        cells.append(Cell({"algorithm": algo, "precision": prec, "compression": comp,
                                           "skew": skew}, base + noise))
    return cells


def test_a_synthetic_table3_sweep_gets_the_verdicts_its_numbers_imply():
    def values(algo, prec, compressed, skew):
        v = 90.0 - 5.0 * skew                                         # (c): skew costs 4.5 points
        if compressed:
            v -= 1.0 + (1.5 if prec == "int8" else 0.0)               # (b): 8-bit costs 1.5 more
            v += 0.8 if algo == "choco" else 0.0                       # (d): Choco ahead by 0.8
        elif prec == "int8":
            v -= 0.2                                                  # (a): within 1 point
        if prec == "int8" and skew == 0.9:
            v -= 3.0 if compressed else 0.0                           # (e): 8-bit behind when compressed
        return v

    rows = compare(_sweep(values), get)
    by = {}
    for r in rows:
        by.setdefault(r.finding, []).append(r)
    assert set(by) == {"a", "b", "c", "d", "e"}
    # (a): D = −0.2, SE = 0.1·sqrt(2/3), df 4 → [−0.43, +0.03] inside [−1, 1]
    assert summary_verdict(by["a"]) == "holds" and len(by["a"]) == 4
    assert summary_verdict(by["c"]) == "holds" and len(by["c"]) == 8
    assert summary_verdict(by["d"]) == "holds" and len(by["d"]) == 4
    b09 = [r for r in by["b"] if "0.9" in r.what]
    assert all(r.diff == pytest.approx(4.5) and r.verdict() == "does not hold" for r in b09)
    b0 = [r for r in by["b"] if r.what.endswith("skew 0")]
    assert all(r.diff == pytest.approx(1.5) and r.verdict() == "holds" for r in b0)
    e = {r.what: r.verdict() for r in by["e"]}
    assert e["choco, compressed, skew 0.9"] == "does not hold"            # D = −4.5
    assert e["choco, no compression, skew 0.9"] == "cannot tell"          # D = −0.2: [−0.43, +0.03] holds 0
    assert summary_verdict(by["e"]) == "mixed: 2 does not hold, 2 cannot tell"
    text = markdown(rows)
    assert "| (d) with compression, Choco-SGD ≥ Deep-Squeeze (Choco − DS) | holds |" in text
    assert "| (b) | choco, skew 0.9 | +4.50 |" in text


def test_cells_without_both_sides_give_no_comparison():
    cells = [Cell({"algorithm": "choco", "precision": "fp32", "compression": "topk", "skew": 0.0}, 90.0)]
    assert compare(cells, get) == [] and markdown([]) == ""


def test_8_bit_runs_at_two_wires_are_compared_with_fp32_apart():
    """8-bit with float32 messages (the authors' setting) and 8-bit with 8-bit messages are
    two comparisons of (b), each against the FP32 runs; runs without a recorded wire count
    as the automatic one (8-bit messages at 8 bits)."""
    cells = []
    for prec, wire, acc in (("fp32", None, 42.0), ("int8", None, 33.0), ("int8", "fp32", 40.5)):
        for noise in (-0.1, 0.0, 0.1):
            cell = Cell({"algorithm": "choco", "precision": prec, "compression": "topk", "skew": 0.0}, acc + noise)
            if wire:
                cell.summary["wire"] = wire
            cells.append(cell)
    rows = {c.what: c for c in compare(cells, get) if c.finding == "b"}
    assert set(rows) == {"choco, skew 0, int8 wire", "choco, skew 0, fp32 wire"}
    assert rows["choco, skew 0, int8 wire"].diff == pytest.approx(9.0)
    assert rows["choco, skew 0, fp32 wire"].diff == pytest.approx(1.5)
    assert rows["choco, skew 0, fp32 wire"].verdict() == "holds"
    # one wire only: the labels stay as they were
    assert {c.what for c in compare(cells[:6], get) if c.finding == "b"} == {"choco, skew 0"}


def test_8_bit_runs_with_another_norm_layer_are_compared_with_fp32_apart():
    """An 8-bit run whose ``model.norm`` is set (EvoNorm-S0 in place of the paper's Range
    EvoNorm) is its own comparison, never pooled with the 8-bit runs at the model's default;
    the FP32 side stays the FP32 runs at the default norm layer."""
    cells = []
    for prec, norm, acc in (("fp32", None, 42.0), ("int8", None, 33.0), ("int8", "evonorm", 40.5),
                            ("fp32", "bn", 10.0)):
        for noise in (-0.1, 0.0, 0.1):
            settings = {"algorithm": "choco", "precision": prec, "compression": "topk", "skew": 0.0}
            if norm:
                settings["model.norm"] = norm
            cells.append(Cell(settings, acc + noise))
    rows = {c.what: c for c in compare(cells, get) if c.finding == "b"}
    assert set(rows) == {"choco, skew 0", "choco, skew 0, evonorm"}
    assert rows["choco, skew 0"].diff == pytest.approx(9.0)
    assert rows["choco, skew 0, evonorm"].diff == pytest.approx(1.5)
