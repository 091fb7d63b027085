"""Fit the two efficiency constants of each GPU type (lib/galvatron/search/efficiency.py) to the published
runs without pipeline parallelism, and report the error on fitted and held-out runs apart.

    python benchmarks/fit_efficiency.py            # print the fit and the errors
    python benchmarks/fit_efficiency.py --write    # also store the constants in data/hardware/gpus/, and the
                                                   # held-out error they leave (plausibility.py)
    python benchmarks/fit_efficiency.py --fill one   # what-if: null fields filled with the defaults
    python benchmarks/fit_efficiency.py --with wave_quantization [--write]
        # the constants with a candidate mechanism on (rules.CANDIDATE_FIELDS), stored apart
        # (``efficiency_wave_quantized``), used only with that switch

Why these runs: with pp = 1 a run's time is compute, tensor-parallel messages and the data-parallel tail, so
its error says most about compute efficiency; every pipelined run is held out to judge the schedules, stages
and network, except the two Llama 3 runs, on which a stack field was chosen (``data/stacks/meta-llama3.json``,
``chosen_on``): they are reported apart, as "chosen". Objective: mean squared log error of tokens/s/GPU under ``practice``
(lib/galvatron/validate.py: fit_efficiency). tests/galvatron/test_validate.py checks the stored constants
are this fit's.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lib.atomic import write_text  # noqa: E402
from lib.galvatron.search.efficiency import GPU_DIR, at_edge, load_gpu  # noqa: E402
from lib.galvatron.published import load_runs  # noqa: E402
from lib.galvatron.search.rules import PRACTICE  # noqa: E402
from lib.galvatron.stacks import chosen_on  # noqa: E402
from lib.galvatron.validate import MICRO_BATCH_FILLS, estimate_run, fit_efficiency, with_efficiency  # noqa: E402

RUNS = Path(__file__).resolve().parents[1] / "data" / "published_runs" / "calibration.json"


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", action="store_true", help="store the constants in data/hardware/gpus/")
    ap.add_argument("--fill", choices=MICRO_BATCH_FILLS, default="search",
                    help="how null fields are filled (validate.MICRO_BATCH_FILLS); only 'search' may --write")
    ap.add_argument("--with", dest="with_", choices=("wave_quantization",), default=None,
                    help="fit with a candidate mechanism on (stored apart from the plain constants)")
    a = ap.parse_args(argv)
    rules = PRACTICE if a.with_ is None else PRACTICE.with_(name=f"practice+{a.with_}", **{a.with_: True})
    key = "efficiency" if a.with_ is None else "efficiency_wave_quantized"
    if a.write and a.fill != "search":
        ap.error("--write stores the constants of validate's own fill only (--fill search)")
    runs = load_runs(str(RUNS)).runs
    every = {"fitted": [], "chosen": [], "held out": []}
    chose = chosen_on()                   # runs a stack field was chosen on: reported apart
    for name in ("a100-sxm-80gb", "h100-sxm-80gb"):
        p, k, rms, names = fit_efficiency(runs, name, a.fill, rules)
        edge = at_edge(p, k)
        print(f"{name}: peak_fraction {p}, knee {k}, RMS log error {rms:.3f} on {names}"
              + (f"  ON THE FIT'S EDGE: {edge}" if edge else ""))
        g = with_efficiency(load_gpu(name), p, k, quantized=a.with_ is not None)
        for r in runs:
            if r.cluster.gpu != name:
                continue
            e = estimate_run(r, rules, g, a.fill)
            tag = "fitted" if r.name in names else "chosen" if r.name in chose else "held out"
            every[tag].append(abs(e["error"]))
            print(f"  {tag:<9}{r.name:26s} error {e['error']:+.1%}  fits {e['fits']}  peak {e['peak_gb']:.1f} GB")
        if a.write:
            path = GPU_DIR / f"{name}.json"
            d = json.loads(path.read_text())
            d[key] = {"peak_fraction": p, "knee": k, "fitted_to": names}
            write_text(str(path), json.dumps(d, indent=2) + "\n")
    if a.write and a.with_ is None:
        # the model's stated uncertainty per GPU type (lib/galvatron/plausibility.py), under the stored constants
        from lib.galvatron.validate import heldout_error

        for name in ("a100-sxm-80gb", "h100-sxm-80gb"):
            med, names = heldout_error(name)
            path = GPU_DIR / f"{name}.json"
            d = json.loads(path.read_text())
            d["heldout_error"] = {"median_abs": med, "runs": names}
            d["sources"]["heldout_error"] = ("computed by `python benchmarks/fit_efficiency.py --write` "
                                             "(lib/galvatron/plausibility.py): the median |error| under practice "
                                             "of the runs listed, none of them fitted or chosen on")
            write_text(str(path), json.dumps(d, indent=2) + "\n")
            print(f"{name}: stated uncertainty (held-out median |error|) {med:.1%} over {len(names)} runs")
    for tag, errs in every.items():
        if not errs:
            continue
        print(f"{tag}: {len(errs)} runs, median |error| {np.median(errs):.1%}, largest {max(errs):.1%}")


if __name__ == "__main__":
    main()
