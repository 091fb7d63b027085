"""The model's stated uncertainty, and what a pick's lead is worth under it.

The uncertainty of the cost model on one GPU type is its *held-out error*: the median |error| of tokens/s/GPU
over the published runs on that GPU type that no constant was fitted to and no stack field chosen on
(every runs file's runs outside the efficiency fit's ``fitted_to`` and the stacks' ``chosen_on``: the
calibration set's held-out runs, ``heldout.json``, the sweeps and the Ultra-Scale Playbook's runs), under
``practice``. It is stored in
``data/hardware/gpus/<gpu>.json`` (``heldout_error``) by ``benchmarks/fit_efficiency.py --write``
(``validate.heldout_error`` computes it), and tests/galvatron/test_plausibility.py checks the stored figure
is that computation's.

Two uses:

- ``lead_range``: the lead of a pick over another layout (the published one in ``validate``, the runner-up in
  ``plan``), estimate over estimate, and its range when each estimate may be off by up to the held-out error
  in opposite directions: ``[r (1 - e) / (1 + e) - 1, r (1 + e) / (1 - e) - 1]`` for the ratio ``r``. A lead
  is *real* only where the whole range is above zero.
- ``mfu_check``: a pick's model FLOPs utilisation against the best published for its GPU type and stack
  (``best_published_mfu``); the pick is *implausible* when it exceeds that best by more than the
  held-out error, ``mfu > best (1 + e)``: faster than anything published by more than the model can tell.

This is the book's one definition of the model's held-out error. Used in: ``validate.py`` (each pick's
``lead``), ``job_plan.py`` (``plausibility``), ``practice_picks.py`` and ``exercises_practice.py`` (chapter 9's
Meta run and exercise 7), ``lib/closing/report.py`` and book/closing/01_one_run (chapter 11), tests.
"""

from __future__ import annotations

import json
from functools import lru_cache

from .search.efficiency import GPU_DIR


def stated_error(gpu: str) -> float:
    """The held-out median |error| stored for GPU type ``gpu`` (see the module docstring)."""
    path = GPU_DIR / f"{gpu}.json"
    if not path.is_file():
        raise ValueError(f"unknown gpu {gpu!r}")
    d = json.loads(path.read_text())
    if "heldout_error" not in d:
        raise ValueError(f"{path.name} has no heldout_error: run benchmarks/fit_efficiency.py --write")
    return float(d["heldout_error"]["median_abs"])


def heldout_runs(gpu: str) -> list:
    """The published runs on ``gpu`` that no constant was fitted to and no stack field chosen on: every run of
    every file of ``data/published_runs/`` (the calibration set, the held-out runs, the sweeps, the Ultra-Scale
    Playbook's) outside the efficiency fit (``fitted_to``) and the stacks' ``chosen_on``, in file order."""
    from .published import load_runs
    from .search.efficiency import load_gpu
    from .stacks import chosen_on

    root = GPU_DIR.parents[1] / "published_runs"
    judged = set(load_gpu(gpu).fitted_to) | set(chosen_on())     # runs that fitted or chose something
    files = sorted(root.glob("*.json"), key=lambda f: (f.name != "calibration.json", f.name))
    return [r for f in files for r in load_runs(str(f)).runs if r.cluster.gpu == gpu and r.name not in judged]


def lead_range(pick_estimate: float, other_estimate: float, error: float) -> dict:
    """{"lead", "low", "high", "real"}: the pick's lead over another layout, estimate over estimate, and its
    range when each may be off by up to ``error`` in opposite directions (module docstring)."""
    if not (pick_estimate > 0 and other_estimate > 0):
        raise ValueError(f"lead_range needs two estimates > 0; got {pick_estimate!r} and {other_estimate!r}")
    if not 0 <= error < 1:
        raise ValueError(f"lead_range needs an error in [0, 1); got {error!r}")
    r = pick_estimate / other_estimate
    low, high = r * (1 - error) / (1 + error) - 1, r * (1 + error) / (1 - error) - 1
    return {"lead": round(r - 1, 6), "low": round(low, 6), "high": round(high, 6), "real": bool(low > 0)}


def mfu_check(mfu: float, best: dict | None, error: float) -> dict:
    """{"mfu", "best_published_mfu", "best_run", "bound", "implausible"}: ``mfu`` against ``best`` (a
    ``best_published_mfu`` answer, or None when nothing is published: then no bound)."""
    if best is None:
        return {"mfu": mfu, "best_published_mfu": None, "best_run": None, "bound": None, "implausible": False}
    bound = round(best["mfu"] * (1 + error), 4)
    return {"mfu": mfu, "best_published_mfu": best["mfu"], "best_run": best["run"], "bound": bound,
            "implausible": bool(mfu > bound)}


@lru_cache(maxsize=None)
def best_published_mfu(gpu: str, stack: str | None = None) -> dict | None:
    """The highest model FLOPs utilisation among the published runs of ``data/published_runs/`` on GPU type
    ``gpu`` (and ``stack``'s family, where given: ``stacks.stack_family``; a run's null stack is
    Megatron-LM), each from its published
    tokens/s/GPU and the convention of ``cost.model_flops_per_token``, or quoted by a source without a layout
    (a stack file's ``quoted_mfu``, ``data/stacks/``): {"mfu", "run"}, or None. Cached: the
    published runs are read once per (gpu, stack)."""
    from pathlib import Path

    from .search.analytic import run_shape
    from .search.cost import model_flops_per_token
    from .search.efficiency import load_gpu
    from .stacks import DEFAULT_STACK, load_stack, stack_family, stack_names

    peak = load_gpu(gpu).flops("bf16")
    family = None if stack is None else stack_family(stack)
    best = None
    # read raw (the files are checked by published.load_runs in the tests), so the browser's widgets can too
    for f in sorted((Path(__file__).resolve().parents[2] / "data" / "published_runs").glob("*.json")):
        for r in json.loads(f.read_text(encoding="utf-8"))["runs"]:
            if r["cluster"]["gpu"] != gpu or (family is not None
                                               and stack_family(r.get("stack") or DEFAULT_STACK) != family):
                continue
            flops = model_flops_per_token(run_shape(r["name"], r["model"]))
            mfu = r["measured"]["tokens_per_s_per_gpu"] * flops / peak
            if best is None or mfu > best["mfu"]:
                best = {"mfu": round(mfu, 4), "run": r["name"]}
    # MFUs a source quotes without a layout to price (a stack file's "quoted_mfu")
    for name in stack_names():
        if family is not None and stack_family(name) != family:
            continue
        for q in load_stack(name).get("quoted_mfu", []):
            if q["gpu"] == gpu and (best is None or q["mfu"] > best["mfu"]):
                best = {"mfu": q["mfu"], "run": f"quoted: {q['what']} ({q['source'].split(':')[0]})"}
    return best
