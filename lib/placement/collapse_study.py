"""How fast the placer collapses, against each of its unstated choices: the sensitivity study of chapter 2.

The write-up states its learning rate (1e-3), K = 8, the moving-average baseline and the √time cost; it does not
state the placer's size, initialisation, logit scale, baseline decay or gradient clipping. Each of those is
varied here one at a time from the defaults of :class:`~lib.placement.reinforce.TrainConfig` (the 2018
authors' code's values), on the 40-node game (no co-location) in the simulator with timing noise, and the
update at which all K samples of a batch are first one placement is recorded for several random seeds (the
placer's and the simulated machine's). A run that has not collapsed after ``max_updates`` is censored
(``None``).

Run ``python -m lib.placement.collapse_study`` to rewrite ``data/runs/collapse_sensitivity.json`` (about ten
minutes on one core); chapter 2 draws the committed file and does not recompute it.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import dataclass, replace

from lib.cli_errors import UserError
from lib.placement.collapse_summary import summary  # noqa: F401 (re-exported: chapter 2 reads it from here)

DEFAULT_PATH = os.path.join("data", "runs", "collapse_sensitivity.json")

#: (factor, value, the TrainConfig fields it sets). The first row is the defaults.
SETTINGS: tuple[tuple[str, str, dict], ...] = (
    ("defaults", "hidden 512, Glorot, MA 0.9", {}),
    ("baseline", "leave-one-out", {"baseline": "leave_one_out"}),
    ("entropy bonus", "0.001", {"entropy": 0.001}),
    ("hidden size", "64", {"hidden": 64}),
    ("hidden size", "128", {"hidden": 128}),
    ("hidden size", "256", {"hidden": 256}),
    ("initialisation", "PyTorch default", {"init": "torch"}),
    ("gradient clipping", "none", {"grad_clip": None}),
    ("baseline decay", "0.5", {"baseline_decay": 0.5}),
    ("baseline decay", "0.99", {"baseline_decay": 0.99}),
    ("temperature", "2", {"temperature": 2.0}),
    ("learning rate", "3e-4", {"lr": 3e-4}),
)


@dataclass(frozen=True)
class StudyRow:
    factor: str
    value: str
    changes: dict
    collapse: tuple  # one entry per seed: the update (0-based) of the first all-identical batch, or None


def collapse_update(env, graph, cfg, max_updates: int) -> int | None:
    """The first update whose K samples are all one placement, or None within ``max_updates``."""
    from lib.placement.reinforce import Trainer

    t = Trainer(env, graph, replace(cfg, n_iters=max_updates, stop_when_identical=True))
    for u in range(max_updates):
        if t.step()["identical"]:
            return u
    return None


def run_study(seeds=(0, 1, 2, 3), max_updates: int = 60, profile: str = "4xT4-pcie", preset: str = "49m",
              settings=SETTINGS, progress: bool = True) -> dict:
    """Every setting of ``settings`` on every seed; a JSON-ready dict (see ``DEFAULT_PATH``)."""
    import torch

    from lib.placement.experiment import EnvSpec, make_env
    from lib.placement.reinforce import TrainConfig

    torch.set_num_threads(1)
    base = TrainConfig()
    rows = []
    t0 = time.time()
    for factor, value, changes in settings:
        dates = []
        for s in seeds:
            env = make_env(EnvSpec(profile=profile, preset=preset, noise=True, env_seed=s))
            dates.append(collapse_update(env, env.graph, replace(base, seed=s, **changes), max_updates))
        rows.append({"factor": factor, "value": value, "changes": changes, "collapse": dates})
        if progress:
            print(f"{factor} = {value}: {dates} ({time.time() - t0:.0f} s)", flush=True)
    from lib.runlog import git_commit

    return {"command": "python -m lib.placement.collapse_study", "git_commit": git_commit(),
            "wall_s": round(time.time() - t0), "what": "update of the first batch whose K samples are all one placement (0-based; null: not within "
                    "max_updates)",
            "game": "40 nodes, no co-location", "profile": profile, "preset": preset, "noise": True,
            "seeds": list(seeds), "max_updates": max_updates, "defaults": base.to_dict(), "rows": rows}


def read_study(path: str = DEFAULT_PATH) -> dict:
    """The committed study, checked for the fields the chapter draws."""
    with open(path) as f:
        d = json.load(f)
    for key in ("rows", "seeds", "max_updates", "profile"):
        if key not in d:
            raise UserError(f"{path}: missing field {key!r}")
    return d


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=DEFAULT_PATH)
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--max-updates", type=int, default=60)
    a = ap.parse_args(argv)
    from lib import atomic

    study = run_study(tuple(range(a.seeds)), a.max_updates)
    atomic.write_text(a.out, json.dumps(study, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
