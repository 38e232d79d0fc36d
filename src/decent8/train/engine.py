"""One training iteration of Algorithm 1 for the k local nodes, plus evaluation (SPEC §3, §8).

    x = de-biased z                       (z / ω under push-sum, else z)
    g = ∇F_i(x_i; ξ_i)                    (all k nodes, StackedModel: chunks of vmap or a loop)
    d ← algorithm.local_direction(d, x)   (identity, or a tracker: gradient tracking, GUT)
    d = d(g, x)                            (local Nesterov or quasi-global momentum)
    algorithm.update(z, d, x, lr, t)       (gossip: z ← gossip(z − lr·local_direction(d));
                                            all-reduce: z ← z − aggregate(lr·d), the applied update)

The engine only calls the :class:`~decent8.algorithms.base.Algorithm` interface.

The same engine runs in the simulator (k = n) and on a distributed rank (k = 1).
"""
from __future__ import annotations

import math

import torch

from ..algorithms.base import Algorithm
from ..comm.base import Communicator
from ..models.stacked import StackedModel, take
from .user_metrics import metric_values, summarise
from .norm_stats import mix_buffers


def regression_metrics(sse: torch.Tensor, sae: torch.Tensor, avg_sse: float, avg_sae: float,
                       y_test: torch.Tensor) -> dict[str, float]:
    """RMSE, MAE and R² of the evaluated nodes (their mean) and of the averaged model, from
    each model's Σ(ŷ − y)² and Σ|ŷ − y| over the M = N·m test target elements:
    RMSE = √(SSE/M), MAE = SAE/M, R² = 1 − SSE/SST with SST = Σ(y − ȳ)², ȳ each output's
    test mean (pooled over outputs; for one output, the usual coefficient of determination)."""
    y = y_test.detach().reshape(y_test.shape[0], -1).double().cpu()
    count = y.numel()
    sst = ((y - y.mean(0, keepdim=True)) ** 2).sum().item()
    node_r2 = 1.0 - sse / sst if sst > 0 else torch.full_like(sse, float("nan"))
    return {
        "mean_node_rmse": (sse / count).sqrt().mean().item(), "averaged_model_rmse": math.sqrt(avg_sse / count),
        "mean_node_mae": (sae / count).mean().item(), "averaged_model_mae": avg_sae / count,
        "mean_node_r2": node_r2.mean().item(), "averaged_model_r2": 1.0 - avg_sse / sst if sst > 0 else float("nan"),
        "min_node_r2": node_r2.min().item(),
    }


class Engine:
    def __init__(self, model: StackedModel, algorithm: Algorithm, optimizer, comm: Communicator, x0: torch.Tensor) -> None:
        self.model = model
        self.algorithm = algorithm
        self.optimizer = optimizer
        self.comm = comm
        self.z = x0.to(model.device).unsqueeze(0).repeat(comm.k, 1)
        algorithm.init_state(self.z)
        optimizer.init_state(self.z)
        self.step_count = 0
        #: model.norm_stats: which running statistics node models use (train/norm_stats.py)
        self.norm_stats = "local"
        #: algorithm.consensus: what a final round is (compressed: the algorithm's; exact: x ← W x)
        self.consensus = "compressed"
        #: byzantine.*: ``[k]`` bool, the honest local nodes (None: all; honest_* metrics of :meth:`evaluate`)
        self.honest: torch.Tensor | None = None
        #: byzantine.attack=label_flip: ``([k] bool, C)``: these nodes train on labels y → C − 1 − y
        self.flip_labels: tuple[torch.Tensor, int] | None = None

    def params(self) -> torch.Tensor:
        """Each local node's model ``[k, d]`` (de-biased under push-sum)."""
        return self.algorithm.debiased(self.z)

    def train_step(self, xb, yb: torch.Tensor, lr: float) -> torch.Tensor:
        """One iteration on batches ``xb[k, b, ...]`` (a tensor or a dict of tensors),
        ``yb[k, b, ...]``; returns the per-node loss ``[k]``."""
        x = self.params()
        if self.flip_labels is not None:
            flip, classes = self.flip_labels
            yb = torch.where(flip.reshape(-1, *[1] * (yb.dim() - 1)), classes - 1 - yb, yb)
        loss, grad = self.model.loss_and_grad(x, xb, yb, step=self.step_count)
        direction = self.optimizer.direction(grad, x)
        tracks = self.optimizer.tracks_gossip
        x_before = (x.clone() if x is self.z else x) if tracks else None
        self.algorithm.update(self.z, direction, x, lr, self.step_count)
        self._mix_buffers()
        if tracks:
            self.optimizer.after_gossip(x_before, self.params(), lr)
        self.step_count += 1
        return loss

    def consensus_round(self) -> None:
        """A gossip-only round (no gradient), as run at the end of training: the algorithm's
        own round (``algorithm.consensus=compressed``) or exact averaging with the same W,
        x_i ← Σ_j W_ij x_j (``exact``; :meth:`~decent8.algorithms.base.Algorithm.exact_consensus_step`)."""
        if self.consensus == "exact":
            self.algorithm.exact_consensus_step(self.z, self.step_count)
        else:
            self.algorithm.consensus_step(self.z, self.step_count)
        self._mix_buffers()
        self.step_count += 1

    def _mix_buffers(self) -> None:
        """``model.norm_stats=gossip``: the running statistics travel with the parameters."""
        if self.norm_stats == "gossip" and self.model.buffers is not None:
            mix_buffers(self.comm, self.model.buffers, self.step_count)

    @torch.no_grad()
    def evaluate(self, x_test, y_test: torch.Tensor, batch_size: int = 1024,
                 class_weights: torch.Tensor | None = None, nodes=None, node_chunk: int = 256) -> dict[str, object]:
        """SPEC §8: each node's own test loss (and accuracy, for classification), the
        averaged model's, and the consensus distance. ``class_weights`` ``[k, C]``: each
        local node's weight per test label (its training label share over the test's,
        see :func:`decent8.train.personal.class_weights`) — adds each node's personalized
        accuracy Σ_s w(y_s)·[right_s] / Σ_s w(y_s) from the same logits.

        Evaluation at scale (:mod:`.eval_nodes`): ``nodes`` (global ids; None:
        all) are the nodes whose own models are tested; they run ``node_chunk`` at a time,
        so the outputs held at once are ``[node_chunk, batch_size, classes]``. Per-node
        statistics (mean, min, max, 10th percentile) are over the tested nodes
        (``evaluated_nodes``); the averaged model and the consensus distance over all."""
        x = self.params()
        task = self.model.task
        n_test = y_test.shape[0]
        k = x.shape[0]
        wanted = None if nodes is None else set(int(i) for i in nodes)
        sel = [p for p, g in enumerate(self.comm.local_nodes) if wanted is None or g in wanted]
        nan = float("nan")
        node_loss = torch.full((k,), nan, device=x.device, dtype=torch.float64)
        node_correct = torch.full((k,), nan, device=x.device, dtype=torch.float64)
        x_bar = self.comm.mean_over_nodes(x)
        # the averaged model runs with the node-averaged buffers (running statistics), if any
        b_bar = None if self.model.buffers is None else self.comm.mean_over_nodes(self.model.buffers).unsqueeze(0)
        # model.norm_stats=average: node models also use b̄ (else their own buffers)
        b_nodes = b_bar.expand(k, -1) if b_bar is not None and self.norm_stats == "average" else self.model.buffers
        avg_loss = torch.zeros((), device=x.device, dtype=torch.float64)
        avg_correct = torch.zeros((), device=x.device, dtype=torch.float64)
        personal = class_weights is not None and getattr(task, "correct_mask", None) is not None
        pers_right = torch.full((k,), nan, device=x.device, dtype=torch.float64)
        pers_total = torch.ones(k, device=x.device, dtype=torch.float64)
        step = max(1, int(node_chunk))
        # regression: Σ(ŷ−y)², Σ|ŷ−y| per node (RMSE, MAE, R²); a user's metrics: each model's test outputs
        node_sse = torch.full((k,), nan, device=x.device, dtype=torch.float64)
        node_sae = torch.full((k,), nan, device=x.device, dtype=torch.float64)
        user = list(getattr(task, "user_metrics", None) or [])
        node_user: list[dict[str, float]] = [{} for _ in range(k)]
        for c0 in range(0, len(sel), step):
            rows = sel[c0:c0 + step]
            p = torch.tensor(rows, device=x.device)
            xs = x if len(rows) == k else x[p]
            bs = None if b_nodes is None else (b_nodes if len(rows) == k else b_nodes[p]).contiguous()
            loss_c = torch.zeros(len(rows), device=x.device, dtype=torch.float64)
            correct_c = torch.zeros(len(rows), device=x.device, dtype=torch.float64)
            right_c = torch.zeros(len(rows), device=x.device, dtype=torch.float64)
            total_c = torch.zeros(len(rows), device=x.device, dtype=torch.float64)
            errors_c: list = []
            outputs_c: list[torch.Tensor] = []
            for i in range(0, n_test, batch_size):
                xb, yb = take(x_test, slice(i, i + batch_size)), y_test[i : i + batch_size]
                logits = self.model.logits(xs, xb, buffers=bs)
                loss, correct = task.eval_sums(logits, yb)
                loss_c += loss
                if not task.classification:
                    errors_c.append(task.error_sums(logits, yb))
                if user:
                    outputs_c.append(logits.detach().double().cpu())
                if correct is not None:
                    correct_c += correct
                if personal:
                    w = class_weights[p][:, yb.reshape(-1).long()]          # [c, N]
                    right_c += (w * task.correct_mask(logits, yb)).sum(1)
                    total_c += w.sum(1)
            node_loss[p] = loss_c
            node_correct[p] = correct_c
            if errors_c and all(e is not None for e in errors_c):
                node_sse[p] = sum(e[0] for e in errors_c)
                node_sae[p] = sum(e[1] for e in errors_c)
            if user:
                outs = torch.cat(outputs_c, 1)
                for j, r in enumerate(rows):
                    node_user[r] = metric_values(user, outs[j], y_test.cpu())
            pers_right[p] = right_c
            pers_total[p] = total_c
        avg_errors: list = []
        avg_outputs: list[torch.Tensor] = []
        for i in range(0, n_test, batch_size):
            xb, yb = take(x_test, slice(i, i + batch_size)), y_test[i : i + batch_size]
            logits = self.model.logits(x_bar.unsqueeze(0), xb, buffers=b_bar)
            loss, avg_c = task.eval_sums(logits, yb)
            avg_loss += loss[0]
            if avg_c is not None:
                avg_correct += avg_c[0]
            if not task.classification:
                avg_errors.append(task.error_sums(logits, yb))
            if user:
                avg_outputs.append(logits.detach().double().cpu())
        all_loss = self.comm.gather_nodes(node_loss / n_test).double().cpu()
        # which nodes were tested, from the selection (a diverged node's loss is NaN too)
        chosen = torch.zeros(k, device=x.device, dtype=torch.float64)
        chosen[sel] = 1.0
        tested = self.comm.gather_nodes(chosen).cpu() > 0.5
        dist = self.comm.gather_nodes(((x - x_bar) ** 2).sum(1)).double().cpu()
        out: dict[str, object] = {
            "mean_node_loss": all_loss[tested].mean().item(),
            "averaged_model_loss": avg_loss.item() / n_test,
            "consensus_distance": dist.mean().item(),
            "evaluated_nodes": int(tested.sum()),
        }
        honest = None
        if self.honest is not None:   # the honest nodes' own consensus: distance to their mean
            h = self.honest.to(x.dtype)[:, None]
            x_h = self.comm.mean_over_nodes(x * h) / self.comm.mean_over_nodes(h)
            honest = self.comm.gather_nodes(self.honest.to(torch.float64)).cpu() > 0.5
            dist_h = self.comm.gather_nodes(((x - x_h) ** 2).sum(1)).double().cpu()
            out["honest_consensus_distance"] = dist_h[honest].mean().item()
        if not bool(tested.all()):
            out["evaluated_node_ids"] = torch.nonzero(tested).reshape(-1).tolist()
        if not task.classification and avg_errors and all(e is not None for e in avg_errors):
            sse = self.comm.gather_nodes(node_sse).double().cpu()[tested]
            sae = self.comm.gather_nodes(node_sae).double().cpu()[tested]
            out.update(regression_metrics(sse, sae, sum(e[0][0] for e in avg_errors).item(),
                                          sum(e[1][0] for e in avg_errors).item(), y_test))
        if user:
            avg_user = metric_values(user, torch.cat(avg_outputs, 1)[0], y_test.cpu())
            names = list(avg_user)
            local = torch.tensor([[d.get(nm, nan) for nm in names] for d in node_user], dtype=torch.float64,
                                 device=x.device).reshape(k, len(names))
            every = self.comm.gather_nodes(local).double().cpu()[tested]
            out.update(summarise([dict(zip(names, row)) for row in every.tolist()], avg_user))
        if task.classification:
            all_acc = self.comm.gather_nodes(node_correct / n_test).double().cpu()[tested]
            out.update({
                "mean_node_accuracy": all_acc.mean().item(),
                "min_node_accuracy": all_acc.min().item(),
                "max_node_accuracy": all_acc.max().item(),
                "node_accuracies": [round(a, 6) for a in all_acc.tolist()],
                "averaged_model_accuracy": avg_correct.item() / n_test,
                "p10_node_accuracy": torch.quantile(all_acc, 0.1).item(),
            })
            if honest is not None:
                acc = self.comm.gather_nodes(node_correct / n_test).double().cpu()
                out["honest_mean_node_accuracy"] = acc[honest & tested].mean().item()
            if personal:
                pers = self.comm.gather_nodes(pers_right / pers_total.clamp_min(1e-300)).double().cpu()[tested]
                out.update({
                    "mean_personalized_accuracy": pers.mean().item(),
                    "min_personalized_accuracy": pers.min().item(),
                    "p10_personalized_accuracy": torch.quantile(pers, 0.1).item(),
                    "personalized_accuracies": [round(a, 6) for a in pers.tolist()],
                })
        return out

    def state_dict(self) -> dict[str, object]:
        gens = self.algorithm.generators or []
        return {
            "z": self.z.detach().cpu().clone(),
            "step": self.step_count,
            "algorithm": {k: v.cpu() for k, v in self.algorithm.state_dict().items()},
            "optimizer": {k: v.cpu() for k, v in self.optimizer.state_dict().items()},
            "bytes_sent": self.comm.bytes_sent.clone(),
            "generators": [g.get_state() for g in gens],
            # per-node running statistics (8-bit / BN models) and the global RNG that draws
            # stochastic rounding and dropout, so that a resumed run continues exactly
            "model_buffers": self.model.buffers_state(),
            "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state(self.z.device) if self.z.is_cuda else None,
        }

    def load_state_dict(self, state: dict[str, object]) -> None:
        self.z.copy_(state["z"])
        self.step_count = int(state["step"])
        self.algorithm.load_state_dict({k: v.to(self.z.device) for k, v in state["algorithm"].items()})
        self.optimizer.load_state_dict({k: v.to(self.z.device) for k, v in state["optimizer"].items()})
        self.comm.bytes_sent.copy_(state["bytes_sent"])
        for g, s in zip(self.algorithm.generators or [], state["generators"]):
            g.set_state(s)
        self.model.load_buffers_state(state.get("model_buffers"))
        if state.get("torch_rng") is not None:
            torch.set_rng_state(state["torch_rng"])
        if state.get("cuda_rng") is not None and self.z.is_cuda:
            torch.cuda.set_rng_state(state["cuda_rng"], self.z.device)


def run_steps(c, model: StackedModel, steps: int, lr: float) -> torch.Tensor:
    """``steps`` engine steps of the built run ``c`` (:func:`decent8.train.build.build`) with
    ``model`` (``c.model`` or a copy under another execution strategy), fresh algorithm and
    optimizer state, the run's sampler order; the final parameters ``[k, d]``. What the
    benchmarks and tests compare strategies with."""
    engine = Engine(model, c.algorithm, c.optimizer, c.comm, c.x0)
    spe = c.sampler.steps_per_epoch
    for s in range(steps):
        idx = c.sampler.epoch_indices(s // spe)[:, s % spe]
        engine.train_step(take(c.dataset.x_train, idx), c.dataset.y_train[idx], lr)
    return engine.z.clone()
