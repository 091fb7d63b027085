"""``python -m lib.galvatron validate --runs FILE... [--rules practice] [--json]``: the cost model judged
against published training runs (``data/published_runs/``, schema in ``published.py``).

For each run: the published configuration's estimate against the published tokens/s/GPU and the error
(estimate / published - 1), whether that configuration fits in memory and its peak per GPU (the fullest
pipeline stage), and the planner's own pick (``search/practice_search.py``) for the same GPU count, global
batch and TP-inside-a-node rule, with its estimate. It ends with the median and the largest |error|. A bad
file is one line naming the file, the run and the field (exit 2, ``lib.cli_errors``).

``--json`` prints ``{"runs": [{"name", "published", "estimate", "error", "fits", "peak_gb",
"published_peak_gb", "memory_error", "pick", "pick_estimate", "config", "filled"}, ...], "median_abs_error",
"max_abs_error", "median_memory_error", "memory_runs", "out_of_memory", "sweeps", "median_spearman",
"median_top1_regret"}``
(``pick`` is a label, null when nothing fits; ``memory_error``: the estimated peak over the measured one - 1,
for a run whose source measured it (``measured.peak_memory_gb``), else null; ``sweeps``: runs named
``sweep#layout`` grouped, each sweep's rank correlation and top-1 regret, ``ranking.py``; ``out_of_memory``:
the layouts a file's ``out_of_memory`` list says ran out of memory, each ``{"name", "config", "peak_gb",
"fits"}``: one estimated to fit is a miss of the memory model).
With the picks, each row has ``lead`` (the pick's estimate over the published configuration's, with its range
under the model's stated uncertainty, ``plausibility.lead_range``: {"lead", "low", "high", "real"}) and
``plausibility`` (the pick's MFU against the best published for its GPU type and stack,
``plausibility.mfu_check``); both null without the picks.
``--with NAME`` switches a candidate mechanism on (``rules.CANDIDATE_FIELDS``: off in every preset).
``--no-search`` skips the picks (``pick`` and ``pick_estimate`` null). Null config fields of a run are filled
by searching each alone for the fastest setting that fits (``fills.py``; ``filled`` lists them as
``field=value (searched)``); other null fields get the documented defaults of ``published.py``.
Used in: benchmarks/bench_practice.py, benchmarks/fit_efficiency.py, tests/galvatron/test_validate.py.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace

import numpy as np
from tqdm.auto import tqdm

from lib.cli_errors import OneLineParser, UserError

from .search.cost import step_estimate
from .search.layout import LayoutError
from .search.practice_search import MICRO_BATCHES, search_practice
from .published import filled, load_runs, out_of_memory_runs, to_config, to_job
from .fills import SEARCHED, fill_by_search
from .plausibility import best_published_mfu, lead_range, mfu_check, stated_error
from .ranking import sweeps
from .stacks import DEFAULT_STACK, stack_rules
from .search.rules import ALL_PRESETS, CANDIDATE_FIELDS, FABRIC_READINGS, STACK_FIELDS, get_rules


def run_rules(run, rules="practice"):
    """``rules`` as they apply to ``run``: its software stack's fields (``rules.STACK_FIELDS``) from its
    stack (``data/stacks/``, ``stacks.stack_rules``; null: Megatron-LM) and its source. ``tp_comm_overlap`` is on where the run states it (``config.tp_comm_overlap``, Megatron-Core's
    ``--tp-comm-overlap``), off where it does not; it acts only with sequence parallelism, so under the
    paper's presets it changes nothing."""
    rules = stack_rules(get_rules(rules), run.stack)
    stated = bool(run.config.tp_comm_overlap)
    if rules.tp_comm_overlap != stated:
        rules = replace(rules, tp_comm_overlap=stated)
    return rules


#: How a micro-batch the source does not state (null) is filled: ``"one"``, 1 sequence (the documented
#: default of ``published.py``); ``"planner"``, the planner's own choice, the fastest of 1, 2, 4 and 8 that
#: divides the per-rank batch, leaves at least ``pp`` micro-batches and fits. A what-if for chapter 9's
#: diagnosis of the H100 fit (Megatron-LM has no default ``--micro-batch-size``: a run states one).
MICRO_BATCH_FILLS = ("one", "planner", "search")
#: ``"search"`` (the default of ``validate``): every null config field filled by searching it alone for the
#: fastest setting that fits (``fills.py``); ``"one"`` and ``"planner"`` fill the others with the defaults.


def estimate_run(run, rules="practice", gpu=None, fill: str = "search", without: tuple = ()) -> dict:
    """The published configuration of ``run`` priced under ``rules`` as they apply to it (``run_rules``;
    ``gpu``: a GpuSpec to use instead of the stored one, e.g. while fitting; ``fill``: see
    ``MICRO_BATCH_FILLS``; ``without``: stack fields switched off after the run's stack set them, a what-if of
    what each adds): the step estimate plus ``published``, ``error`` and ``micro_batch``."""
    if fill not in MICRO_BATCH_FILLS:
        raise ValueError(f"fill must be one of {MICRO_BATCH_FILLS}; got {fill!r}")
    bad = [f for f in without if f not in STACK_FIELDS]
    if bad:
        raise ValueError(f"without: {bad[0]!r} is not a stack field; allowed: {', '.join(STACK_FIELDS)}")
    job, cfg, rules = to_job(run, gpu=gpu), to_config(run), run_rules(run, rules)
    if without:
        rules = replace(rules, **{f: False for f in without})
    if fill == "search":
        nulls = [f for f in SEARCHED if getattr(run.config, f) is None]
        cfg, est, values = fill_by_search(job, cfg, nulls, rules)
        pub = run.measured.tokens_per_s_per_gpu
        return {**est, "published": pub, "error": est["tokens_per_s_per_gpu"] / pub - 1.0,
                "micro_batch": cfg.micro_batch, "config": cfg, "searched": values}
    est = step_estimate(job, cfg, rules)
    if fill == "planner" and run.config.micro_batch is None:
        local = run.global_batch // cfg.dp          # sequences per replica, as the planner counts them
        for mb in MICRO_BATCHES[1:]:
            if local % mb or local // mb < cfg.pp:
                continue
            c = replace(cfg, micro_batch=mb)
            e = step_estimate(job, c, rules)
            if e["fits"] and e["tokens_per_s_per_gpu"] > est["tokens_per_s_per_gpu"]:
                est, cfg = e, c
    pub = run.measured.tokens_per_s_per_gpu
    return {**est, "published": pub, "error": est["tokens_per_s_per_gpu"] / pub - 1.0,
            "micro_batch": cfg.micro_batch, "config": cfg, "searched": {}}


def validate_runs(runs, rules="practice", search: bool = True, progress: bool = True,
                  out_of_memory=()) -> dict:
    """The report of ``validate`` for a list of ``(file, Run)``: the JSON form described in the docstring.
    ``out_of_memory``: ``(file, Run)`` of layouts their source reports out of memory (``published.
    out_of_memory_runs``), each priced for its peak: report key ``out_of_memory``."""
    rules = get_rules(rules)
    rows = []
    for path, run in tqdm(runs, desc="validate", unit="run", disable=not progress, file=sys.stderr):
        try:
            est = estimate_run(run, rules)
        except LayoutError as e:  # the run's configuration; any other ValueError is a bug (exit 1)
            raise UserError(f"{path}: run {run.name!r}: field config: {e}") from None
        searched = est.get("searched", {})
        row = {"name": run.name, "published": run.measured.tokens_per_s_per_gpu,
               "estimate": round(est["tokens_per_s_per_gpu"], 3), "error": round(est["error"], 6),
               "fits": est["fits"], "peak_gb": round(est["peak_gb"], 2),
               "published_peak_gb": run.measured.peak_memory_gb, "memory_error": None,
               "pick": None, "pick_estimate": None,
               "config": est["config"].label(),
               "filled": [f"{k}={v} (searched)" for k, v in searched.items()]
               + [f for f in filled(run) if f.split("=")[0] not in searched], "lead": None,
               "plausibility": None}
        if run.measured.peak_memory_gb:
            row["memory_error"] = round(est["peak_gb"] / run.measured.peak_memory_gb - 1.0, 6)
        if search:
            best, best_est, _ = search_practice(to_job(run), run_rules(run, rules))   # the run's own stack
            if best is not None:
                row["pick"] = best.label()
                row["pick_estimate"] = round(best_est["tokens_per_s_per_gpu"], 3)
                err = stated_error(run.cluster.gpu)
                row["lead"] = lead_range(best_est["tokens_per_s_per_gpu"], est["tokens_per_s_per_gpu"], err)
                mfu = best_est["tflops_per_gpu"] * 1e12 / to_job(run).gpu.flops(run.precision)
                best_pub = best_published_mfu(run.cluster.gpu, run.stack or DEFAULT_STACK)
                row["plausibility"] = mfu_check(round(mfu, 4), best_pub, err)
        rows.append(row)
    # 6 decimals, so the text's one-decimal percentages round once, as the chapters' tables do (4 decimals
    # printed MPT-13B's +49.654% as +49.6% beside chapter 9's +49.7%)
    errs = np.abs([r["error"] for r in rows])
    mem = [r["memory_error"] for r in rows if r["memory_error"] is not None]
    oom = []
    for path, run in out_of_memory:
        est = step_estimate(to_job(run), to_config(run), run_rules(run, rules))
        oom.append({"name": run.name, "config": to_config(run).label(), "peak_gb": round(est["peak_gb"], 2),
                    "fits": est["fits"]})
    return {"rules": rules.name, "runs": rows, "median_abs_error": round(float(np.median(errs)), 6),
            "max_abs_error": round(float(errs.max()), 6),
            "median_memory_error": round(float(np.median(mem)), 6) if mem else None,
            "memory_runs": len(mem), "out_of_memory": oom, **sweeps(rows)}


def _parser() -> OneLineParser:
    ap = OneLineParser(prog="python -m lib.galvatron validate",
                       description="the cost model against published training runs")
    ap.add_argument("--runs", nargs="+", required=True, metavar="FILE", help="runs files (data/published_runs/)")
    ap.add_argument("--rules", default="practice", help=f"cost rules: one of {sorted(ALL_PRESETS)}")
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    ap.add_argument("--no-search", action="store_true", help="skip the planner's own picks")
    ap.add_argument("--with", dest="with_", action="append", default=[], metavar="NAME",
                    help=f"switch a candidate mechanism on (one of {', '.join(CANDIDATE_FIELDS)}; repeatable)")
    ap.add_argument("--fabric-reading", default="file", metavar="READING",
                    help=f"how a run's stated fabric is read: one of {', '.join(FABRIC_READINGS)} (default file: "
                         "as data/hardware/fabrics/fabrics.json says; the others are what-ifs)")
    ap.add_argument("--debug", action="store_true", help="show tracebacks of user errors")
    return ap


def _table(report: dict) -> str:
    lines = [f"cost rules: {report['rules']}",
             f"{'run':26s} {'published':>10s} {'estimate':>10s} {'error':>7s} {'fits':>5s} {'peak GB':>8s}  "
             f"pick (estimate)"]
    for r in report["runs"]:
        pick = "-" if r["pick"] is None else f"{r['pick']} ({r['pick_estimate']:.1f})"
        if r["lead"] is not None:
            ld, pl = r["lead"], r["plausibility"]
            pick += (f" lead {ld['lead']:+.0%} [{ld['low']:+.0%}, {ld['high']:+.0%}]"
                     + ("" if ld["real"] else " not real") + (" IMPLAUSIBLE MFU" if pl["implausible"] else ""))
        lines.append(f"{r['name']:26s} {r['published']:10.1f} {r['estimate']:10.1f} {r['error']:+7.1%} "
                     f"{'yes' if r['fits'] else 'NO':>5s} {r['peak_gb']:8.1f}  {pick}")
    lines.append(f"median |error| {report['median_abs_error']:.1%}, largest |error| {report['max_abs_error']:.1%} "
                 f"over {len(report['runs'])} runs (tokens/s/GPU)")
    if report.get("memory_runs"):
        mem = [r for r in report["runs"] if r["memory_error"] is not None]
        lo, hi = min(r["memory_error"] for r in mem), max(r["memory_error"] for r in mem)
        lines.append(f"peak memory, estimated against measured: median {report['median_memory_error']:+.1%} "
                     f"({lo:+.1%} to {hi:+.1%}) over the {len(mem)} runs whose source measured it")
    if report.get("out_of_memory"):
        oom = report["out_of_memory"]
        wrong = [o for o in oom if o["fits"]]
        lines.append(f"out of memory in the source: {len(oom)} layouts, {len(oom) - len(wrong)} of them estimated "
                     f"not to fit" + "".join(f"\n  estimated to fit: {o['name']} ({o['peak_gb']:.1f} GB)"
                                              for o in wrong))
    filled_rows = [r for r in report["runs"] if r["filled"]]
    if filled_rows:
        lines.append("filled (not stated by the source):")
        lines += [f"  {r['name']}: {', '.join(r['filled'])}" for r in filled_rows]
    if report["sweeps"]:
        lines.append(f"{'sweep':32s} {'runs':>4s} {'rank corr.':>10s} {'top-1 regret':>12s}  favourite")
        for s in report["sweeps"]:
            rho = "-" if s["spearman"] is None else f"{s['spearman']:+.2f}"
            lines.append(f"{s['sweep']:32s} {s['runs']:4d} {rho:>10s} {s['top1_regret']:12.1%}  {s['favourite']}")
        rho = report["median_spearman"]
        lines.append(f"median over {len(report['sweeps'])} sweeps: rank correlation "
                     f"{'-' if rho is None else f'{rho:+.2f}'}, top-1 regret {report['median_top1_regret']:.1%}")
    return "\n".join(lines)


def main(argv) -> int:
    """The ``validate`` subcommand (argv without the word ``validate``)."""
    a = _parser().parse_args(argv)
    if a.rules not in ALL_PRESETS:
        raise UserError(f"--rules: unknown rules {a.rules!r}; allowed: {', '.join(sorted(ALL_PRESETS))}")
    rules = get_rules(a.rules)
    for name in a.with_:
        if name not in CANDIDATE_FIELDS:
            raise UserError(f"--with: unknown mechanism {name!r}; allowed: {', '.join(CANDIDATE_FIELDS)}")
    if a.with_:
        rules = rules.with_(name="+".join([rules.name] + a.with_), **{f: True for f in a.with_})
    if a.fabric_reading not in FABRIC_READINGS:
        raise UserError(f"--fabric-reading: unknown reading {a.fabric_reading!r}; allowed: "
                        f"{', '.join(FABRIC_READINGS)}")
    if a.fabric_reading != "file":
        rules = rules.with_(name=f"{rules.name}, fabrics read as {a.fabric_reading}",
                            fabric_reading=a.fabric_reading)
    runs, oom = [], []
    for path in a.runs:
        rf = load_runs(path)
        runs += [(path, r) for r in rf.runs]
        oom += [(path, r) for r in out_of_memory_runs(rf)]
    report = validate_runs(runs, rules, search=not a.no_search, out_of_memory=oom)
    print(json.dumps(report) if a.json else _table(report))
    return 0


def ablation(runs, start="vldb2023") -> list[dict]:
    """Start from ``start``'s rules and switch the mechanisms of ``rules.MECHANISMS`` on one at a time, in
    their order: after each, the median and largest |error| of the published configurations of ``runs`` and
    how many of them fit. The last row is ``practice`` less nothing but its non-mechanism fields."""
    from .search.rules import MECHANISMS

    rules = get_rules(start)
    rows = []
    for label, fields, _ in (("(none)", (), ""),) + MECHANISMS:
        rules = rules.with_(name=f"{start} + {label}", **{f: True for f in fields})
        est = [estimate_run(r, rules) for r in runs]
        errs = np.abs([e["error"] for e in est])
        rows.append({"mechanism": label, "median_abs_error": float(np.median(errs)),
                     "max_abs_error": float(errs.max()), "fits": sum(e["fits"] for e in est),
                     "runs": len(est), "estimates": [e["tokens_per_s_per_gpu"] for e in est]})
    return rows


def with_efficiency(gpu, peak_fraction: float, knee: float, quantized: bool = False):
    """``gpu`` with other efficiency constants (for fitting); ``quantized``: the constants used with
    ``rules.wave_quantization`` on."""
    if quantized:
        return replace(gpu, quantized=(peak_fraction, knee))
    return replace(gpu, peak_fraction=peak_fraction, knee=knee)


def fit_runs(runs, gpu_name: str) -> list:
    """The runs the efficiency of ``gpu_name`` is fitted to: its published runs without pipeline parallelism
    (their time is compute, tensor-parallel messages and the data-parallel tail); all others are held out."""
    return [r for r in runs if r.cluster.gpu == gpu_name and r.config.pp == 1]


def fit_efficiency(runs, gpu_name: str, fill: str = "search", rules="practice") -> tuple:
    """(peak_fraction, knee, RMS log error, fitted run names) of ``gpu_name`` under ``practice``: the two
    constants of ``search/efficiency.py`` minimising the mean squared log error of tokens/s/GPU over
    ``fit_runs`` (``rules``: another rule set to fit under, e.g. with a candidate mechanism on). Used in:
    benchmarks/fit_efficiency.py (which stores them in data/hardware/gpus/)."""
    import math

    from .search.efficiency import fit, load_gpu

    gpu = load_gpu(gpu_name)
    chosen = fit_runs(runs, gpu_name)
    if not chosen:
        raise ValueError(f"no published run without pipeline parallelism on {gpu_name} to fit to")

    def objective(p, k):
        g = with_efficiency(gpu, p, k, get_rules(rules).wave_quantization)
        return float(np.mean([math.log1p(estimate_run(r, rules, g, fill)["error"]) ** 2 for r in chosen]))

    p, k, v = fit(objective)
    return p, k, math.sqrt(v), [r.name for r in chosen]


def heldout_error(gpu: str, rules="practice") -> tuple[float, list]:
    """(median |error|, run names) of ``heldout_runs(gpu)`` under ``rules``, computed: the model's
    stated uncertainty on ``gpu`` (``plausibility.py``; stored by benchmarks/fit_efficiency.py --write)."""
    from .plausibility import heldout_runs

    runs = heldout_runs(gpu)
    if not runs:
        raise ValueError(f"no held-out published run on {gpu}")
    errs = [abs(estimate_run(r, rules)["error"]) for r in runs]
    return round(float(np.median(errs)), 4), [r.name for r in runs]
