"""REINFORCE for the placer: sample K placements, time them, push probability towards the cheaper ones.

Cost c_k = sqrt(step time). The update descends (1/K) Σ_k (c_k - b_k) ∇ log π(P_k) - β ∇ (1/K) Σ_k H_k, with
baseline b_k either the paper's moving average of past batch-mean costs (the same b for all k, the value
*before* this batch is folded in; the first batch uses its own mean) or leave-one-out (the mean of the other
K-1 costs). H_k is the summed per-step entropy of sample k, β the optional entropy bonus.

Every update is one record in a run log (``lib.runlog``); after it, the placer, the optimizer, every random
state and the baseline are checkpointed atomically next to the log (``<log>.ckpt.pt``), so a run killed at any
point resumes and continues exactly as an uninterrupted one would (bit for bit on the simulator, whose noise
generator is checkpointed too; on real GPUs the timings themselves differ from run to run). The run keeps the best placements found
(top 5, by their fastest timing) and its final favourite (greedy decoding). Used in: Part I, chapters 2-3.
"""

from __future__ import annotations

import io
import os
from dataclasses import asdict, dataclass, fields
from typing import Any, Callable, Sequence

import numpy as np
import torch

from lib import atomic, runlog
from lib.placement.env import Measurement, PlacementEnv
from lib.placement.placer import Placer, PlacerInputs, check_groups, expand

BASELINES = ("moving_average", "leave_one_out")
#: Config keys that may differ between a run and its resumption (they do not change the records).
RESUMABLE_KEYS = ("n_iters",)


@dataclass(frozen=True)
class TrainConfig:
    """One REINFORCE run. Placer sizes default small (the 2018 authors' code used hidden 512)."""

    n_iters: int = 250
    k: int = 8
    lr: float = 1e-3
    baseline: str = "moving_average"
    baseline_decay: float = 0.9  # bl_dec of the 2018 authors' code
    entropy: float = 0.0
    stop_when_identical: bool = False
    top_n: int = 5
    hidden: int = 64
    op_embed: int = 16
    dev_embed: int = 16
    grad_clip: float | None = 1.0
    logit_tanh: float | None = None
    cache_measurements: bool = False  # only for deterministic environments (noise off)
    seed: int = 0

    def __post_init__(self):
        if self.baseline not in BASELINES:
            raise ValueError(f"baseline must be one of {BASELINES}; got {self.baseline!r}")
        if self.k < 1:
            raise ValueError(f"k (samples per update) must be >= 1; got {self.k}")
        if self.baseline == "leave_one_out" and self.k < 2:
            raise ValueError(f"the leave-one-out baseline needs k >= 2 samples per update; got k={self.k}")
        if self.n_iters < 0:
            raise ValueError(f"n_iters must be >= 0; got {self.n_iters}")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0; got {self.lr}")
        if not 0 <= self.baseline_decay < 1:
            raise ValueError(f"baseline_decay must be in [0, 1); got {self.baseline_decay}")
        if self.entropy < 0:
            raise ValueError(f"entropy (bonus weight) must be >= 0; got {self.entropy}")
        if self.top_n < 1:
            raise ValueError(f"top_n must be >= 1; got {self.top_n}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "TrainConfig":
        names = {f.name for f in fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ValueError(f"unknown TrainConfig keys {sorted(unknown)}; allowed: {sorted(names)}")
        return cls(**d)


@dataclass(frozen=True)
class RunResult:
    """What a run leaves: its top placements (node devices, fastest timing in seconds) and final favourite."""

    path: str | None
    header: dict
    records: tuple
    top: tuple  # ((placement, best_step_s), ...) fastest first
    favourite: tuple | None
    stopped_early: bool

    @property
    def n_updates(self) -> int:
        return len(self.records)

    @property
    def config(self) -> TrainConfig:
        return TrainConfig.from_dict(self.header["config"])

    @classmethod
    def from_log(cls, path: str) -> "RunResult":
        header, records = runlog.read(path)
        if header.get("run_kind") != "reinforce":
            raise ValueError(f"{path!r} is not a REINFORCE run log (run_kind={header.get('run_kind')!r})")
        top: list = []
        n = header["config"]["top_n"]
        for r in records:
            top = merge_top(top, r["placements"], r["step_s"], n)
        fav = tuple(records[-1]["favourite"]) if records else None
        stopped = bool(records and records[-1].get("stop"))
        return cls(path, header, tuple(records), tuple((tuple(p), s) for p, s in top), fav, stopped)

    def candidates(self) -> list[tuple[str, tuple[int, ...]]]:
        """The RL side of the head-to-head: the top placements and the final favourite, without repeats."""
        out, seen = [], set()
        for i, (p, _) in enumerate(self.top):
            out.append((f"top{i + 1}", tuple(p)))
            seen.add(tuple(p))
        if self.favourite is not None and self.favourite not in seen:
            out.append(("favourite", self.favourite))
        return out


def merge_top(top: list, placements: Sequence, step_s: Sequence[float], n: int) -> list:
    """Merge measured placements into the top-``n`` list of distinct placements by fastest timing."""
    best = {tuple(p): s for p, s in top}
    for p, s in zip(placements, step_s):
        key = tuple(int(d) for d in p)
        if key not in best or s < best[key]:
            best[key] = float(s)
    ranked = sorted(best.items(), key=lambda kv: (kv[1], kv[0]))
    return [(list(p), s) for p, s in ranked[:n]]


def model_signature(graph, groups, n_devices: int) -> dict:
    """What a run log must match to be resumed or evaluated: the model and the device count."""
    return {
        "graph": getattr(graph, "name", None),
        "n_nodes": len(graph.nodes),
        "groups": [list(g) for g in groups] if groups is not None else None,
        "n_devices": int(n_devices),
    }


def check_signature(header: dict, expected: dict, path: str = "run log") -> None:
    """Raise ``ValueError`` naming the first mismatch between a log's model and the expected one."""
    got = header.get("model")
    if got is None:
        raise ValueError(f"{path} has no model signature in its header")
    for key in ("graph", "n_nodes", "n_devices", "groups"):
        if got.get(key) != expected.get(key):
            raise ValueError(
                f"{path} was written for another model: {key}={got.get(key)!r}, expected {expected.get(key)!r}"
            )


# --- random state of the environment (duck-typed: a noisy simulator keeps a numpy Generator) ---

def _env_rng(env):
    for name in ("rng", "_rng"):
        r = getattr(env, name, None)
        if isinstance(r, np.random.Generator):
            return r
    return None


def _env_state(env):
    if hasattr(env, "get_rng_state") and hasattr(env, "set_rng_state"):
        return ("method", env.get_rng_state())
    r = _env_rng(env)
    return ("generator", r.bit_generator.state) if r is not None else None


def _set_env_state(env, state) -> None:
    if state is None:
        return
    how, s = state
    if how == "method":
        env.set_rng_state(s)
    else:
        _env_rng(env).bit_generator.state = s


def _save_atomic(obj, path: str) -> None:
    buf = io.BytesIO()
    torch.save(obj, buf)
    atomic.write_bytes(path, buf.getvalue())


def checkpoint_path(log_path: str) -> str:
    return log_path + ".ckpt.pt"


class Trainer:
    """A REINFORCE run over ``env``. ``step()`` does one update; ``run()`` all of them with a progress bar.

    ``groups`` (co-location) makes each decision place a whole group; ``None`` places every node.
    """

    def __init__(self, env: PlacementEnv, graph, config: TrainConfig, groups=None, log_path: str | None = None,
                 resume: bool = True, env_info: Any = None):
        self.env, self.config = env, config
        self.groups = check_groups(groups, env.n_nodes) if groups is not None else None
        if len(graph.nodes) != env.n_nodes:
            raise ValueError(f"graph has {len(graph.nodes)} nodes but the environment places {env.n_nodes}")
        self.inputs = PlacerInputs.from_graph(graph, self.groups)
        with torch.random.fork_rng(devices=[]):  # seeded initialisation without touching the global RNG
            torch.manual_seed(config.seed)
            self.placer = Placer(self.inputs, env.n_devices, config.hidden, config.op_embed, config.dev_embed,
                                 config.logit_tanh)
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
        ckpt = checkpoint_path(path)
        if resume and os.path.exists(path):
            header, records = runlog.read(path)
            check_signature(header, self.signature, path)
            mine = {k: v for k, v in self.config.to_dict().items() if k not in RESUMABLE_KEYS}
            theirs = {k: v for k, v in header.get("config", {}).items() if k not in RESUMABLE_KEYS}
            if mine != theirs:
                diff = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
                raise ValueError(f"{path} was written with another config (differs in {diff}); "
                                 f"use another output path or resume=False")
            if header.get("env") != env_info:
                raise ValueError(f"{path} was written on env {header.get('env')!r}, not {env_info!r}")
            if os.path.exists(ckpt):
                state = torch.load(ckpt, weights_only=False)
                n = state["n_updates"]
                if len(records) < n:
                    raise ValueError(f"{path} has {len(records)} records but its checkpoint is at update {n}")
                if len(records) > n:  # killed between writing a record and its checkpoint: redo that update
                    runlog.rewrite(path, header, records[:n])
                    records = records[:n]
                self._load_state(state)
                self.records = list(records)
            elif records:
                raise ValueError(f"{path} has {len(records)} records but no checkpoint {ckpt!r}; cannot resume")
            self.log = runlog.RunLog(path)
            if self.config.n_iters > header["config"]["n_iters"]:  # an extended run: keep the header honest
                header["config"]["n_iters"] = self.config.n_iters
                runlog.rewrite(path, header, self.records)
            return
        if os.path.exists(ckpt):
            os.unlink(ckpt)
        self.log = runlog.RunLog.create(path, self._header(env_info))

    def _state(self) -> dict:
        return {
            "n_updates": len(self.records),
            "placer": self.placer.state_dict(),
            "opt": self.opt.state_dict(),
            "gen": self.gen.get_state(),
            "env_rng": _env_state(self.env),
            "baseline": self.baseline,
            "top": self.top,
            "stopped": self.stopped,
        }

    def _load_state(self, s: dict) -> None:
        self.placer.load_state_dict(s["placer"])
        self.opt.load_state_dict(s["opt"])
        self.gen.set_state(s["gen"])
        _set_env_state(self.env, s["env_rng"])
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
        k = len(costs)
        if self.config.baseline == "leave_one_out":
            return (costs.sum() - costs) / (k - 1)
        b = float(costs.mean()) if self.baseline is None else self.baseline
        d = self.config.baseline_decay
        self.baseline = d * b + (1 - d) * float(costs.mean())
        return np.full(k, b)

    def step(self) -> dict:
        cfg = self.config
        s = self.placer.sample(cfg.k, self.gen)
        items = s.actions.tolist()
        placements = [expand(a, self.groups, self.env.n_nodes) for a in items]
        ms = [self._measure(p) for p in placements]
        step_s = np.array([m.step_s for m in ms], dtype=float)
        costs = np.sqrt(step_s)
        base = self.baselines(costs)
        adv = torch.tensor(costs - base, dtype=torch.float32)
        loss = (adv * s.log_prob).mean() - cfg.entropy * s.entropy.mean()
        self.opt.zero_grad()
        loss.backward()
        if cfg.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(self.placer.parameters(), cfg.grad_clip)
        self.opt.step()
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
        }
        self.records.append(rec)
        if self.log is not None:
            self.log.append(rec)
            _save_atomic(self._state(), checkpoint_path(self.log_path))
        return rec

    def run(self, progress: bool = True, callback: Callable[[dict], None] | None = None) -> RunResult:
        """Run the remaining updates (from a resumed checkpoint, if any). ``callback(record)`` after each."""
        from tqdm.auto import tqdm

        todo = 0 if self.stopped else max(0, self.config.n_iters - len(self.records))
        bar = tqdm(total=self.config.n_iters, initial=len(self.records), disable=not progress, desc="REINFORCE",
                   unit="update")
        try:
            for _ in range(todo):
                rec = self.step()
                bar.update(1)
                bar.set_postfix(mean_ms=f"{rec['mean_step_s'] * 1e3:.1f}", best_ms=f"{rec['best_step_s'] * 1e3:.1f}")
                if callback is not None:
                    callback(rec)
                if self.stopped:
                    break
        finally:
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
