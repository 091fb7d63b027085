"""Fit the two efficiency constants of each GPU type (lib/galvatron/search/efficiency.py) to the published
runs without pipeline parallelism, and report the error on fitted and held-out runs apart.

    python benchmarks/fit_efficiency.py            # print the fit and the errors
    python benchmarks/fit_efficiency.py --write    # also store the constants in data/hardware/gpus/

Why these runs: with pp = 1 a run's time is compute, tensor-parallel messages and the data-parallel tail, so
its error says most about compute efficiency; every pipelined run (and the whole of Llama 3) is held out to
judge the schedules, stages and network. Objective: mean squared log error of tokens/s/GPU (``practice``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lib.atomic import write_text  # noqa: E402
from lib.galvatron.search.efficiency import GPU_DIR, fit, load_gpu  # noqa: E402
from lib.galvatron.search.published import load_runs  # noqa: E402
from lib.galvatron.validate import estimate_run, with_efficiency  # noqa: E402

RUNS = Path(__file__).resolve().parents[1] / "data" / "published_runs" / "calibration.json"


def fitted_runs(runs, gpu_name):
    return [r for r in runs if r.cluster.gpu == gpu_name and r.config.pp == 1]


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args(argv)
    runs = load_runs(str(RUNS)).runs
    for name in ("a100-sxm-80gb", "h100-sxm-80gb"):
        gpu = load_gpu(name)
        fit_set = fitted_runs(runs, name)

        def objective(p, k, fit_set=fit_set, gpu=gpu):
            g = with_efficiency(gpu, p, k)
            return float(np.mean([math.log1p(estimate_run(r, "practice", g)["error"]) ** 2 for r in fit_set]))

        p, k, v = fit(objective)
        print(f"{name}: peak_fraction {p}, knee {k}, RMS log error {math.sqrt(v):.3f} on "
              f"{[r.name for r in fit_set]}")
        g = with_efficiency(gpu, p, k)
        for r in runs:
            if r.cluster.gpu != name:
                continue
            e = estimate_run(r, "practice", g)
            tag = "fitted " if r in fit_set else "held out"
            print(f"  {tag} {r.name:26s} error {e['error']:+.1%} fits {e['fits']}")
        if a.write:
            path = GPU_DIR / f"{name}.json"
            d = json.loads(path.read_text())
            d["efficiency"] = {"peak_fraction": p, "knee": k, "fitted_to": [r.name for r in fit_set]}
            write_text(str(path), json.dumps(d, indent=2) + "\n")


if __name__ == "__main__":
    main()
