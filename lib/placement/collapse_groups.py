"""When the placer over co-location groups collapses: the study behind chapter 3's "collapse with groups".

The write-up says that with its 13 co-location groups the placer "explores for about a hundred updates" before it
settles. Chapter 3's run collapses (all K samples of a batch one placement) far sooner. This study records, per
experiment (A, B, C of chapter 3) and per random seed (the placer's and the simulated machine's), the update
at which each run first collapses, at chapter 3's settings and with one choice changed at a time: the hidden
size (the same LSTM now unrolls over 13 steps instead of 40), the initialisation, the learning rate and the
REINFORCE baseline. A run that has not collapsed after ``max_updates`` is censored (``None``).

Run ``python -m lib.placement.collapse_groups`` to rewrite ``data/runs/collapse_groups.json`` (about ten minutes
on one core); chapter 3 draws the committed file, and ``tests/placement/test_collapse_groups.py`` re-runs a
small part of it.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import replace

from lib.cli_errors import UserError
from lib.placement import collapse_study

DEFAULT_PATH = os.path.join("data", "runs", "collapse_groups.json")

#: Chapter 3's experiments: (name, EnvSpec fields, TrainConfig fields).
EXPERIMENTS: dict[str, tuple[dict, dict]] = {
    "A": ({}, {"baseline": "moving_average"}),
    "B": ({"n_micro": 4}, {"baseline": "leave_one_out"}),
    "C": ({"mem_cap": 0.24}, {"baseline": "leave_one_out"}),
}

#: Chapter 3's placer settings (its parameters cell): the rows below change one of them.
CHAPTER3 = {"hidden": 256, "lr": 1e-3, "k": 8}

#: (experiment, factor, value, TrainConfig changes from chapter 3's settings). The first three rows are the
#: chapter's own runs.
SETTINGS: tuple[tuple[str, str, str, dict], ...] = (
    ("A", "chapter 3", "hidden 256, lr 1e-3, moving average", {}),
    ("B", "chapter 3", "hidden 256, lr 1e-3, leave-one-out", {}),
    ("C", "chapter 3", "hidden 256, lr 1e-3, leave-one-out", {}),
    ("A", "hidden size", "512 (the 2018 code)", {"hidden": 512}),
    ("A", "hidden size", "64", {"hidden": 64}),
    ("A", "initialisation", "PyTorch default", {"init": "torch"}),
    ("A", "learning rate", "1e-4", {"lr": 1e-4}),
    ("A", "baseline", "leave-one-out", {"baseline": "leave_one_out"}),
    ("A", "entropy bonus", "0.001", {"entropy": 0.001}),
)


def config_for(experiment: str, changes: dict, seed: int):
    """The TrainConfig of one run: chapter 3's settings, the experiment's baseline, then ``changes``."""
    from lib.placement.reinforce import TrainConfig

    if experiment not in EXPERIMENTS:
        raise ValueError(f"experiment {experiment!r}: must be one of {sorted(EXPERIMENTS)}")
    return TrainConfig(**{**CHAPTER3, **EXPERIMENTS[experiment][1], **changes, "seed": seed})


def spec_for(experiment: str, seed: int, profile: str = "4xT4-pcie", preset: str = "49m"):
    from lib.placement.experiment import EnvSpec

    return EnvSpec(profile=profile, preset=preset, noise=True, env_seed=seed, **EXPERIMENTS[experiment][0])


def group_collapse_update(experiment: str, changes: dict, seed: int, max_updates: int,
                          profile: str = "4xT4-pcie", preset: str = "49m") -> int | None:
    """The first update (0-based) whose K samples over the co-location groups are all one placement."""
    from lib.graph import colocate
    from lib.placement.experiment import make_env
    from lib.placement.reinforce import Trainer

    env = make_env(spec_for(experiment, seed, profile, preset))
    cfg = replace(config_for(experiment, changes, seed), n_iters=max_updates, stop_when_identical=True)
    t = Trainer(env, env.graph, cfg, groups=colocate(env.graph))
    for u in range(max_updates):
        if t.step()["identical"]:
            return u
    return None


def run_study(seeds=(0, 1, 2, 3), max_updates: int = 120, settings=SETTINGS, profile: str = "4xT4-pcie",
              preset: str = "49m", progress: bool = True) -> dict:
    """Every setting on every seed; a JSON-ready dict (see ``DEFAULT_PATH``)."""
    import torch

    from lib.runlog import git_commit

    if not max_updates >= 1:
        raise ValueError(f"max_updates {max_updates!r}: must be >= 1")
    torch.set_num_threads(1)
    rows, t0 = [], time.time()
    for x, factor, value, changes in settings:
        dates = [group_collapse_update(x, changes, s, max_updates, profile, preset) for s in seeds]
        rows.append({"experiment": x, "factor": factor, "value": value, "changes": changes, "collapse": dates})
        if progress:
            print(f"{x} {factor} = {value}: {dates} ({time.time() - t0:.0f} s)", flush=True)
    return {"command": f"python -m lib.placement.collapse_groups --seeds {len(seeds)} --max-updates {max_updates}",
            "git_commit": git_commit(), "wall_s": round(time.time() - t0),
            "what": "update of the first batch whose K samples are all one placement (0-based; null: not "
                    "within max_updates)",
            "game": "13 co-location groups", "profile": profile, "preset": preset, "noise": True,
            "seeds": list(seeds), "max_updates": max_updates, "chapter3": CHAPTER3, "rows": rows}


def read_study(path: str = DEFAULT_PATH) -> dict:
    """The committed study, checked for the fields chapter 3 draws (those of chapter 2's study, and one date per
    seed in every row)."""
    d = collapse_study.read_study(path)
    for r in d["rows"]:
        if len(r["collapse"]) != len(d["seeds"]):
            raise UserError(f"{path}: row {r['factor']}: {r['value']} has {len(r['collapse'])} dates for "
                             f"{len(d['seeds'])} seeds")
    return d


def row(study: dict, experiment: str, factor: str, value: str | None = None) -> dict:
    """The study's row for one experiment and setting (the first one of ``factor`` when ``value`` is None)."""
    for r in study["rows"]:
        if r["experiment"] == experiment and r["factor"] == factor and (value is None or r["value"] == value):
            return r
    raise KeyError(f"no row {experiment} {factor} {value!r} in the study")


def dates_or_cap(r: dict, cap: int) -> list[int]:
    """A row's collapse updates, censored runs counted at ``cap``."""
    return [cap if c is None else int(c) for c in r["collapse"]]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=DEFAULT_PATH)
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--max-updates", type=int, default=120)
    a = ap.parse_args(argv)
    if a.seeds < 1:
        ap.error(f"--seeds {a.seeds}: must be >= 1")
    from lib import atomic

    study = run_study(tuple(range(a.seeds)), a.max_updates)
    atomic.write_text(a.out, json.dumps(study, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
