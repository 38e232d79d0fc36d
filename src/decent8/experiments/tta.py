"""Time-to-accuracy across bandwidths from finished runs (``python3 -m decent8.experiments.tta``).

Training does not depend on the network, so one run per algorithm is enough: for each
run folder this rebuilds the run from its ``config.yaml``, performs one training step
observed by its :class:`~decent8.timing.clock.TrafficRecorder` to get the step's wire
log (:func:`decent8.train.wire_log.step_log`), and prices that log with :class:`~decent8.timing.clock.SimClock` on uniform
networks of the given bandwidths (same latency). Every step of a run without faults,
jitter or Marsit-K resets has the same log, so the simulated time of metrics row r is
``r.step × T_step(β)`` (checked against the ``sim_time_s`` the run itself recorded).

T_step(β) = a + b/β exactly on a uniform network without overlap (compute + latencies
+ bytes / β), so two runs reach a target accuracy at the same simulated time at

    1/β* = (s_u·a_u − s_c·a_c) / (s_c·b_c − s_u·b_u)

with s the steps each needs (u: uncompressed, c: compressed): below β* the compressed
run is faster. Writes a Markdown table and PNG plots (accuracy vs simulated time per
bandwidth, and vs bytes).

    python3 -m decent8.experiments.tta RUN_DIR... --bandwidths 10000,1000,100 --latency 5e-5 \
        --target 0.95 --baseline psgd --out docs/results/time_to_accuracy/allreduce
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import yaml

from ..algorithms.registry import registered_info
from ..config import from_dict, to_dict
from ..figstyle import new_figure, save, series_style, styled
from ..timing import make_timer
from ..timing.clock import SimClock
from ..timing.faults import FaultModel
from ..timing.network import NetworkModel
from ..timing.plots import plot_runs
from ..train.wire_log import step_log


def label_of(summary: dict) -> str:
    alg, comp = summary["algorithm"], summary["compression"]
    prec = "" if summary.get("precision", "fp32") == "fp32" else f" {summary['precision']}"
    info = registered_info(alg)   # a stored summary's import path is not imported
    own_wire = info is not None and info.own_wire_format
    return (alg if own_wire or comp in ("identity", "none") else f"{alg}/{comp}") + prec


def analyse(run: Path, bandwidths: list[float], latency: float) -> dict:
    cfg = from_dict(yaml.safe_load((run / "config.yaml").read_text()))
    summary = json.loads((run / "summary.json").read_text())
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]
    rows = [r for r in rows if "after_consensus_rounds" not in r] or rows  # training steps only
    c, log, _ = step_log(cfg)
    timer = c.timer
    n = c.topology.n
    compute = timer.device.compute_times(0, measured_s=summary.get("measured_compute_s_per_step"), local_nodes=n)
    # sanity: the run's own clock (its network) priced every training step like this one
    own = SimClock(c.topology, timer.clock.network, timer.device, None, timer.clock.overlap,
                   timer.clock.message_scale, timer.clock.ring_scale).step_time(log, compute)
    recorded = rows[-1]["sim_time_s"] / rows[-1]["step"]
    per_bw = {}
    for bw in bandwidths:
        net = NetworkModel.uniform(n, latency, bw, cfg.network.shared_uplink)
        per_bw[bw] = SimClock(c.topology, net, timer.device, None, False, timer.clock.message_scale,
                              timer.clock.ring_scale).step_time(log, compute)
    # affine fit T = a + b/β from two bandwidths (exact without overlap)
    b1, b2 = bandwidths[0], bandwidths[-1]
    inv1, inv2 = 1 / (b1 * 125000), 1 / (b2 * 125000)
    slope = (per_bw[b2] - per_bw[b1]) / (inv2 - inv1) if b1 != b2 else 0.0
    intercept = per_bw[b1] - slope * inv1
    out_deg = c.topology.mean_out_degree()
    wire = ((log.message_bytes * timer.clock.message_scale + log.scalar_bytes) * out_deg if log.gossip_step is not None
            else 0.0) + sum(b for b, _ in log.hops) * timer.clock.ring_scale
    return {"run": run, "wire_bytes": wire, "summary": summary, "rows": rows, "label": label_of(summary), "step_s": per_bw,
            "own_step_s": own, "recorded_step_s": recorded, "a": intercept, "b": slope,
            "compute_s": float(compute.max()), "message_bytes": summary["message_bytes"]}


def steps_to(rows: list[dict], target: float) -> int | None:
    for r in rows:
        if r["mean_node_accuracy"] >= target:
            return int(r["step"])
    return None


def crossover(comp: dict, base: dict, s_c: int, s_u: int) -> str:
    """Where the run ``comp`` reaches the target before ``base``: s_c(a_c + b_c x) < s_u(a_u + b_u x),
    x = 1/β, i.e. x·(s_c b_c − s_u b_u) < s_u a_u − s_c a_c."""
    denom = s_c * comp["b"] - s_u * base["b"]
    num = s_u * base["a"] - s_c * comp["a"]
    if denom == 0:
        return "always" if num > 0 else "never"
    inv = num / denom
    if denom < 0:  # sends less: wins for x > inv, i.e. β < 1/inv
        return "always" if inv <= 0 else f"below {_mbit(1 / inv / 125000)}"
    return "never" if inv <= 0 else f"above {_mbit(1 / inv / 125000)}"


def _mbit(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def fmt_s(x: float | None) -> str:
    if x is None:
        return "—"
    return f"{x:.3g} s" if x >= 1 else f"{x * 1e3:.3g} ms"


#: what-if settings for ``--scenarios``: (label, config overrides of the time model)
SCENARIOS = [
    ("as run", {}),
    ("clock.overlap=true", {"clock": {"overlap": True}}),
    ("1 of 8 nodes 4x slower", {"device_model": {"straggler_fraction": 0.125, "straggler_factor": 4.0}}),
    ("log-normal compute, sigma 0.5", {"device_model": {"jitter_sigma": 0.5}}),
    ("latency jitter, mean 1 ms", {"network": {"jitter_s": 1e-3}}),
    ("independent links", {"network": {"shared_uplink": False}}),
    ("network=wifi (50 Mbit/s, 2 ms)", {"network": {"name": "wifi", "latency_s": None, "bandwidth_mbit_s": None}}),
    ("network=lte (10 Mbit/s, 30 ms)", {"network": {"name": "lte", "latency_s": None, "bandwidth_mbit_s": None}}),
]


def scenarios(run: Path, steps: int = 500) -> list[tuple[str, float]]:
    """Mean simulated seconds per training step of ``run`` under each of :data:`SCENARIOS`
    (over ``steps`` steps, so the seeded random draws average out)."""
    base = to_dict(from_dict(yaml.safe_load((run / "config.yaml").read_text())))
    c, log, _ = step_log(from_dict(base))
    out = []
    for label, change in SCENARIOS:
        d = {k: ({**v, **change[k]} if k in change else v) for k, v in base.items()}
        cfg = from_dict(d)
        timer = make_timer(cfg, c.topology, c.comm, c.compressor, c.model.dim, FaultModel(cfg.nodes))
        total = 0.0
        for t in range(steps):
            total += timer.clock.advance(log, timer.device.compute_times(t, 0.0, 1))
        out.append((label, total / steps))
    return out


@styled
def _plot_dropout(items: list[tuple], path: Path) -> None:
    """Mean node accuracy per epoch, one line per run, in the house style (PNG + PDF)."""
    fig = new_figure(6.4, 4.0)
    ax = fig.subplots()
    for i, (label, pn, pl, _, rows) in enumerate(items):
        ax.plot([q["epoch"] for q in rows], [100 * q["mean_node_accuracy"] for q in rows],
                label=f"{label}, node drop {pn:g}" + (f", link drop {pl:g}" if pl else ""), **series_style(i))
    ax.set_xlabel("epoch")
    ax.set_ylabel("mean node test accuracy (%)")
    ax.set_ylim(bottom=max(0, ax.get_ylim()[0]))
    ax.legend(loc="lower right")
    save(fig, path)


def dropout_report(runs: list[Path], out: Path) -> list[str]:
    """Final accuracy against ``faults.node_drop`` / ``faults.link_drop`` per algorithm, as a
    Markdown table and a PNG (mean node accuracy per epoch, one line per run)."""
    items = []
    for r in runs:
        cfg = yaml.safe_load((r / "config.yaml").read_text())
        summary = json.loads((r / "summary.json").read_text())
        rows = [json.loads(x) for x in (r / "metrics.jsonl").read_text().splitlines() if x.strip()]
        f = cfg.get("faults", {}) or {}
        items.append((label_of(summary), float(f.get("node_drop", 0.0)), float(f.get("link_drop", 0.0)), summary, rows))
    items.sort(key=lambda t: (t[0], t[1], t[2]))
    lines = ["| run | node drop p | link drop p | mean node acc. % | averaged-model acc. % | consensus distance | "
             "bytes sent / node |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for label, pn, pl, s, _ in items:
        lines.append(f"| {label} | {pn:g} | {pl:g} | {100 * s['mean_node_accuracy']:.2f} | "
                     f"{100 * s['averaged_model_accuracy']:.2f} | {s['consensus_distance']:.3g} | "
                     f"{s['bytes_sent_per_node'] / 1e6:.3f} MB |")
    out.parent.mkdir(parents=True, exist_ok=True)
    _plot_dropout(items, Path(f"{out}.png"))
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m decent8.experiments.tta", description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", type=Path, help="run folders (or sweep folders holding them)")
    p.add_argument("--bandwidths", default="10000,1000,100", help="Mbit/s, comma-separated")
    p.add_argument("--latency", type=float, default=5e-5, help="α of every link in seconds")
    p.add_argument("--target", type=float, default=0.95, help="target mean node accuracy (fraction)")
    p.add_argument("--baseline", help="label of the uncompressed run (e.g. psgd, dpsgd)")
    p.add_argument("--dropout", action="store_true", help="instead: accuracy against faults.node_drop / link_drop")
    p.add_argument("--out", type=Path, required=True, help="output prefix: writes PREFIX.md and PREFIX-*.png")
    p.add_argument("--title", default="")
    p.add_argument("--scenarios", action="store_true", help="also print each run's step time under the what-if "
                                                                "settings (stragglers, overlap, jitter, profiles)")
    a = p.parse_args(argv)
    bws = [float(x) for x in a.bandwidths.split(",")]
    runs = []
    for r in a.runs:
        runs += [r] if (r / "summary.json").is_file() else sorted(q.parent for q in r.glob("*/summary.json"))
    if a.dropout:
        print("\n".join(dropout_report(runs, a.out)))
        return 0
    if not a.baseline:
        p.error("--baseline is required (or --dropout)")
    res = [analyse(r, bws, a.latency) for r in runs]
    base = next((x for x in res if x["label"] == a.baseline), None)
    if base is None:
        print(f"no run labelled {a.baseline!r}; labels: {[x['label'] for x in res]}", file=sys.stderr)
        return 2
    a.out.parent.mkdir(parents=True, exist_ok=True)
    head = ["run", "final acc. %", "bytes/step (timed)", "compute/step", *[f"step @ {bw:g} Mbit/s" for bw in bws],
            f"steps to {100 * a.target:g} %", *[f"time to {100 * a.target:g} % @ {bw:g}" for bw in bws],
            f"faster than {a.baseline} at β (Mbit/s)"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    s_u = steps_to(base["rows"], a.target)
    for x in res:
        s = steps_to(x["rows"], a.target)
        times = [None if s is None else s * x["step_s"][bw] for bw in bws]
        if x is base or s is None or s_u is None:
            cross = "—"
        else:
            cross = crossover(x, base, s, s_u)
        per_step = x["wire_bytes"]
        lines.append("| " + " | ".join([
            x["label"], f"{100 * x['summary']['mean_node_accuracy']:.2f}", f"{per_step:,.0f}", fmt_s(x["compute_s"]),
            *[fmt_s(x["step_s"][bw]) for bw in bws], "—" if s is None else str(s), *[fmt_s(t) for t in times],
            cross]) + " |")
        if not math.isclose(x["own_step_s"], x["recorded_step_s"], rel_tol=1e-6):
            lines.append(f"<!-- {x['label']}: recorded {x['recorded_step_s']} s/step vs priced {x['own_step_s']} -->")
    if a.scenarios:
        lines += ["", "| run | " + " | ".join(label for label, _ in SCENARIOS) + " |", "|" + " --- |" * (len(SCENARIOS) + 1)]
        for x in res:
            lines.append(f"| {x['label']} | " + " | ".join(fmt_s(t) for _, t in scenarios(x["run"])) + " |")
    a.out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    for bw in bws:
        # time and bytes of the timed model (clock.as_model): every training step sends wire_bytes
        retimed = [(x["label"], [{**r, "sim_time_s": r["step"] * x["step_s"][bw], "bytes_sent_per_node": r["step"] * x["wire_bytes"]}
                                 for r in x["rows"]]) for x in res]
        plot_runs(retimed, f"{a.out}-{bw:g}mbit.png", title=f"{a.title} {bw:g} Mbit/s, α {a.latency:g} s".strip(),
                  target=100 * a.target, time_log=True, bytes_label="bytes sent per node (timed model)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
