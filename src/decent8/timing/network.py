"""Network model: per-link latency α and bandwidth β, shared uplinks, jitter (SPEC §12).

A link j → i (``W[i, j]``'s direction, SPEC §1) has latency α_ij seconds and bandwidth
β_ij bytes per second. A message of b bytes from j arrives at i after

    α_ij + ε_ij(t) + s_j · b / β_ij

where ``s_j`` is the number of out-neighbours j sends to this round when the uplink is
shared (``network.shared_uplink=true``: m messages of b bytes over one uplink take
m·b/β — SPEC §12), else 1 (independent links); ε_ij(t) ≥ 0 is an optional per-link,
per-round jitter, exponential with mean ``network.jitter_s``, drawn from a generator
seeded by (run seed, round), so a run's simulated time is reproducible and a resumed
run continues exactly.

Named profiles (``network.name``): ``datacenter10`` (10 Gbit/s, 10 µs),
``datacenter100`` (100 Gbit/s, 5 µs), ``wifi`` (50 Mbit/s, 2 ms), ``lte``
(10 Mbit/s, 30 ms) and ``custom`` (set ``network.latency_s`` and
``network.bandwidth_mbit_s``). ``latency_s`` / ``bandwidth_mbit_s`` override a
profile's figures for every link; ``network.links`` names a CSV file
``src,dst,latency_s,bandwidth_mbit_s`` (one line per directed link, ``#`` comments, an
optional header) whose lines override single links. 1 Mbit/s = 10^6 bit/s = 125,000 B/s.
"""
from __future__ import annotations

import csv
import math
import os
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError, choice_error

#: name → (latency in seconds, bandwidth in Mbit/s)
PROFILES: dict[str, tuple[float, float]] = {
    "datacenter10": (10e-6, 10_000.0),
    "datacenter100": (5e-6, 100_000.0),
    "wifi": (2e-3, 50.0),
    "lte": (30e-3, 10.0),
}
NAMES = (*PROFILES, "custom")
#: bytes per second in one Mbit/s
MBIT = 1e6 / 8


def cross_rank_profile(dist_cfg) -> tuple[float, float] | None:
    """(latency s, bandwidth Mbit/s) of the links between ranks from the ``dist`` config
    group (``dist.network`` profile, ``dist.latency_s`` / ``dist.bandwidth_mbit_s``
    overrides), or None when the links between ranks are the ``network`` group's."""
    name, lat, bw = dist_cfg.network, dist_cfg.latency_s, dist_cfg.bandwidth_mbit_s
    if name is None and lat is None and bw is None:
        return None
    if name is not None and name not in NAMES:
        raise choice_error("dist.network", name, NAMES)
    plat, pbw = PROFILES.get(name or "", (None, None))
    lat = plat if lat is None else _positive("dist.latency_s", lat, allow_zero=True)
    bw = pbw if bw is None else _positive("dist.bandwidth_mbit_s", bw)
    if lat is None or bw is None:
        raise ConfigError("dist.latency_s" if lat is None else "dist.bandwidth_mbit_s",
                          "links between ranks need a profile (dist.network) or both dist.latency_s and dist.bandwidth_mbit_s")
    return float(lat), float(bw)


def _positive(option: str, value: float, allow_zero: bool = False) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ConfigError(option, f"must be a number, got {value!r}") from None
    if not math.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        raise ConfigError(option, f"must be {'>= 0' if allow_zero else '> 0'}, got {value!r}")
    return v


#: above this many nodes α and β are one value for every link (0-d arrays), not [n, n]
DENSE_MAX_NODES = 4096


@dataclass
class NetworkModel:
    """Per-link α (s) and β (B/s) as ``[n, n]`` arrays indexed ``[receiver, sender]``;
    above :data:`DENSE_MAX_NODES` nodes one value for all links (0-d arrays, ``nodes``
    set): per-link overrides, rank placement and jitter then need fewer nodes."""

    alpha: np.ndarray
    beta: np.ndarray
    shared_uplink: bool = True
    jitter_s: float = 0.0
    seed: int = 0
    nodes: int | None = None

    @property
    def n(self) -> int:
        return self.alpha.shape[0] if self.alpha.ndim == 2 else int(self.nodes)

    @property
    def per_link(self) -> bool:
        """True when α and β are ``[n, n]`` arrays (False: one value for every link)."""
        return self.alpha.ndim == 2

    def links(self, dst: np.ndarray, src: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """α and β of the links src → dst (arrays like ``dst``)."""
        if self.per_link:
            return self.alpha[dst, src], self.beta[dst, src]
        return np.full(np.shape(dst), float(self.alpha)), np.full(np.shape(dst), float(self.beta))

    def _dense_only(self, option: str, what: str) -> None:
        if not self.per_link:
            raise ConfigError(option, f"{what} needs per-link α/β arrays: at most {DENSE_MAX_NODES} nodes, "
                                      f"got {self.n}")

    @classmethod
    def uniform(cls, n: int, latency_s: float, bandwidth_mbit_s: float, shared_uplink: bool = True,
                jitter_s: float = 0.0, seed: int = 0) -> "NetworkModel":
        if n > DENSE_MAX_NODES:
            return cls(np.array(float(latency_s)), np.array(float(bandwidth_mbit_s) * MBIT), bool(shared_uplink),
                       float(jitter_s), int(seed), nodes=int(n))
        alpha = np.full((n, n), float(latency_s))
        beta = np.full((n, n), float(bandwidth_mbit_s) * MBIT)
        return cls(alpha, beta, bool(shared_uplink), float(jitter_s), int(seed))

    @classmethod
    def from_config(cls, cfg, n: int, seed: int = 0) -> "NetworkModel":
        """From the ``network`` config group (validated here, one-line errors)."""
        if cfg.name not in NAMES:
            raise choice_error("network", cfg.name, NAMES)
        lat, bw = PROFILES.get(cfg.name, (None, None))
        if cfg.latency_s is not None:
            lat = _positive("network.latency_s", cfg.latency_s, allow_zero=True)
        if cfg.bandwidth_mbit_s is not None:
            bw = _positive("network.bandwidth_mbit_s", cfg.bandwidth_mbit_s)
        if lat is None or bw is None:
            raise ConfigError("network.latency_s" if lat is None else "network.bandwidth_mbit_s",
                              "network=custom needs network.latency_s and network.bandwidth_mbit_s")
        jitter = _positive("network.jitter_s", cfg.jitter_s, allow_zero=True)
        if not isinstance(cfg.shared_uplink, bool):
            raise ConfigError("network.shared_uplink", f"must be true or false, got {cfg.shared_uplink!r}")
        model = cls.uniform(n, lat, bw, cfg.shared_uplink, jitter, seed)
        if jitter > 0:
            model._dense_only("network.jitter_s", "jitter (drawn per link and round)")
        if cfg.links:
            model.load_links(cfg.links)
        return model

    def load_links(self, path: str) -> None:
        """Override single links from a CSV file ``src,dst,latency_s,bandwidth_mbit_s``."""
        opt = "network.links"
        self._dense_only(opt, "overriding single links")
        if not os.path.isfile(path):
            raise ConfigError(opt, f"file {path!r} does not exist")
        try:
            with open(path, encoding="utf-8") as f:
                lines = [ln for ln in f if ln.strip() and not ln.lstrip().startswith("#")]
        except UnicodeDecodeError:
            raise ConfigError(opt, f"{path} is not UTF-8 text (a CSV file src,dst,latency_s,bandwidth_mbit_s is "
                                   f"expected)") from None
        except OSError as e:
            raise ConfigError(opt, f"cannot read {path}: {e.strerror or e}") from None
        for lineno, row in enumerate(csv.reader(lines), start=1):
            if lineno == 1 and row and row[0].strip().lower() == "src":
                continue
            if len(row) != 4:
                raise ConfigError(opt, f"{path} line {lineno}: expected src,dst,latency_s,bandwidth_mbit_s, got {row}")
            try:
                src, dst = int(row[0]), int(row[1])
            except ValueError:
                raise ConfigError(opt, f"{path} line {lineno}: node ids must be integers, got {row[:2]}") from None
            if not (0 <= src < self.n and 0 <= dst < self.n) or src == dst:
                raise ConfigError(opt, f"{path} line {lineno}: link {src}->{dst} is not a link between two of "
                                       f"the {self.n} nodes")
            self.alpha[dst, src] = _positive(opt, row[2], allow_zero=True)
            self.beta[dst, src] = _positive(opt, row[3]) * MBIT

    def apply_placement(self, owner: list[int], latency_s: float, bandwidth_mbit_s: float) -> int:
        """Give every link j → i between nodes on different ranks (``owner[i] ≠ owner[j]``,
        comm/placement.py) latency ``latency_s`` and bandwidth ``bandwidth_mbit_s``; links
        inside a rank keep theirs. Returns the number of directed links changed."""
        self._dense_only("dist.ranks", "a placement's links between ranks")
        own = np.asarray(owner)
        cross = own[:, None] != own[None, :]
        self.alpha[cross] = float(latency_s)
        self.beta[cross] = float(bandwidth_mbit_s) * MBIT
        return int(cross.sum())

    def jitter(self, round_index: int) -> np.ndarray:
        """ε(t) ``[n, n]`` for round ``round_index`` (zeros without jitter)."""
        if self.jitter_s <= 0:
            return np.zeros((self.n, self.n)) if self.per_link else np.zeros(())
        rng = np.random.default_rng([self.seed, int(round_index)])
        return rng.exponential(self.jitter_s, size=(self.n, self.n))

    def describe(self) -> str:
        if self.per_link:
            a, b = self.alpha[~np.eye(self.n, dtype=bool)], self.beta[~np.eye(self.n, dtype=bool)] / MBIT
        else:
            a, b = self.alpha.reshape(1), self.beta.reshape(1) / MBIT
        rng = (lambda v, f: f"{v.min():{f}}" if v.min() == v.max() else f"{v.min():{f}}..{v.max():{f}}")
        return (f"α {rng(a, 'g')} s, β {rng(b, 'g')} Mbit/s, "
                f"{'shared uplink' if self.shared_uplink else 'independent links'}"
                + (f", jitter mean {self.jitter_s:g} s" if self.jitter_s > 0 else ""))
