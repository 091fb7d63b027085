"""Estimated against measured: run plans on local ranks and set the cost model's numbers beside them.

``run_local`` is the helper the chapter calls: it spawns ``world_size`` CPU ranks (gloo on 127.0.0.1), checks
every exit code, and returns per plan the iteration time (slowest rank's median) and each rank's peak memory.
``compare`` adds the cost model's estimate with the measured overlap slowdown and with none (kappa = 1).
Used in: book/galvatron/04_from_plan_to_run.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass

from .launch import spawn_local
from .model import ModelConfig
from .plan import RunPlan, from_search_plan, summary_of_label


@dataclass(frozen=True)
class RunResult:
    """One plan run for real: seconds per iteration (slowest rank's median) and per-rank peak memory."""

    plan: str
    iter_s: float            # slowest rank's median iteration (the profiler uses medians too)
    best_iter_s: float       # slowest rank's best iteration
    rank_iter_s: tuple
    peak_rss_mb: tuple       # whole-process peak resident memory per rank (CPU), MB
    rss_growth_mb: tuple     # peak minus the resident memory before this plan was built, MB
    peak_cuda_mb: tuple      # allocator peak per rank on CUDA (empty on CPU), MB
    losses: tuple
    sdp_impl: str | None = None  # "fsdp2" or "manual" when the plan shards parameters (see ``sdp``)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "RunResult":
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})


def run_local(plans: list, cfg: ModelConfig, world_size: int, steps: int = 5, warmup: int = 2,
              timeout_s: float = 180.0, device: str = "cpu", backend: str = "gloo", seed: int = 0,
              probe_batch: int = 0, probes: list | None = None, sdp_impl: str = "auto") -> list:
    """Run every plan (``RunPlan`` or search ``Plan``) on ``world_size`` local ranks in one spawn.

    With ``probe_batch`` > 0, every rank also times one layer before and after the runs; the per-rank
    values (ms per sample) are appended to ``probes``."""
    rps = [p if isinstance(p, RunPlan) else from_search_plan(p) for p in plans]
    job = {"kind": "train", "plans": [p.to_dict() for p in rps], "model": cfg.to_dict(), "steps": steps,
           "warmup": warmup, "device": device, "backend": backend, "seed": seed,
           "probe": probe_batch > 0, "probe_batch": probe_batch, "sdp_impl": sdp_impl,
           "memory": False}  # no counted step: memory is measured apart (``memory_report.measure_memory``)
    ranks = spawn_local(job, world_size, timeout_s)
    if probes is not None:
        probes += [v for r in ranks for v in r.get("probe_ms", [])]
    out = []
    mb = 2 ** 20
    for i, p in enumerate(rps):
        runs = [r["runs"][i] for r in ranks]
        last = [r for r in runs if r["losses"][-1] is not None]
        out.append(RunResult(
            plan=p.label(), iter_s=max(r["median_iter_s"] for r in runs),
            best_iter_s=max(r["best_iter_s"] for r in runs),
            rank_iter_s=tuple(r["median_iter_s"] for r in runs),
            peak_rss_mb=tuple(r["peak_rss_bytes"] / mb for r in runs),
            rss_growth_mb=tuple((r["peak_rss_bytes"] - r["base_rss_bytes"]) / mb for r in runs),
            peak_cuda_mb=tuple(r["peak_cuda_bytes"] / mb for r in runs if "peak_cuda_bytes" in r),
            losses=tuple(last[0]["losses"]) if last else (), sdp_impl=runs[0].get("sdp_impl")))
    return out


BASELINES = ("dp", "sdp", "tp", "pp")


def candidate_plans(model, cluster, global_bsz: int, budget_gb: float = 64.0) -> dict:
    """The searched plan ("galvatron") and the uniform baselines, all at ``global_bsz``: name -> Plan."""
    from ..search.engine import search

    out = {}
    for space in ("full",) + BASELINES:
        res = search(model, cluster, budget_gb, space=space, uniform=space != "full", batch_sizes=[global_bsz])
        if res.feasible:
            out["galvatron" if space == "full" else space] = res.plan
    return out


def estimate(plan, model, cluster, overlap: bool = True) -> dict:
    """The cost model's iteration seconds and peak MB for ``plan``; ``overlap=False`` sets kappa = 1."""
    from ..search.engine import evaluate_plan

    return evaluate_plan(plan, model, cluster if overlap else cluster.with_overlap(1.0))


def compare(plans: dict, model, cluster, cfg: ModelConfig, world_size: int, steps: int = 5, warmup: int = 2,
            timeout_s: float = 180.0, other_s: float = 0.0, device: str = "cpu", backend: str = "gloo",
            probe_batch: int = 0, probes: list | None = None, sdp_impl: str = "auto") -> list:
    """One row per plan: estimate with and without the overlap slowdown, measured, relative errors.

    ``other_s`` (the profiler's non-layer time: embedding, head, optimizer) is added to both estimates when
    given; the cost model itself has no such term. ``est_model_only_s`` keeps the bare cost model."""
    names = list(plans)
    rps = {n: plans[n] if isinstance(plans[n], RunPlan) else from_search_plan(plans[n]) for n in names}
    unique = list(dict.fromkeys(rps.values()))  # a plan equal to a baseline runs once
    # Forward then backward order (A B C C B A), best of both: load that drifts during the runs then
    # favours no plan.
    both = run_local(unique + unique[::-1], cfg, world_size, steps, warmup, timeout_s, device, backend,
                     probe_batch=probe_batch, probes=probes, sdp_impl=sdp_impl)
    runs = {}
    for p, m in zip(unique + unique[::-1], both):
        if p not in runs or m.iter_s < runs[p].iter_s:
            runs[p] = m
    rows = []
    for n in names:
        m = runs[rps[n]]
        e1, e0 = estimate(plans[n], model, cluster, True), estimate(plans[n], model, cluster, False)
        t1, t0 = e1["iter_s"] + other_s, e0["iter_s"] + other_s
        rows.append({"name": n, "plan": m.plan, "sdp_impl": m.sdp_impl, "measured_s": m.iter_s,
                     "measured_best_s": m.best_iter_s,
                     "est_s": t1, "est_no_overlap_s": t0, "est_model_only_s": e1["iter_s"],
                     "err": t1 / m.iter_s - 1, "err_no_overlap": t0 / m.iter_s - 1,
                     "err_model_only": e1["iter_s"] / m.iter_s - 1, "est_mem_mb": e1["mem_mb"],
                     "rss_growth_mb": max(m.rss_growth_mb), "peak_rss_mb": max(m.peak_rss_mb),
                     "peak_cuda_mb": max(m.peak_cuda_mb) if m.peak_cuda_mb else None})
    return rows


def median_abs_error(rows: list, key: str = "err") -> float:
    """Median over distinct plans (the searched plan often equals a baseline) of |relative error|."""
    per_plan = {r["plan"]: abs(r[key]) for r in rows}
    return statistics.median(per_plan.values())


def profile_search_run(cfg: ModelConfig, world_size: int, global_bsz: int, steps: int = 6, warmup: int = 2,
                       budget_gb: float = 64.0, add_other: bool = True, reps: int = 10,
                       timeout_s: float = 180.0, device: str = "cpu", backend: str = "gloo",
                       sdp_impl: str = "auto") -> dict:
    """The chapter's whole loop: profile this machine, search (Galvatron and the baselines) on that profile,
    run every plan for real, and compare. Profile and runs follow each other at once, because on a shared
    machine the load (and so every time) drifts within minutes; ``drift`` (>= 1) is the largest ratio between
    the profiled layer time and the same layer timed just before and after the runs: far above 1, the machine
    changed speed in between and the comparison says more about the load than about the cost model."""
    from .profiler import profile_machine

    model, cluster, raw = profile_machine(cfg, world_size, global_bsz, reps=reps, timeout_s=timeout_s,
                                          device=device, backend=backend)
    plans = candidate_plans(model, cluster, global_bsz, budget_gb)
    other_s = raw["layer"].get("other_ms_per_iter", 0.0) * 1e-3 if add_other else 0.0
    batch = max(1, global_bsz // world_size)
    probes: list = []
    rows = compare(plans, model, cluster, cfg, world_size, steps, warmup, timeout_s, other_s, device, backend,
                   probe_batch=batch, probes=probes, sdp_impl=sdp_impl)
    ref = raw["layer"]["fwd_bwd_ms_per_sample"]
    drift = max(max(probes) / ref, ref / min(probes)) if probes else 1.0
    return {"model": model, "cluster": cluster, "raw": raw, "plans": plans, "rows": rows, "other_s": other_s,
            "drift": drift, "probes_ms": probes}


def format_rows(rows: list) -> str:
    """A plain-text table of ``compare`` rows (times in ms), at most 88 characters wide (the book's column)."""
    head = f"{'plan':<10} {'layout':<32} {'measured':>9} {'est':>8} {'err':>7} {'est k=1':>8} {'err k=1':>8}"
    lines = [head, "-" * len(head)]
    for r in rows:
        text = summary_of_label(r["plan"])
        layout = text if len(text) <= 32 else text[:31] + "…"
        lines.append(f"{r['name']:<10} {layout:<32} {r['measured_s'] * 1e3:9.2f} {r['est_s'] * 1e3:8.2f} "
                     f"{r['err']:+7.1%} {r['est_no_overlap_s'] * 1e3:8.2f} {r['err_no_overlap']:+8.1%}")
    lines.append(f"median |error|: {median_abs_error(rows):.1%} with the overlap slowdown, "
                 f"{median_abs_error(rows, 'err_no_overlap'):.1%} without")
    return "\n".join(lines)
