"""The production comparison (issue 39): its speed, and the errors by kind of both models on the calibration set
and on the held-out set, printed apart.

Budget: both data files under both models (the chapter's section) in at most 2 s on one core. Run:
``python benchmarks/bench_production.py [--check]`` (``--check`` exits 1 when the budget is missed).
Used in: book/stragglers/01_the_one_slow_gpu (section "The page against production clusters").
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core, as the budget says
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import time  # noqa: E402

from lib.straggler import calibration as cal  # noqa: E402
from lib.straggler import production_report as prod  # noqa: E402

BUDGET_S = 2.0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="exit 1 when the budget is missed")
    args = p.parse_args(argv)
    for fn in (cal.size_law, cal.straggler_fit, cal.cause_counts):
        fn.cache_clear()  # time the fits too
    t = time.perf_counter()
    cmp = prod.compare()
    took = time.perf_counter() - t
    print(f"both files, both models: {took:.3f} s (budget {BUDGET_S:g} s)\n")
    print(prod.errors_table(cmp, ""))
    return 1 if args.check and took > BUDGET_S else 0


if __name__ == "__main__":
    raise SystemExit(main())
