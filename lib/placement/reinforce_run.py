"""What a REINFORCE run is and what it leaves: its config, and its result read back from the run log.

``TrainConfig`` is the run's every setting (frozen, with a JSON form, stored in the log's header);
``RunResult`` is what the evaluation and the figures need, rebuilt from the log alone: the top placements by
their fastest timing and the final favourite (greedy decoding). Used in: Part I, chapters 2-3.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, fields
from typing import Sequence

from lib import runlog
from lib.cli_errors import UserError
from lib.placement.reinforce_baselines import BASELINES


#: The settings chapter 4 added (the update rule and the policy; see ``updates.py``).
CHAPTER4_KEYS = ("algorithm", "ppo_epochs", "ppo_clip", "policy", "n_groups")


@dataclass(frozen=True)
class TrainConfig:
    """One REINFORCE run. The placer's defaults are the 2018 authors' code's (hidden 512, Glorot init, forget
    bias 1, gradient norm clipped at 1, Adam, baseline decay 0.9); the learning rate and K are the write-up's.
    ``stop_when_identical`` ends a run once all K samples are one placement, as the write-up did."""

    n_iters: int = 250
    k: int = 8
    lr: float = 1e-3
    baseline: str = "moving_average"
    baseline_decay: float = 0.9  # bl_dec of the 2018 authors' code
    entropy: float = 0.0
    stop_when_identical: bool = False
    top_n: int = 5
    hidden: int = 512  # hidden_size of the 2018 authors' code
    op_embed: int = 16
    dev_embed: int = 16
    grad_clip: float | None = 1.0  # grad_bound of the 2018 authors' code
    logit_tanh: float | None = None  # the 2018 code's tanh_constant 1.0 would forbid the collapse (placer.py)
    init: str = "glorot"  # the 2018 code: Glorot-uniform weights, forget bias 1.0
    temperature: float = 1.0  # the 2018 code's temperature
    cache_measurements: bool = False  # only for deterministic environments (noise off)
    seed: int = 0
    # chapter 4 (updates.py): the update and the policy; at these defaults a run is chapters 2-3's, bit for bit
    algorithm: str = "reinforce"  # or "ppo"
    ppo_epochs: int = 4
    ppo_clip: float = 0.2
    policy: str = "placer"  # or "hierarchical" (the grouper of Mirhoseini et al. 2018 learns the groups)
    n_groups: int = 16

    def __post_init__(self):
        # exact types first (a run config read back from a log's header must not be coerced): ints reject
        # 1.5, true and "2"; floats must be finite
        for name in ("n_iters", "k", "top_n", "hidden", "op_embed", "dev_embed", "seed"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, numbers.Integral):
                raise UserError(f"{name} must be an integer; got {v!r}")
        for name in ("lr", "baseline_decay", "entropy", "grad_clip", "logit_tanh", "temperature"):
            v = getattr(self, name)
            if v is None and name in ("grad_clip", "logit_tanh"):
                continue
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v):
                raise UserError(f"{name} must be a finite number; got {v!r}")
        from lib.placement.placer import INITS

        if self.init not in INITS:
            raise UserError(f"init must be one of {INITS}; got {self.init!r}")
        if not self.temperature > 0:
            raise UserError(f"temperature must be > 0; got {self.temperature}")
        from lib.placement.ppo import check_ppo
        from lib.placement.updates import ALGORITHMS, POLICIES

        if self.algorithm not in ALGORITHMS:
            raise UserError(f"algorithm {self.algorithm!r}: must be one of {ALGORITHMS}")
        if self.policy not in POLICIES:
            raise UserError(f"policy {self.policy!r}: must be one of {POLICIES}")
        check_ppo(self.ppo_epochs, self.ppo_clip)
        if isinstance(self.n_groups, bool) or not isinstance(self.n_groups, numbers.Integral) or self.n_groups < 1:
            raise UserError(f"n_groups {self.n_groups!r}: must be an integer >= 1")
        if self.baseline not in BASELINES:
            raise UserError(f"baseline must be one of {BASELINES}; got {self.baseline!r}")
        if self.k < 1:
            raise UserError(f"k (samples per update) must be >= 1; got {self.k}")
        if self.baseline == "leave_one_out" and self.k < 2:
            raise UserError(f"the leave-one-out baseline needs k >= 2 samples per update; got k={self.k}")
        if self.n_iters < 0:
            raise UserError(f"n_iters must be >= 0; got {self.n_iters}")
        if not self.lr > 0:
            raise UserError(f"lr must be > 0; got {self.lr}")
        if not 0 <= self.baseline_decay < 1:
            raise UserError(f"baseline_decay must be in [0, 1); got {self.baseline_decay}")
        if self.entropy < 0:
            raise UserError(f"entropy (bonus weight) must be >= 0; got {self.entropy}")
        if self.top_n < 1:
            raise UserError(f"top_n must be >= 1; got {self.top_n}")
        if min(self.hidden, self.op_embed, self.dev_embed) < 1:
            raise UserError(f"hidden, op_embed and dev_embed must be >= 1; got {self.hidden}, {self.op_embed}, "
                             f"{self.dev_embed}")
        if self.grad_clip is not None and not self.grad_clip > 0:
            raise UserError(f"grad_clip must be > 0 or None; got {self.grad_clip}")

    def to_dict(self) -> dict:
        """The JSON form; chapter 4's settings appear only when they differ from the defaults, so the header of
        a REINFORCE run (and resuming a log written before they existed) is unchanged."""
        d = asdict(self)
        for name in CHAPTER4_KEYS:
            if d[name] == getattr(TrainConfig, name) and not (name.startswith("ppo") and self.algorithm == "ppo") \
                    and not (name == "n_groups" and self.policy == "hierarchical"):
                del d[name]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "TrainConfig":
        names = {f.name for f in fields(cls)}
        if "hidden" in d and "init" not in d:  # a log from before the init choice existed: PyTorch's init
            d = {**d, "init": "torch"}
        unknown = set(d) - names
        if unknown:
            raise UserError(f"unknown TrainConfig keys {sorted(unknown)}; allowed: {sorted(names)}")
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
            raise UserError(f"{path!r} is not a REINFORCE run log (run_kind={header.get('run_kind')!r})")
        config = header.get("config")
        if not isinstance(config, dict):
            raise UserError(f"run log {path!r}: header config: {config!r} is not an object")
        try:  # the header's config with exact types (a hand-edited k: 2.0 is refused, not coerced)
            cfg = TrainConfig.from_dict(config)
        except UserError as e:  # TrainConfig's own checks; anything else is a bug
            raise UserError(f"run log {path!r}: header config: {e}") from None
        top: list = []
        n = cfg.top_n  # the config as read (a field the header lacks takes its default, as everywhere else)
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
