"""How chapter 9 judges the planner's picks: its ranking on published sweeps, and one published run (Llama 3
405B) set beside the planner's pick, the pick's lead as a range under the model's stated error on its GPU type
(``plausibility.stated_error`` and ``plausibility.lead_range``: the book's one definition of held-out error).

- :func:`sweep_report`: ``validate``'s report (no search) of the sweep files of ``data/published_runs/``,
  each sweep labelled fitted or held out: a sweep is *fitted* where any of its runs chose or fitted a
  constant (a stack field's ``chosen_on`` in ``data/stacks/``, a GPU's ``fitted_to``), else held out.
- :func:`switch_gains`: sweeps that pair one layout with a switch on and off (torchtitan's async TP rows): the
  gain of the switch, measured and estimated.
- :func:`meta_run`: a published run priced under ``practice`` with its unstated fields filled
  (``fills.py``), its peak memory against the GPU's usable capacity, its published and estimated MFU.

Every throughput here is estimated (``search/cost.py``), every measured figure quoted from its run's source.
Used in: book/galvatron/05_from_paper_to_practice, lib/galvatron/exercises_practice.py,
tests/galvatron/test_practice_picks.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from . import stacks
from .plausibility import lead_range
from .published import load_runs, out_of_memory_runs, to_job, to_shape
from .ranking import sweep_of
from .search.cost import model_flops_per_token
from .search.efficiency import GPU_DIR
from .search.report import Table
from .validate import estimate_run, validate_runs

RUNS_DIR = Path(__file__).resolve().parents[2] / "data" / "published_runs"
#: The files of published sweeps, with the source each quotes.
SWEEP_FILES = {"sc21_table2.json": "SC'21 Table 2 (ZeRO-3 against PTD)",
               "bloom_topology.json": "BLOOM-176B tuning notes",
               "bloom_tp_sweep.json": "BLOOM-176B tuning notes, TP 2-8",
               "bloom_bf16_sweeps.json": "BLOOM-176B tuning notes, BF16 optimizer",
               "torchtitan_sweeps.json": "torchtitan's Llama 2 tables",
               "nanotron_tp_sweep.json": "nanotron's TP scaling benchmark"}
GIB = 2**30


def memory_errors(file: str, without: tuple = ()) -> list:
    """Estimated peak over the measured one, less 1, for every run of ``file`` (in ``RUNS_DIR``) whose source
    measured its memory, as ``validate`` prices it, or with the stack fields ``without`` switched off: what
    those fields add (chapter 9: the BF16 optimizer's 16-bit gradients)."""
    out = []
    for run in load_runs(str(RUNS_DIR / file)).runs:
        if run.measured.peak_memory_gb is not None:
            est = estimate_run(run, "practice", without=without)
            out.append(est["peak_gb"] / run.measured.peak_memory_gb - 1.0)
    return out


def chosen_on() -> dict:
    """{run name: what it chose or fitted}: stack fields' ``chosen_on`` (``stacks.chosen_on``) and GPUs'
    ``fitted_to``."""
    out = stacks.chosen_on()
    for p in sorted(Path(GPU_DIR).glob("*.json")):
        for name in json.loads(p.read_text())["efficiency"]["fitted_to"]:
            out[name] = f"fitted {p.stem}'s efficiency"
    return out


def sweep_report(files=tuple(SWEEP_FILES)) -> dict:
    """{"rows": validate's rows of every file, "sweeps": [validate's per-sweep dict + "file", "source",
    "status" ("fitted" or "held out"), "why"], "by_file": {file: (median rank correlation, median top-1
    regret)}, "out_of_memory": validate's rows of the layouts each file reports out of memory, + "file"}. A
    sweep's "gpus" is its largest GPU count."""
    rows, out, by_file, oom = [], [], {}, []
    used = chosen_on()
    for f in files:
        rf = load_runs(str(RUNS_DIR / f))
        runs = rf.runs
        rep = validate_runs([(f, r) for r in runs], search=False, progress=False,
                            out_of_memory=[(f, r) for r in out_of_memory_runs(rf)])
        rows += rep["runs"]
        oom += [{**o, "file": f} for o in rep["out_of_memory"]]
        by_file[f] = (rep["median_spearman"], rep["median_top1_regret"])
        for s in rep["sweeps"]:
            members = [r for r in runs if sweep_of(r.name) == s["sweep"]]
            why = sorted({used[r.name] for r in members if r.name in used})
            out.append({**s, "file": f, "source": SWEEP_FILES.get(f, f),
                        "status": "fitted" if why else "held out", "why": "; ".join(why),
                        "gpus": max(r.cluster.gpus for r in members)})
    return {"rows": rows, "sweeps": out, "by_file": by_file, "out_of_memory": oom}


def heldout_summary(report: dict, min_gpus: int = 128) -> dict:
    """The issue's two ranking figures over the held-out sweeps of ``report`` (``sweep_report``): the median
    rank correlation over those with one ("rho", over "n"), and the median top-1 regret over those of at
    least ``min_gpus`` GPUs ("regret", over "n_large")."""
    held = [s for s in report["sweeps"] if s["status"] == "held out"]
    rhos = [s["spearman"] for s in held if s["spearman"] is not None]
    large = [s["top1_regret"] for s in held if s["gpus"] >= min_gpus]
    return {"rho": float(np.median(rhos)), "n": len(rhos),
            "regret": float(np.median(large)) if large else None, "n_large": len(large)}


def switch_gains(file: str = "torchtitan_async_tp.json", on: str = "async-tp", off: str = "vanilla-tp") -> dict:
    """{sweep: {"measured", "estimated", "errors", "spearman", "gpus"}} for a runs file whose sweeps are pairs,
    one layout with a switch on (``sweep#<on>``) and off (``sweep#<off>``): the gain of turning it on, measured
    (quoted) and estimated under ``practice`` (``sweep_report``), and the two rows' errors (off, on)."""
    rep = sweep_report(files=(file,))
    by = {r["name"]: r for r in rep["rows"]}
    out = {}
    for s in rep["sweeps"]:
        a, b = by.get(f"{s['sweep']}#{on}"), by.get(f"{s['sweep']}#{off}")
        if a is None or b is None:
            raise ValueError(f"{file}: sweep {s['sweep']!r} needs the rows #{on} and #{off}")
        out[s["sweep"]] = {"measured": a["published"] / b["published"] - 1.0,
                           "estimated": a["estimate"] / b["estimate"] - 1.0, "errors": (b["error"], a["error"]),
                           "spearman": s["spearman"], "gpus": s["gpus"]}
    return out


def sweep_rows(report: dict, sweep: str) -> list:
    """The report rows of one sweep."""
    return [r for r in report["rows"] if sweep_of(r["name"]) == sweep]


def sweep_table(report: dict) -> Table:
    rows = []
    for s in report["sweeps"]:
        rho = "-" if s["spearman"] is None else f"{s['spearman']:+.2f}"
        rows.append([s["sweep"], s["source"], s["status"], f"{s['runs']}", rho, f"{s['top1_regret']:.1%}",
                     s["favourite"].split("#", 1)[1], s["best"].split("#", 1)[1]])
    return Table(["sweep", "source", "status", "layouts", "rank corr.", "top-1 regret", "favourite",
                  "fastest measured"], rows,
                 caption="estimates under practice (published layouts, unstated fields filled); "
                         "measurements quoted")


def mfu(run, tokens_per_s_per_gpu: float) -> float:
    """Model FLOPs utilisation of ``run`` at a throughput (``cost.model_flops_per_token`` against the GPU's
    dense 16-bit peak)."""
    job = to_job(run)
    return tokens_per_s_per_gpu * model_flops_per_token(to_shape(run)) / job.gpu.flops(job.dtype)


def meta_run(run) -> dict:
    """``run``'s published layout under ``practice``: {"estimate" (estimate_run's dict), "filled" (field:
    value searched), "peak_gib", "usable_gib", "headroom_gib", "mfu_published", "mfu_estimated",
    "quoted"}."""
    est = estimate_run(run, "practice")
    usable = to_job(run).gpu.usable_mem_bytes
    quoted = run.measured.tokens_per_s_per_gpu
    return {"estimate": est, "filled": dict(est["searched"]), "peak_gib": est["peak_bytes"] / GIB,
            "usable_gib": usable / GIB, "headroom_gib": (usable - est["peak_bytes"]) / GIB,
            "mfu_published": mfu(run, quoted), "mfu_estimated": mfu(run, est["tokens_per_s_per_gpu"]),
            "quoted": quoted}


def meta_table(run, meta: dict, pick: dict, best: dict, err: float) -> Table:
    """Meta's layout and the planner's pick side by side: throughput, MFU, peak memory, the pick's lead
    (``plausibility.lead_range`` under ``err``, the stated error of the run's GPU type)."""
    e, p = meta["estimate"], pick["est_pick"]
    lead = lead_range(p["tokens_per_s_per_gpu"], e["tokens_per_s_per_gpu"], err)
    usable = meta["usable_gib"]
    rows = [["layout", e["config"].label(), pick["pick"].label()],
            ["tokens/s/GPU, quoted", f"{meta['quoted']:,.1f}", "-"],
            ["tokens/s/GPU, estimated", f"{e['tokens_per_s_per_gpu']:,.1f}",
             f"{p['tokens_per_s_per_gpu']:,.1f}"],
            ["MFU, quoted", f"{meta['mfu_published']:.1%}", "-"],
            ["MFU, estimated", f"{meta['mfu_estimated']:.1%}", f"{mfu(run, p['tokens_per_s_per_gpu']):.1%}"],
            [f"peak GiB (usable {usable:.1f})", f"{meta['peak_gib']:.1f}", f"{p['peak_bytes'] / GIB:.1f}"],
            ["lead over Meta's layout (estimated)", "-",
             f"{lead['lead']:+.0%} (range {lead['low']:+.0%} to {lead['high']:+.0%})"]]
    return Table(["", "Meta's layout (filled)", "planner's pick"], rows,
                 caption=f"estimated under practice; range: each estimate off by the stated error, {err:.1%}, "
                         f"either way; "
                         f"best published MFU on this GPU: {best['mfu']:.1%} ({best['run']})")


#: Korthikanti et al. (2022, arXiv 2205.05198), abstract: the 530B GPT on 2,240 A100s reaches 54.2% MFU with
#: sequence parallelism and selective recompute, against 42.1% with full recompute ("29% faster"). Quoted.
KORTHIKANTI_530B = {"mfu_before": 0.421, "mfu_after": 0.542, "gpus": 2240,
                    "source": "Korthikanti et al. 2022 (arXiv 2205.05198), abstract"}


def era_leads(runs, err: float) -> list[dict]:
    """For each run (SC'21's, stack ``megatron-lm-2021``): the planner's pick and its lead over the published
    layout under the run's own stack (what Megatron-LM could do in 2021) and under today's default stack, and
    the gain of Korthikanti's two features (sequence parallelism, selective recompute) at the published layout.
    Each lead with ``plausibility.lead_range`` under ``err``. All estimated under ``practice``."""
    from dataclasses import replace

    from .search.cost import step_estimate
    from .search.practice_search import search_practice
    from .stacks import DEFAULT_STACK
    from .validate import run_rules

    out = []
    for run in runs:
        pub = estimate_run(run, "practice")
        base, job = pub["tokens_per_s_per_gpu"], to_job(run)
        row = {"run": run.name, "published": pub["config"], "est_published": base}
        for era, stack in (("own", run.stack), ("today", DEFAULT_STACK)):
            cfg, est, _ = search_practice(job, run_rules(run.model_copy(update={"stack": stack}), "practice"))
            row[era] = {"pick": cfg, "estimate": est, **lead_range(est["tokens_per_s_per_gpu"], base, err)}
        feat = step_estimate(job, replace(pub["config"], recompute="selective", sequence_parallel=True),
                             run_rules(run, "practice"))
        row["features"] = {"estimate": feat, "gain": feat["tokens_per_s_per_gpu"] / base - 1}
        out.append(row)
    return out


def era_table(rows: list[dict]) -> Table:
    """:func:`era_leads` as a table: each pick's lead with its range, under 2021's stack and today's."""
    def lead(d):
        return f"{d['lead']:+.0%} ({d['low']:+.0%} to {d['high']:+.0%})"

    return Table(["run", "pick, 2021's Megatron-LM", "its lead", "pick, today's Megatron-LM", "its lead",
                  "SP + selective at the published layout"],
                 [[r["run"], r["own"]["pick"].label(), lead(r["own"]), r["today"]["pick"].label(),
                   lead(r["today"]), f"{r['features']['gain']:+.0%}"] for r in rows],
                 caption="estimated under practice against the published layout's estimate; a range: both "
                         "estimates off by the A100's stated error either way")


def errors_without_rule(path, field: str) -> dict:
    """{run name: error} of the runs of ``path`` whose stack sets ``field`` (a ``CostRules`` flag chosen on
    them), priced as ``validate`` prices them but with ``field`` off: what the rule was chosen to fix."""
    from dataclasses import replace

    from .search.cost import step_estimate
    from .validate import run_rules

    out = {}
    for run in load_runs(str(path)).runs:
        rules = run_rules(run, "practice")
        if not getattr(rules, field):
            continue
        cfg = estimate_run(run, "practice")["config"]
        est = step_estimate(to_job(run), cfg, replace(rules, **{field: False}))
        out[run.name] = est["tokens_per_s_per_gpu"] / run.measured.tokens_per_s_per_gpu - 1
    return out
