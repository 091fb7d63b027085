"""What the chapter "From the paper to practice" computes: the ablation of the twelve mechanisms of
``practice`` on published runs, fitted and held-out runs apart, the step split by kind (:func:`breakdown`),
the unstated micro-batch's what-if (:func:`fill_what_if`) and the planner's pick against the published
configuration.

Everything here is an *estimate* of the cost model (``search/cost.py``'s ``step_estimate``) on the GPU
constants of ``data/hardware/gpus/``, judged against figures *quoted* from the sources named in each run's
``quote`` (``data/published_runs/``). Nothing is cached on disk; the ablation prices the published
configurations only (fast), and only :func:`picks` runs the practice search.

- :func:`ablation_rules`: ``vldb2023``, then each mechanism of ``rules.MECHANISMS`` switched on in turn,
  cumulatively (the order ``practice`` is built in); the last step prices every run as ``practice`` does.
- :func:`ablation`: every run under every step: estimates, errors, fits.
- :func:`leave_one_out`: ``practice`` with one mechanism switched off at a time.
- :func:`fitted_runs`: the runs the efficiency constants were fitted to (``fitted_to`` of each GPU's file).
- :func:`picks` and :func:`why_table`: the practice search's pick for a run, and the terms of the step where
  it and the published configuration differ.

Used in: book/galvatron/05_from_paper_to_practice.ipynb, lib/galvatron/exercises_practice.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lib.book import signed_pct

from .published import load_runs, to_config, to_job
from .search.step_kinds import breakdown, bubble_share  # noqa: F401  (chapter 9 reads them as pr.*)
from .search.efficiency import GPU_DIR
from .search.practice_search import search_practice
from .search.report import Table
from .search.rules import MECHANISMS, PRACTICE, VLDB2023, get_rules
from .validate import estimate_run, fit_efficiency, run_rules, with_efficiency

CALIBRATION = Path(__file__).resolve().parents[2] / "data" / "published_runs" / "calibration.json"
#: The three sources of the calibration set, by the prefix of a run's name (for labels).
SOURCES = {"sc21": "Narayanan et al. SC'21, Table 1", "mcore": "Megatron-LM README, H100 table",
           "llama3": "Llama 3 paper, Table 4"}


def calibration_runs(path=None) -> list:
    """The runs of ``data/published_runs/calibration.json`` (or ``path``), checked (``published.load_runs``)."""
    return list(load_runs(str(path or CALIBRATION)).runs)


def source_of(run) -> str:
    """The short name of a run's source (the first word of its name), or its ``quote``."""
    return SOURCES.get(run.name.split("-")[0], run.quote)


def fitted_runs(gpu_dir=None) -> set:
    """Names of the runs the compute-efficiency constants were fitted to: ``fitted_to`` of every
    ``data/hardware/gpus/*.json``. Every other run is held out."""
    out = set()
    for p in sorted(Path(gpu_dir or GPU_DIR).glob("*.json")):
        out |= set(json.loads(p.read_text())["efficiency"]["fitted_to"])
    return out


def ablation_rules(base=VLDB2023) -> list:
    """[(step name, CostRules)]: ``base``, then every mechanism of ``rules.MECHANISMS`` switched on in turn,
    each step keeping the ones before."""
    rules = get_rules(base)
    steps = [(rules.name, rules)]
    for name, fields, _ in MECHANISMS:
        rules = rules.with_(name=f"+ {name}", **{f: True for f in fields})
        steps.append((f"+ {name}", rules))
    return steps


@dataclass(frozen=True)
class Ablation:
    """Every run under every step: ``estimate`` and ``error`` (estimate / published - 1; NaN where the step
    cannot price the configuration, e.g. context parallelism before its switch) and ``fits``, each of shape
    (steps, runs)."""

    steps: tuple
    runs: tuple
    published: np.ndarray
    estimate: np.ndarray
    fits: np.ndarray
    peak_gb: np.ndarray

    @property
    def error(self) -> np.ndarray:
        return self.estimate / self.published - 1.0

    def summary(self, mask=None) -> dict:
        """Per step: median and largest |error| and the count of runs that fit, over the runs in ``mask``."""
        mask = np.ones(len(self.runs), bool) if mask is None else np.asarray(mask, bool)
        e = np.abs(self.error[:, mask])
        return {"median": np.nanmedian(e, axis=1), "max": np.nanmax(e, axis=1),
                "fits": self.fits[:, mask].sum(axis=1), "n": int(mask.sum())}


def estimate(run, rules) -> dict | None:
    """The run's published configuration priced under ``rules`` as ``validate`` prices it (``estimate_run``),
    or None where the rules cannot price it (a ValueError, e.g. cp > 1 without context parallelism)."""
    try:
        return estimate_run(run, rules)
    except ValueError:
        return None


def ablation(runs, steps=None) -> Ablation:
    """Every run's published configuration priced under every step of ``steps`` (default
    :func:`ablation_rules`)."""
    steps = steps or ablation_rules()
    est = np.full((len(steps), len(runs)), np.nan)
    fits = np.zeros((len(steps), len(runs)), bool)
    peak = np.full((len(steps), len(runs)), np.nan)
    for i, (_, rules) in enumerate(steps):
        for j, run in enumerate(runs):
            e = estimate(run, rules)
            if e is not None:
                est[i, j], fits[i, j], peak[i, j] = e["tokens_per_s_per_gpu"], e["fits"], e["peak_gb"]
    pub = np.array([r.measured.tokens_per_s_per_gpu for r in runs])
    return Ablation(tuple(n for n, _ in steps), tuple(r.name for r in runs), pub, est, fits, peak)


def _pct(x: float) -> str:
    return "-" if not np.isfinite(x) else f"{100 * x:.1f}%"


def ablation_table(ab: Ablation, fitted: set) -> Table:
    """One row per step: median and largest |error| on all runs, the median on fitted and on held-out runs
    apart, and how many published configurations fit in memory."""
    is_fit = np.array([n in fitted for n in ab.runs])
    a, f, h = ab.summary(), ab.summary(is_fit), ab.summary(~is_fit)
    rows = [[name, _pct(a["median"][i]), _pct(a["max"][i]), _pct(f["median"][i]), _pct(h["median"][i]),
             f"{a['fits'][i]} of {a['n']}"] for i, name in enumerate(ab.steps)]
    return Table(["cost rules (cumulative)", "median |error|", "largest |error|",
                  f"median, {f['n']} fitted", f"median, {h['n']} held out", "fit in memory"], rows,
                 caption="estimated tokens/s/GPU of each published configuration against the published "
                         "figure (quoted); error = estimate / published - 1")


def leave_one_out(runs) -> list:
    """[(mechanism, median |error|, largest |error|, runs that fit)] for ``practice`` with one mechanism
    switched off at a time, and ``practice`` itself first (mechanism ``None``)."""
    out = []
    for name, fields in [(None, ())] + [(n, fs) for n, fs, _ in MECHANISMS]:
        rules = PRACTICE.with_(name=f"- {name}", **{f: False for f in fields}) if name else PRACTICE
        ab = ablation(runs, [(rules.name, rules)])
        s = ab.summary()
        out.append((name, float(s["median"][0]), float(s["max"][0]), int(s["fits"][0])))
    return out


def leave_one_out_table(rows) -> Table:
    base = rows[0]
    body = [["none (practice)", _pct(base[1]), _pct(base[2]), str(base[3]), "-"]]
    body += [[n, _pct(m), _pct(x), str(k), f"{100 * (m - base[1]):+.1f} pts"] for n, m, x, k in rows[1:]]
    return Table(["switched off", "median |error|", "largest |error|", "fit", "median vs practice"], body,
                 caption="estimated against published tokens/s/GPU (quoted), all calibration runs")


def most_needed(rows) -> str:
    """The mechanism whose removal from ``practice`` raises the median |error| the most."""
    return max(rows[1:], key=lambda r: r[1])[0]


def run_table(runs, ab: Ablation, fitted: set, step: int = -1) -> Table:
    """Run by run under one step of the ablation (default: the last, i.e. ``practice``): published (quoted),
    estimate, error, fits, peak memory, and whether the run was fitted, chose a stack's rule
    (``stacks.chosen_on``) or is held out."""
    from .stacks import chosen_on

    chose, rows = chosen_on(), []
    for j, run in enumerate(runs):
        e, err = ab.estimate[step, j], ab.error[step, j]
        rows.append([run.name, to_config(run).label(), f"{ab.published[j]:,.1f}",
                     "-" if not np.isfinite(e) else f"{e:,.1f}", "-" if not np.isfinite(err) else signed_pct(err),
                     "yes" if ab.fits[step, j] else "NO", f"{ab.peak_gb[step, j]:.1f}",
                     "fitted" if run.name in fitted else "chose a rule" if run.name in chose else "held out"])
    return Table(["run", "published configuration", "published (quoted)", "estimate", "error", "fits",
                  "peak GB", "status"], rows,
                 caption=f"tokens/s/GPU; estimates under {ab.steps[step]}")


def picks(runs, names, rules=PRACTICE) -> dict:
    """For each run named in ``names``: the practice search's pick under the run's GPU count and global batch,
    with both estimates: {name: {"published": cfg, "pick": cfg or None, "est_published", "est_pick",
    "priced"}}."""
    by = {r.name: r for r in runs}
    out = {}
    for n in names:
        if n not in by:
            raise ValueError(f"picks: no run {n!r}; the runs are {sorted(by)}")
        run = by[n]
        best, best_est, count = search_practice(to_job(run), run_rules(run, rules))   # the run's own stack
        out[n] = {"published": to_config(run), "pick": best, "est_published": estimate_run(run, rules),
                  "est_pick": best_est, "priced": count, "quoted": run.measured.tokens_per_s_per_gpu}
    return out


def picks_table(found: dict) -> Table:
    rows = []
    for n, p in found.items():
        pick = "-" if p["pick"] is None else p["pick"].label()
        gain = (p["est_pick"]["tokens_per_s_per_gpu"] / p["est_published"]["tokens_per_s_per_gpu"] - 1
                if p["pick"] is not None else float("nan"))
        rows.append([n, f"{p['quoted']:,.1f}", f"{p['est_published']['tokens_per_s_per_gpu']:,.1f}", pick,
                     "-" if p["pick"] is None else f"{p['est_pick']['tokens_per_s_per_gpu']:,.1f}",
                     _pct(gain) if np.isfinite(gain) else "-"])
    return Table(["run", "published (quoted)", "its estimate", "planner's pick", "pick's estimate",
                  "pick vs published config"], rows,
                 caption="tokens/s/GPU; estimates under practice; the planner sees the run's GPUs, global "
                         "batch and TP inside a node")


#: (label, how to read it from a step_estimate dict) for :func:`why_table`.
TERMS = (
    ("micro-batches per step", lambda e: f"{e['micro_batches']}"),
    ("compute, one layer fwd+bwd+recompute (ms)", lambda e: f"{1e3 * (e['fwd_s'] + e['bwd_s'] + e['recompute_s']):.2f}"),
    ("TP messages, one layer (ms)", lambda e: f"{1e3 * e['tp_s']:.2f}"),
    ("pipeline: compute and bubble (s)", lambda e: f"{e['pipeline_s']:.2f}"),
    ("pipeline sends, exposed (s)", lambda e: f"{e['p2p_s']:.3f}"),
    ("DP / ZeRO messages, exposed (s)", lambda e: f"{e['dp_s']:.3f}"),
    ("step (s)", lambda e: f"{e['step_s']:.2f}"),
    ("compute efficiency", lambda e: f"{e['efficiency']:.3f}"),
    ("peak memory (GB)", lambda e: f"{e['peak_gb']:.1f}"),
    ("tokens/s/GPU", lambda e: f"{e['tokens_per_s_per_gpu']:,.1f}"),
)


def why_table(p: dict) -> Table:
    """The terms of one step for the published configuration and the pick, side by side (estimated)."""
    a, b = p["est_published"], p["est_pick"]
    rows = [[label, f(a), f(b)] for label, f in TERMS]
    return Table(["term (estimated, practice)", p["published"].label(), p["pick"].label()], rows)


def breakdown_table(runs, rules=PRACTICE) -> Table:
    """For each run, its published configuration's step (estimated under ``rules`` as they apply to it)
    split by :func:`breakdown`, in shares of the step, with the error against the published figure."""
    kinds = ("gemm", "attention", "recompute", "tp", "head", "bubble", "dp")
    rows = []
    for r in runs:
        e = estimate_run(r, rules)
        b = breakdown(e)
        rows.append([r.name, f"{e['micro_batches']}", f"{e['step_s']:.2f}"]
                    + [f"{b[k] / e['step_s']:.0%}" for k in kinds] + [signed_pct(e['error'])])
    return Table(["run", "m", "step (s)", "GEMMs", "attn.", "recomp.", "TP", "head", "bubble", "DP/ZeRO",
                  "error"], rows,
                 caption="estimated (practice) shares of one step of the published configuration, on its "
                         "fullest pipeline stage (m: micro-batches per step; TP, DP/ZeRO: their messages "
                         "left exposed); error against the published tokens/s/GPU (quoted)")


def fill_what_if(runs, held) -> dict:
    """Chapter 9's what-if on the unstated fields: what the errors would be with the old default fill
    (``fill="one"``: micro-batch 1, plain 1F1B, the other documented defaults) and the efficiency constants
    refitted (to the same runs, ``fitted_to``) under it, beside ``validate``'s own fill (``"search"``: each
    null field searched for the fastest setting that fits) with the stored constants (estimated):
    {"constants": {gpu: (peak_fraction, knee)} (the refit under "one"), "rows": [(name, gpu, error under
    "one", error under "search", micro-batch "search" filled)], "summary": {"cal"/"held": {"one"/"search":
    (median, largest)}}}."""
    from .search.efficiency import load_gpu

    gpus = {}
    for g in sorted({r.cluster.gpu for r in runs}):
        p, k, _, _ = fit_efficiency(runs, g, fill="one")
        gpus[g] = with_efficiency(load_gpu(g), p, k)
    rows, summary = [], {}
    for tag, group in (("cal", runs), ("held", held)):
        errs = {"one": [], "search": []}
        for r in group:
            a = estimate_run(r, PRACTICE, gpus[r.cluster.gpu], fill="one")
            b = estimate_run(r, PRACTICE)
            rows.append((r.name, r.cluster.gpu, a["error"], b["error"], b["micro_batch"]))
            errs["one"].append(abs(a["error"]))
            errs["search"].append(abs(b["error"]))
        summary[tag] = {k: (float(np.median(v)), float(np.max(v))) for k, v in errs.items()}
    return {"constants": {g: (s.peak_fraction, s.knee) for g, s in gpus.items()}, "rows": rows,
            "summary": summary}


def fill_what_if_table(w: dict, names) -> Table:
    """The rows of :func:`fill_what_if` for the runs ``names``, in that order."""
    by = {r[0]: r for r in w["rows"]}
    rows = [[n, f"{by[n][2]:+.1%}", f"{by[n][4]}", f"{by[n][3]:+.1%}"] for n in names]
    return Table(["run", "error, defaults (refit)", "micro-batch filled", "error, filled by search"],
                 rows, caption="estimated (practice) against the published tokens/s/GPU (quoted); the left "
                               "column fills unstated fields with the documented defaults and refits the "
                               "efficiency constants to the same runs under that fill")
