"""Speed of the planner under ``practice`` (lib/galvatron/search/practice_search.py) and of ``validate``
(lib/galvatron/validate.py), printed as a table.

Rows: Llama 3 405B on 16,384 H100 (8K tokens, 2,048 sequences: the published run's job) searched under
``practice`` (target <= 60 s on one core); ``plan`` for the same job, its top 5 layouts with their flags
(``job_plan.py``, target <= 10 s); ``validate`` over the whole calibration set with every run's search
(target <= 180 s); and ``validate`` without searches on 2,000 runs (the published runs of
``data/published_runs/`` repeated under new names, grouped as sweeps; target <= 60 s), unstated fields filled
by search as ``validate`` fills them. Times are CPU seconds of this process (``time.process_time``) and wall
seconds; on a shared machine wall time includes other processes' turns.

Usage: taskset -c 0 python benchmarks/bench_practice.py
"""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from lib.galvatron.search.practice_search import search_practice  # noqa: E402
from lib.galvatron.published import load_runs, to_job  # noqa: E402
from lib.galvatron.validate import validate_runs  # noqa: E402
from lib.galvatron.job_plan import plan  # noqa: E402

RUNS_DIR = os.path.join(os.path.dirname(__file__), "..", "data", "published_runs")

CAL = os.path.join(os.path.dirname(__file__), "..", "data", "published_runs", "calibration.json")
TARGETS_S = {"search": 60.0, "validate": 180.0, "plan": 10.0, "validate_2000": 60.0}


def many_runs(n: int = 2000) -> list:
    """``n`` runs: every published run of data/published_runs/, renamed ``bench-<k>#<name>`` round after round."""
    base = []
    for f in sorted(os.listdir(RUNS_DIR)):
        if f.endswith(".json"):
            base += load_runs(os.path.join(RUNS_DIR, f)).runs
    return [("bench", base[i % len(base)].model_copy(update={"name": f"bench-{i // len(base)}#{i}"}))
            for i in range(n)]


def timed(fn):
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.process_time() - c0, time.perf_counter() - w0


def main() -> int:
    runs = load_runs(CAL).runs
    llama = next(r for r in runs if r.name == "llama3-405b-16384-8192")
    (best, est, n), cpu1, wall1 = timed(lambda: search_practice(to_job(llama)))
    rep, cpu2, wall2 = timed(lambda: validate_runs([(CAL, r) for r in runs], progress=False))
    planned, cpu3, wall3 = timed(lambda: plan(to_job(llama), top=5))
    many = many_runs()
    rep2, cpu4, wall4 = timed(lambda: validate_runs(many, search=False, progress=False))
    print(f"{'what':<48}{'layouts':>9}{'CPU s':>8}{'wall s':>8}{'target s':>10}")
    print(f"{'search: Llama 3 405B, 16,384 H100 (practice)':<48}{n:>9}{cpu1:>8.2f}{wall1:>8.2f}"
          f"{TARGETS_S['search']:>10.0f}")
    print(f"{'validate: ' + str(len(runs)) + ' runs with their searches':<48}{'':>9}{cpu2:>8.2f}{wall2:>8.2f}"
          f"{TARGETS_S['validate']:>10.0f}")
    print(f"{'plan: Llama 3 405B, 16,384 H100, top 5 and flags':<48}{planned['priced']:>9}{cpu3:>8.2f}"
          f"{wall3:>8.2f}{TARGETS_S['plan']:>10.0f}")
    print(f"{'validate: ' + str(len(many)) + ' runs, no searches':<48}{'':>9}{cpu4:>8.2f}{wall4:>8.2f}"
          f"{TARGETS_S['validate_2000']:>10.0f}")
    print(f"pick for Llama 3 405B: {best.label()}, {est['tokens_per_s_per_gpu']:.1f} tokens/s/GPU (estimated); "
          f"validate: median |error| {rep['median_abs_error']:.1%}, largest {rep['max_abs_error']:.1%}")
    ok = (cpu1 <= TARGETS_S["search"] and cpu2 <= TARGETS_S["validate"] and cpu3 <= TARGETS_S["plan"]
          and cpu4 <= TARGETS_S["validate_2000"])
    print("targets met" if ok else "TARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
