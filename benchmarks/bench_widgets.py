"""How fast each part's widget answers a change (lib/placement/widgets.py, lib/galvatron/widgets.py,
lib/straggler/widgets.py), printed as a table.

Budget (issue 20): every change answered within 0.5 s on one CPU core with the default presets, the
answer drawn (summary, figure and its HTML) included. Each change is timed cold: the caches of answers and
baselines are cleared first, so a setting seen before does not flatter the figure. Run it on one core:
``taskset -c 0 python benchmarks/bench_widgets.py [--check]`` (``--check`` exits 1 when a change misses it).
Used in: book/placement/01_the_game, book/galvatron/03_the_search, book/stragglers/01_the_one_slow_gpu.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core, as the budget says
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import contextlib  # noqa: E402
import io  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402

BUDGET_S = 0.5


def timed(change) -> float:
    with contextlib.redirect_stdout(io.StringIO()):  # outside a kernel, Output widgets print to stdout
        t = time.perf_counter()
        change()
        return time.perf_counter() - t


def placement_changes():
    from lib.placement import widgets as PW

    w = PW.PlaceItYourself()
    with contextlib.redirect_stdout(io.StringIO()):
        w.widget()
    c = w._widgets()

    def cold(fn):
        def run():
            PW._best_baseline.cache_clear()
            fn()
        return run

    def setv(key, value, i=None):
        return lambda: setattr(c[key][i] if i is not None else c[key], "value", value)

    return "Part I: place it yourself", [
        ("preset: human 2-GPU split on 0,1", cold(setv("preset", "human 2-GPU split on 0,1"))),
        ("preset: only the loss on GPU 1 (to nodes)", cold(setv("preset", "only the loss on GPU 1"))),
        ("one node picker: block3.mlp on GPU 2", cold(setv("nodes", 2, [n.name for n in w.graph.nodes]
                                                          .index("block3.mlp")))),
        ("one group picker: group 5 on GPU 3", cold(lambda: (setattr(c["unit"], "value", "groups"),
                                                             setattr(c["groups"][5], "value", 3)))),
        ("toggle B: 4 micro-batches (new environment)", cold(lambda: (PW.sim_env.cache_clear(),
                                                                      PW.env_for.cache_clear(),
                                                                      setattr(c["b"], "value", True)))),
        ("toggle C: memory cap 24%", cold(setv("c", True))),
        ("random placement button", cold(c["random"].click)),
    ]


def galvatron_changes():
    from lib.galvatron import widgets as GW

    w = GW.YourBudgetYourPlan()
    with contextlib.redirect_stdout(io.StringIO()):
        w.widget()
    c = w._widgets()

    def cold(key, value):
        def run():
            GW.plan_answer.cache_clear()
            c[key].value = value
        return run

    # each change one step away from the defaults (8 GPUs, 8 GB); the last row goes beyond them
    return "Part II: your budget, your plan (bert-huge-32)", [
        ("budget 8 -> 12 GB", cold("budget", 12.0)),
        ("budget 12 -> 8 GB", cold("budget", 8.0)),
        ("GPUs 8 -> 4", cold("gpus", 4)),
        ("GPUs 4 -> 16", cold("gpus", 16)),
        ("GPUs 16 -> 8", cold("gpus", 8)),
        ("space full -> dp+tp", cold("space", "dp+tp")),
        ("one strategy for all layers", cold("uniform", True)),
        ("cost rules: the last offered", cold("rules", list(GW.available_rules())[-1])),
        ("beyond the defaults: GPUs 8 -> 16 at 16 GB (not in the budget)", cold("gpus", 16),
         lambda: (setattr(c["space"], "value", "full"), setattr(c["uniform"], "value", False),
                  setattr(c["budget"], "value", 16.0))),
    ]


def straggler_changes():
    from lib.straggler import widgets as SW

    w = SW.StragglerExplorer()
    with contextlib.redirect_stdout(io.StringIO()):
        w.widget()
    c = w._widgets()
    setv = lambda k, v: (lambda: setattr(c[k], "value", v))
    return "Part III: the one slow GPU (16,384 GPUs, 14 days)", [
        ("interval 120 -> 30 min", setv("interval_min", 30.0)),
        ("backups 0 -> 2%", setv("backup_pct", 2.0)),
        ("GPUs 16,384 -> 65,536", setv("n_gpus", 65_536)),
        ("GPUs 65,536 -> 8", setv("n_gpus", 8)),
    ]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--check", action="store_true", help="exit 1 when a change takes longer than 0.5 s")
    args = p.parse_args(argv)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"widget answers, timed cold on {platform.processor() or platform.machine()}, {cores} core(s) allowed; "
          f"budget {BUDGET_S} s per change")
    worst = 0.0
    for part in (placement_changes, galvatron_changes, straggler_changes):
        title, changes = part()
        print(f"\n{title}")
        for what, change, *setup in changes:
            for fn in setup:  # untimed: brings the widget to the row's starting point
                with contextlib.redirect_stdout(io.StringIO()):
                    fn()
            s = timed(change)
            counted = "not in the budget" not in what
            worst = max(worst, s) if counted else worst
            verdict = ("ok" if s <= BUDGET_S else "OVER") if counted else "(reported only)"
            print(f"  {what:<48} {s:7.3f} s  {verdict}")
    print(f"\nslowest change: {worst:.3f} s")
    return 1 if args.check and worst > BUDGET_S else 0


if __name__ == "__main__":
    raise SystemExit(main())
