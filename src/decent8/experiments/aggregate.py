"""Seeds aggregated: mean, sample standard deviation and count, printed with the precision they have.

A sweep over ``seed=0,1,2`` (or a report over runs that differ only in their seed)
shows one row per configuration: ``97.3 ± 0.9 (n=3)``. The standard deviation is the
sample one (ddof = 1) and is rounded to two significant digits; the mean is rounded to
the same decimal place, so no digit is printed that the spread does not support. A
single run has no spread and is printed to two decimals (the test sets' resolution is
0.01–0.3 points).
"""
from __future__ import annotations

import math
from typing import Sequence


def mean_std(xs: Sequence[float]) -> tuple[float, float, int]:
    """(mean, sample std — 0 for one value, n)."""
    vals = [float(x) for x in xs]
    n = len(vals)
    if n == 0:
        raise ValueError("no values")
    m = sum(vals) / n
    s = math.sqrt(sum((v - m) ** 2 for v in vals) / (n - 1)) if n > 1 else 0.0
    return m, s, n


def decimals_for(std: float, single: int = 2) -> int:
    """Decimal places that keep two significant digits of ``std`` (``single`` when std is 0)."""
    if not math.isfinite(std) or std <= 0:
        return single
    return max(0, 1 - int(math.floor(math.log10(std))))


def format_mean_std(xs: Sequence[float], single: int = 2, show_n: bool = True) -> str:
    """``97.32`` for one value, ``97.3 ± 0.87 (n=3)`` for several."""
    m, s, n = mean_std(xs)
    if n == 1:
        return f"{m:.{single}f}"
    d = decimals_for(s, single)
    text = f"{m:.{d}f} ± {s:.{d}f}"
    return text + (f" (n={n})" if show_n else "")


def format_mean_se(xs: Sequence[float], single: int = 2, show_n: bool = True) -> str:
    """``97.32`` for one value, ``97.3 ± 0.50 (n=3)`` for several: the mean and its standard
    error s/√n (the spread a mean of n seeds has), rounded as :func:`format_mean_std`."""
    m, s, n = mean_std(xs)
    if n == 1:
        return f"{m:.{single}f}"
    se = s / math.sqrt(n)
    d = decimals_for(se, single)
    return f"{m:.{d}f} ± {se:.{d}f}" + (f" (n={n})" if show_n else "")


def format_value(x: float, digits: int = 2) -> str:
    """A single number without trailing padding: 98.06 stays 98.06, 98.0600 is never printed."""
    return f"{x:.{digits}f}"
