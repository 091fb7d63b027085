"""Speed of the straggler model (lib/straggler*.py), printed as a table.

Budgets (issue 7): two weeks at 16,384 GPUs simulated in at most 0.5 s on one core; every slider frame of the
chapter precomputed in at most 10 s. Run: ``python benchmarks/bench_straggler.py [--check]`` (``--check`` exits 1
when a budget is missed). Used in: book/stragglers/01_the_one_slow_gpu.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core, as the budget says
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from lib.straggler import model as straggler  # noqa: E402
from lib.straggler.figures import chapter_figures  # noqa: E402
from lib.straggler.panels import chapter_panels  # noqa: E402
from lib.straggler.simulate import FailureGaps, five_ways, sampled_step_efficiency, simulate_run  # noqa: E402


def best_of(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def clear_caches() -> None:
    straggler.expected_max_s.cache_clear()
    straggler.harmonic.cache_clear()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--check", action="store_true", help="exit 1 when a budget is missed")
    args = p.parse_args(argv)
    mtbf = straggler.FailureModel().cluster_mtbf_min(16_384)
    yd = straggler.young_daly_min(mtbf)

    def two_weeks(tau):
        return lambda: simulate_run(tau, mtbf, FailureGaps(np.random.default_rng(0)), 14 * 1440)

    def frames():
        clear_caches()
        chapter_figures()

    def panels():
        clear_caches()
        chapter_panels()

    rows = [  # (what, seconds, budget or None)
        ("two weeks, 16,384 GPUs, every YD/6 = 3.2 min (one run)", best_of(two_weeks(yd / 6), 20), 0.5),
        ("two weeks, 16,384 GPUs, Young-Daly 19.3 min (one run)", best_of(two_weeks(yd), 20), 0.5),
        ("five ways to run two weeks (5 runs + exact values)", best_of(lambda: (clear_caches(), five_ways()), 5),
         0.5),
        ("exact step efficiency, 16,384 + 328 GPUs (cold)",
         best_of(lambda: (clear_caches(), straggler.step_efficiency(16_384, 328)), 5), None),
        ("200,000 drawn steps at 16,384 GPUs",
         best_of(lambda: sampled_step_efficiency(16_384, 0, 200_000, np.random.default_rng(0)), 3), None),
        ("all slider frames of the four single-slider figures", best_of(frames, 2), 10.0),
        ("the chapter's three linked figures (every state)", best_of(panels, 2), 10.0),
    ]
    print(f"bench_straggler on {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs visible, "
          f"OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}, Python {platform.python_version()}, "
          f"numpy {np.__version__}")
    print(f"{'what':<58} {'seconds':>9} {'budget':>8}  ok")
    missed = False
    for what, s, budget in rows:
        ok = budget is None or s <= budget
        missed |= not ok
        print(f"{what:<58} {s:>9.4f} {('-' if budget is None else f'{budget:g}'):>8}  {'yes' if ok else 'NO'}")
    return 1 if (args.check and missed) else 0


if __name__ == "__main__":
    raise SystemExit(main())
