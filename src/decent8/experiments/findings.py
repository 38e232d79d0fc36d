"""The paper's findings checked on a sweep, with mean ± standard error (docs/experiments.md, "Findings").

A finding compares two groups of runs (the seeds of two cells): the difference of their
mean accuracies D = mean(A) − mean(B) (points), its standard error
SE = sqrt(s_A²/n_A + s_B²/n_B) (sample standard deviations) and the 95 % interval
D ± t·SE, with t Student's 97.5 % quantile at the Welch–Satterthwaite degrees of freedom
(rounded down: conservative). Each finding states the region D must lie in; the verdict is

* **holds** — the whole interval lies in the region;
* **does not hold** — the interval lies wholly outside it;
* **cannot tell** — the interval straddles a boundary, or a group has fewer than two runs.

The findings (Aketi et al., Tables 3–6):

(a) without compression, 8-bit is within 1 point of FP32, IID and non-IID: LP − FP ∈ [−1, 1];
(b) with compression (99 % top-k), 8-bit costs 1–2 points: FP − LP ∈ [1, 2];
(c) accuracy falls as the skew rises: acc(lower skew) − acc(next higher skew) > 0;
(d) with compression, Choco-SGD ≥ Deep-Squeeze: Choco − DS ≥ 0;
(e) at the highest skew (0.9 in the paper), 8-bit ≥ FP32 (the paper's "regularization"
    claim, +0.5 points there): LP − FP ≥ 0.

Cells are told apart by their config (``precision``, ``algorithm``, ``skew`` and whether
``compression`` is ``identity``), so any sweep with those axes can be checked.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from .aggregate import mean_std

#: Student's t, 97.5 % quantile, by degrees of freedom (df above the last key: the normal 1.96)
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
         10: 2.228, 12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042, 60: 2.000}


def t975(df: float) -> float:
    """Student's t 97.5 % quantile at ``df`` degrees of freedom, rounded down to the table (≥ 1)."""
    if df > max(_T975):
        return 1.96
    return _T975[max(k for k in _T975 if k <= max(1.0, df))]


@dataclass
class Comparison:
    """One difference D = mean(a) − mean(b) (points) and its verdict against [lo, hi]."""

    finding: str
    what: str                    # which cells, in words
    a: list[float]
    b: list[float]
    lo: float = -math.inf
    hi: float = math.inf

    def _stats(self) -> tuple[float, float | None, float]:
        """(D, SE — None when a side has one run, Welch's degrees of freedom)."""
        (ma, sa, na), (mb, sb, nb) = mean_std(self.a), mean_std(self.b)
        if na < 2 or nb < 2:
            return ma - mb, None, math.inf
        va, vb = sa * sa / na, sb * sb / nb
        df = (va + vb) ** 2 / (va * va / (na - 1) + vb * vb / (nb - 1)) if va + vb > 0 else math.inf
        return ma - mb, math.sqrt(va + vb), df

    @property
    def diff(self) -> float:
        return self._stats()[0]

    @property
    def se(self) -> float | None:
        return self._stats()[1]

    def interval(self) -> tuple[float, float] | None:
        d, se, df = self._stats()
        if se is None:
            return None
        t = t975(df)
        return d - t * se, d + t * se

    def verdict(self) -> str:
        iv = self.interval()
        if iv is None:
            return "cannot tell (one run)"
        lo, hi = iv
        if self.lo <= lo and hi <= self.hi:
            return "holds"
        if hi < self.lo or lo > self.hi:
            return "does not hold"
        return "cannot tell"

    def claim(self) -> str:
        if math.isinf(self.lo) and math.isinf(self.hi):
            return "any"
        if math.isinf(self.hi):
            return f"≥ {self.lo:g}"
        if math.isinf(self.lo):
            return f"≤ {self.hi:g}"
        return f"in [{self.lo:g}, {self.hi:g}]"


#: (key, the finding in words)
FINDINGS = {
    "a": "without compression, 8-bit is within 1 point of FP32 (LP − FP)",
    "b": "with compression, 8-bit costs 1–2 points more than FP32 (FP − LP)",
    "c": "accuracy falls as the skew rises (lower skew − higher skew)",
    "d": "with compression, Choco-SGD ≥ Deep-Squeeze (Choco − DS)",
    "e": "at the highest skew, 8-bit ≥ FP32 (LP − FP; the paper: +0.5)",
}


def _float(v: Any) -> float | None:
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _wire(summary: dict, precision: str) -> str:
    """The precision the messages travelled in: ``summary.json``'s ``wire``, or for runs that
    predate the option the automatic one (8-bit messages when training in 8 bits)."""
    return str(summary.get("wire") or ("int8" if precision == "int8" else "fp32"))


def compare(cells: Sequence[Any], get: Callable[[Any, str], Any], metric: str = "mean_node_accuracy") -> list[Comparison]:
    """Every comparison of the five findings that ``cells`` allow.

    ``cells``: finished runs; ``get(cell, key)`` the value of a config key (``precision``,
    ``algorithm``, ``skew``, ``compression``); a cell's accuracy is ``cell.summary[metric]``.
    Runs are grouped by their wire (``compression.wire``) and norm layer (``model.norm``, when
    set; unset is the model's default for the precision): 8-bit training with float32 messages
    (the authors' setting), with 8-bit messages, or with another norm layer is compared with
    FP32 apart, and the cells say which wire and norm when a precision has more than one. The
    FP32 side is FP32 runs with a float32 wire and the default norm layer.
    """
    runs = []
    for c in cells:
        if not c.summary or metric not in c.summary:
            continue
        skew = _float(get(c, "skew"))
        precision = str(get(c, "precision") or "fp32")
        runs.append({"precision": precision, "algorithm": str(get(c, "algorithm")),
                     "skew": 0.0 if skew is None else skew,
                     "compressed": str(get(c, "compression") or "identity") != "identity",
                     "wire": _wire(c.summary, precision), "norm": str(get(c, "model.norm") or ""),
                     "acc": 100.0 * float(c.summary[metric])})

    def acc(**spec: Any) -> list[float]:
        return [r["acc"] for r in runs if all(r[k] == v for k, v in spec.items())]

    def comp_name(compressed: bool) -> str:
        return "compressed" if compressed else "no compression"

    def wires(precision: str) -> list[dict[str, str]]:
        """The (wire, norm) settings of this precision's runs, as ``acc`` specs."""
        return [{"wire": w, "norm": n} for w, n in sorted({(r["wire"], r["norm"]) for r in runs
                                                          if r["precision"] == precision})]

    def on(precision: str, setting: dict[str, str]) -> str:
        """A label's suffix: the wire where this precision's runs used more than one, the norm
        layer where one was set."""
        wire = f", {setting['wire']} wire" if len({s["wire"] for s in wires(precision)}) > 1 else ""
        return wire + (f", {setting['norm']}" if setting["norm"] else "")

    algorithms = sorted({r["algorithm"] for r in runs})
    skews = sorted({r["skew"] for r in runs})
    out: list[Comparison] = []

    def add(finding: str, what: str, a: list[float], b: list[float], lo: float = -math.inf,
            hi: float = math.inf) -> None:
        if a and b:
            out.append(Comparison(finding, what, a, b, lo, hi))

    fp = {"precision": "fp32", "wire": "fp32", "norm": ""}
    for algo in algorithms:
        for skew in skews:
            for w in wires("int8"):
                what = f"{algo}, skew {skew:g}{on('int8', w)}"
                lp = {"precision": "int8", **w}
                add("a", what, acc(algorithm=algo, skew=skew, compressed=False, **lp),
                    acc(algorithm=algo, skew=skew, compressed=False, **fp), -1.0, 1.0)
                add("b", what, acc(algorithm=algo, skew=skew, compressed=True, **fp),
                    acc(algorithm=algo, skew=skew, compressed=True, **lp), 1.0, 2.0)
    for algo in algorithms:
        for prec in ("fp32", "int8"):
            for w in wires(prec):
                for compressed in (False, True):
                    for s0, s1 in zip(skews, skews[1:]):
                        add("c", f"{algo}, {prec}{on(prec, w)}, {comp_name(compressed)}: skew {s0:g} − {s1:g}",
                            acc(algorithm=algo, precision=prec, compressed=compressed, skew=s0, **w),
                            acc(algorithm=algo, precision=prec, compressed=compressed, skew=s1, **w), lo=0.0)
    for prec in ("fp32", "int8"):
        for w in wires(prec):
            for skew in skews:
                add("d", f"{prec}{on(prec, w)}, skew {skew:g}",
                    acc(algorithm="choco", precision=prec, compressed=True, skew=skew, **w),
                    acc(algorithm="deepsqueeze", precision=prec, compressed=True, skew=skew, **w), lo=0.0)
    if skews and skews[-1] > 0:
        for algo in algorithms:
            for w in wires("int8"):
                for compressed in (False, True):
                    add("e", f"{algo}, {comp_name(compressed)}, skew {skews[-1]:g}{on('int8', w)}",
                        acc(algorithm=algo, precision="int8", compressed=compressed, skew=skews[-1], **w),
                        acc(algorithm=algo, compressed=compressed, skew=skews[-1], **fp), lo=0.0)
    return out


def summary_verdict(rows: Sequence[Comparison]) -> str:
    """One verdict for a finding from its comparisons."""
    verdicts = [r.verdict() for r in rows]
    if all(v == "holds" for v in verdicts):
        return "holds"
    if all(v == "does not hold" for v in verdicts):
        return "does not hold"
    if all(v.startswith("cannot tell") for v in verdicts):
        return "cannot tell"
    counts = {k: sum(v.startswith(k) for v in verdicts) for k in ("holds", "does not hold", "cannot tell")}
    return "mixed: " + ", ".join(f"{n} {k}" for k, n in counts.items() if n)


def markdown(comparisons: Sequence[Comparison]) -> str:
    """The findings section of a report: one line per finding, then one row per comparison."""
    if not comparisons:
        return ""
    lines = ["| finding | verdict |", "|---|---|"]
    by: dict[str, list[Comparison]] = {}
    for c in comparisons:
        by.setdefault(c.finding, []).append(c)
    for key, rows in by.items():
        lines.append(f"| ({key}) {FINDINGS[key]} | {summary_verdict(rows)} |")
    lines += ["", "| finding | cells | D (points) | SE | 95 % interval | claim | n | verdict |",
              "|---|---|---:|---:|---|---|---|---|"]
    for key, rows in by.items():
        for c in rows:
            iv = c.interval()
            se = c.se
            lines.append(f"| ({key}) | {c.what} | {c.diff:+.2f} | {'—' if se is None else f'{se:.2f}'} | "
                         f"{'—' if iv is None else f'[{iv[0]:+.2f}, {iv[1]:+.2f}]'} | {c.claim()} | "
                         f"{len(c.a)} / {len(c.b)} | {c.verdict()} |")
    return "\n".join(lines)


__all__ = ["Comparison", "FINDINGS", "compare", "markdown", "summary_verdict", "t975"]
