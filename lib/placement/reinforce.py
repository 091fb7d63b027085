"""REINFORCE for the placer: sample K placements, time them, push probability towards the cheaper ones.

Cost c_k = sqrt(step time). The update descends (1/K) Σ_k (c_k - b_k) ∇ log π(P_k) - β ∇ (1/K) Σ_k H_k, with
baseline b_k either the paper's moving average of past batch-mean costs (the same b for all k, the value
*before* this batch is folded in; the first batch uses its own mean) or leave-one-out (the mean of the other
K-1 costs). H_k is the summed per-step entropy of sample k, β the optional entropy bonus.

Every update is one record in a run log (``lib.runlog``); the placer, the optimizer, every random state and the
baseline are checkpointed atomically next to the log (``<log>.ckpt.pt``): inside ``run()`` at most every
``checkpoint_every_s`` seconds (10) and at its end, after a lone ``step()`` every time. The 512-unit placer's
checkpoint is 43 MB and takes about 0.2 s to write, twice an update's own time. A run killed at any point
resumes from its last checkpoint, redoes the updates logged after it (the log is cut back to the checkpoint)
and continues exactly as an uninterrupted one would (bit for bit on the simulator, whose noise
generator is checkpointed too; on real GPUs the timings themselves differ from run to run). The run keeps the
best placements found (top 5, by their fastest timing) and its final favourite (greedy decoding).

This module is the training loop; the cost and baselines are in ``reinforce_baselines.py``, checkpointing and
resuming in ``reinforce_checkpoint.py``, the config and the result read back from a log in
``reinforce_run.py`` (their public names are re-exported here). Used in: Part I, chapters 2-3.
"""

from __future__ import annotations

from typing import Any, Callable

import time

import numpy as np
import torch

from lib import runlog
from lib.placement.env import Measurement, PlacementEnv
from lib.placement.placer import PlacerInputs, check_groups, expand
from lib.placement.reinforce_baselines import BASELINES, costs_of, leave_one_out, moving_average
from lib.placement.reinforce_checkpoint import (RESUMABLE_KEYS, check_signature, checkpoint_path, env_rng_state,
                                                model_signature, open_run_log, save_atomic, set_env_rng_state)
from lib.placement.reinforce_run import RunResult, TrainConfig, merge_top
from lib.placement.updates import make_policy, update

__all__ = ["BASELINES", "RESUMABLE_KEYS", "RunResult", "TrainConfig", "Trainer", "check_signature",
           "checkpoint_path", "merge_top", "model_signature", "train"]


#: Seconds between checkpoints inside ``run()`` (see the module doc).
CHECKPOINT_EVERY_S = 10.0


class Trainer:
    """A REINFORCE run over ``env``. ``step()`` does one update; ``run()`` all of them with a progress bar.

    ``groups`` (co-location) makes each decision place a whole group; ``None`` places every node.
    """

    def __init__(self, env: PlacementEnv, graph, config: TrainConfig, groups=None, log_path: str | None = None,
                 resume: bool = True, env_info: Any = None, checkpoint_every_s: float = CHECKPOINT_EVERY_S):
        self.env, self.config = env, config
        if not checkpoint_every_s >= 0:
            raise ValueError(f"checkpoint_every_s {checkpoint_every_s!r}: must be >= 0 seconds")
        self.checkpoint_every_s = float(checkpoint_every_s)
        self._in_run, self._saved_at, self._saved_n = False, float("-inf"), None
        self.groups = check_groups(groups, env.n_nodes) if groups is not None else None
        if config.policy == "hierarchical" and self.groups is not None:
            raise ValueError("groups: the hierarchical policy learns its own groups; pass groups=None")
        if len(graph.nodes) != env.n_nodes:
            raise ValueError(f"graph has {len(graph.nodes)} nodes but the environment places {env.n_nodes}")
        self.inputs = PlacerInputs.from_graph(graph, self.groups)
        with torch.random.fork_rng(devices=[]):  # seeded initialisation without touching the global RNG
            torch.manual_seed(config.seed)
            self.placer = make_policy(config, self.inputs, graph, env.n_devices)  # updates.py: placer or hierarchical
        self.opt = torch.optim.Adam(self.placer.parameters(), lr=config.lr)
        self.gen = torch.Generator().manual_seed(config.seed)
        self.baseline: float | None = None
        self.top: list = []
        self.records: list = []
        self.stopped = False
        self.cache: dict = {}
        self.signature = model_signature(graph, self.groups, env.n_devices)
        self.log_path = log_path
        self.log = None
        if log_path is not None:
            self._open_log(log_path, resume, env_info if env_info is not None else env.describe())

    # --- logs and checkpoints ---
    def _header(self, env_info) -> dict:
        return runlog.make_header(self.config.to_dict(), env_info, self.config.seed,
                                  run_kind="reinforce", model=self.signature)

    def _open_log(self, path: str, resume: bool, env_info) -> None:
        self.log, self.records, state = open_run_log(path, resume, lambda: self._header(env_info),
                                                     self.config.to_dict(), self.signature, env_info)
        if state is not None:
            self._load_state(state)

    def _state(self) -> dict:
        return {
            "n_updates": len(self.records),
            "placer": self.placer.state_dict(),
            "opt": self.opt.state_dict(),
            "gen": self.gen.get_state(),
            "env_rng": env_rng_state(self.env),
            "baseline": self.baseline,
            "top": self.top,
            "stopped": self.stopped,
        }

    def _load_state(self, s: dict) -> None:
        self.placer.load_state_dict(s["placer"])
        self.opt.load_state_dict(s["opt"])
        self.gen.set_state(s["gen"])
        set_env_rng_state(self.env, s["env_rng"])
        self.baseline, self.top, self.stopped = s["baseline"], s["top"], s["stopped"]

    # --- the update ---
    def _measure(self, placement: tuple[int, ...]) -> Measurement:
        if self.config.cache_measurements:
            if placement not in self.cache:
                self.cache[placement] = self.env.measure(placement)
            return self.cache[placement]
        return self.env.measure(placement)

    def baselines(self, costs: np.ndarray) -> np.ndarray:
        """Per-sample baselines for this batch (and fold the batch into the moving average)."""
        if self.config.baseline == "leave_one_out":
            return leave_one_out(costs)
        base, self.baseline = moving_average(costs, self.baseline, self.config.baseline_decay)
        return base

    def step(self) -> dict:
        cfg = self.config
        s = self.placer.sample(cfg.k, self.gen)
        items = s.actions.tolist()
        placements = [expand(a, self.groups, self.env.n_nodes) for a in items]
        ms = [self._measure(p) for p in placements]
        step_s = np.array([m.step_s for m in ms], dtype=float)
        costs = costs_of(step_s)
        base = self.baselines(costs)
        adv = torch.tensor(costs - base, dtype=torch.float32)
        loss, extra = update(self, s, items, adv)  # updates.py: REINFORCE's one step or PPO's epochs
        identical = all(a == items[0] for a in items)
        self.top = merge_top(self.top, placements, step_s.tolist(), cfg.top_n)
        fav = expand(self.placer.greedy(), self.groups, self.env.n_nodes)
        self.stopped = bool(identical and cfg.stop_when_identical)
        rec = {
            "kind": "update",
            "update": len(self.records),
            "placements": [list(p) for p in placements],
            "step_s": step_s.tolist(),
            "oom": [bool(m.oom) for m in ms],
            "costs": costs.tolist(),
            "baseline": base.tolist(),
            "log_prob": s.log_prob.detach().tolist(),
            "entropy": float(s.entropy.detach().mean()),
            "loss": float(loss.detach()),
            "mean_step_s": float(step_s.mean()),
            "identical": identical,
            "best_step_s": self.top[0][1],
            "best_placement": list(self.top[0][0]),
            "favourite": list(fav),
            "stop": self.stopped,
            **extra,
        }
        self.records.append(rec)
        if self.log is not None:
            self.log.append(rec)
            if not self._in_run or time.monotonic() - self._saved_at >= self.checkpoint_every_s:
                self._checkpoint()
        return rec

    def _checkpoint(self) -> None:
        """Save the state after the latest update (nothing to do if that is saved already)."""
        if self.log is None or self._saved_n == len(self.records):
            return
        save_atomic(self._state(), checkpoint_path(self.log_path))
        self._saved_at, self._saved_n = time.monotonic(), len(self.records)

    def run(self, progress: bool = True, callback: Callable[[dict], None] | None = None) -> RunResult:
        """Run the remaining updates (from a resumed checkpoint, if any). ``callback(record)`` after each."""
        from tqdm.auto import tqdm

        todo = 0 if self.stopped else max(0, self.config.n_iters - len(self.records))
        bar = tqdm(total=self.config.n_iters, initial=len(self.records), disable=not progress, desc="REINFORCE",
                   unit="update")
        self._in_run = True
        try:
            for _ in range(todo):
                rec = self.step()
                bar.update(1)
                bar.set_postfix(mean_ms=f"{rec['mean_step_s'] * 1e3:.1f}", best_ms=f"{rec['best_step_s'] * 1e3:.1f}")
                if callback is not None:
                    callback(rec)
                if self.stopped:
                    break
            # the last update's state, whatever the interval; not after an exception, which may have left an
            # update half done (its sample drawn, no record): a resume redoes from the last checkpoint instead
            self._in_run = False
            self._checkpoint()
        finally:
            self._in_run = False
            bar.close()
        return self.result()

    def result(self) -> RunResult:
        header = runlog.read(self.log_path)[0] if self.log_path else {
            "kind": "header", "config": self.config.to_dict(), "run_kind": "reinforce", "model": self.signature}
        fav = tuple(self.records[-1]["favourite"]) if self.records else None
        return RunResult(self.log_path, header, tuple(self.records), tuple((tuple(p), s) for p, s in self.top),
                         fav, self.stopped)


def train(env: PlacementEnv, graph, config: TrainConfig, groups=None, log_path: str | None = None,
          resume: bool = True, progress: bool = True, callback=None, env_info: Any = None) -> RunResult:
    """Train a placer on ``env`` with REINFORCE; log to ``log_path`` (resuming it when it exists)."""
    return Trainer(env, graph, config, groups, log_path, resume, env_info).run(progress, callback)
