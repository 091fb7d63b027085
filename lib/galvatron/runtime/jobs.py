"""What a rank does with a plan: train it and time it, or check it against the single-process reference. A job
is a plain dict so it crosses process boundaries and ``torchrun``; ``run_job`` dispatches on its ``"kind"``.

Used in: book/galvatron/04_from_plan_to_run.
"""

from __future__ import annotations

import gc
import math
import statistics

import torch

from .model import ModelConfig, init_params, reference_step, tp_shard
from .plan import load_plan
from .processes import peak_rss_bytes


def precheck(job: dict, world_size: int) -> None:
    """Checks that need no peer: the same on every rank, so a bad plan fails everywhere at once."""
    if job.get("kind") in ("train", "check"):
        plans = job.get("plans") or ([job["plan"]] if "plan" in job else [])
        if not plans or "model" not in job:
            raise ValueError(f"a {job['kind']} job needs 'plan' (or 'plans') and 'model'; got keys {sorted(job)}")
        cfg = ModelConfig.from_dict(job["model"])
        for pd in plans:
            load_plan(pd, world_size).validate(cfg.n_head, cfg.n_layer, world_size)


def _device(job: dict) -> str:
    dev = job.get("device", "cpu")
    if dev == "cuda":
        return f"cuda:{torch.cuda.current_device()}"
    return dev


def _pools(job: dict, world_size: int, rank: int) -> dict:
    """Every process group of every plan of the job, created once before the first plan runs: one pool per
    pipeline degree (a pool holds every group its rank grid allows)."""
    from .grid import GroupPool, RankGrid

    pps = sorted({load_plan(pd, world_size).pp for pd in (job.get("plans") or [job["plan"]])})
    timeout_s = job.get("timeout_s")  # the world group's timeout, for every subgroup's collectives too
    return {pp: GroupPool(RankGrid(world_size, pp), rank, timeout_s=timeout_s) for pp in pps}


def _runner(job: dict, rank: int, world_size: int, plan_dict, pools: dict):
    from .stage import StageRunner

    cfg = ModelConfig.from_dict(job["model"])
    plan = load_plan(plan_dict, world_size)
    return StageRunner(plan, cfg, rank, seed=int(job.get("seed", 0)), lr=float(job.get("lr", 0.1)),
                       optimizer=job.get("optimizer", "sgd"), overlap=bool(job.get("overlap", True)),
                       device=_device(job), pool=pools[plan.pp], sdp_impl=job.get("sdp_impl", "auto"))


def _peak_mem(dev: str, base_cuda: int = 0) -> dict:
    out = {"peak_rss_bytes": peak_rss_bytes()}
    if dev.startswith("cuda"):  # this plan's own peak: what was allocated before it was built is subtracted
        out["peak_cuda_bytes"] = int(torch.cuda.max_memory_allocated()) - base_cuda
        out["base_cuda_bytes"] = base_cuda
    return out


def _free_previous_plan(cuda: bool) -> int:
    """Collect the previous runner (its gradient hooks form reference cycles) and reset the allocator's peak;
    returns the bytes still allocated, which the next plan's peak does not own."""
    gc.collect()
    if not cuda:
        return 0
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    return int(torch.cuda.memory_allocated())


def train_job(job: dict, rank: int, world_size: int) -> dict:
    """For each plan (``job["plans"]`` or ``job["plan"]``): time ``steps`` iterations after ``warmup``.
    Per plan: this rank's iteration seconds, median, losses and peak memory (RSS on CPU, allocator on CUDA),
    and (unless ``job["memory"]`` is false) the peak of one more step by category (``memory_step.measure_step``)."""
    from .pipeline import timed_steps

    plans = job.get("plans") or [job["plan"]]
    pools, out = _pools(job, world_size, rank), []
    cuda = torch.cuda.is_available() and str(job.get("device", "cpu")).startswith("cuda")
    probe = _probe(job) if job.get("probe") else None
    for pd in plans:
        base_cuda = _free_previous_plan(cuda)
        base = peak_rss_bytes()
        r = _runner(job, rank, world_size, pd, pools)
        # The first plan of a fresh process also pays one-off costs (allocator, first use of each group).
        extra = 3 if not out else 0
        res = timed_steps(r, int(job.get("warmup", 2)) + extra, int(job.get("steps", 5)))
        mem = None
        if job.get("memory", True):  # one more step, counted tensor by tensor (``memory``), not timed
            from .memory_step import measure_step

            mem = measure_step(r, len(res["losses"])).to_dict()
        out.append({"memory": mem, "plan": r.plan.label(), "stage": r.stage, "sdp_impl": r.sdp_impl, "iter_s": res["iter_s"],
                    "median_iter_s": statistics.median(res["iter_s"]), "best_iter_s": min(res["iter_s"]),
                    "losses": res["losses"],
                    "base_rss_bytes": base, **_peak_mem(r.dev.type, base_cuda)})
        del r
    res = {"rank": rank, "runs": out}
    if probe is not None:  # the machine's speed just before and just after the runs
        res["probe_ms"] = [probe, _probe(job)]
    return res


def _probe(job: dict) -> float:
    """One layer's forward+backward per sample (ms), timed like the profiler does."""
    from .profiler import measure_layer

    cfg = ModelConfig.from_dict(job["model"])
    m = measure_layer(cfg, int(job.get("probe_batch", 4)), tp_degrees=(), reps=10, device=_device(job))
    return m["fwd_bwd_ms_per_sample"]


def nanmax(values) -> float:
    """The largest value, NaN if any is NaN (Python's ``max`` drops a NaN unless it comes first); 0.0 if none."""
    out = 0.0
    for v in values:
        v = float(v)
        if math.isnan(v):
            return math.nan
        out = max(out, v)
    return out


def _maxdiff(a: dict, b: dict) -> float:
    return nanmax(float((a[k].float().cpu() - b[k].float().cpu()).abs().max()) for k in a)  # torch's max keeps NaN


CHECK_TOL = 1e-4  # float32 on either side: observed errors are ~1e-7; a wrong plan is off by ~1e-2 or more


def judge_checks(ranks: list[dict], tol: float = CHECK_TOL) -> tuple[bool, str]:
    """Whether every rank's every check is within ``tol`` (parameters and losses) and every number finite, and
    one line saying so, with the tolerance. ``ranks``: the gathered results of ``check_job``."""
    if not ranks or not all(r.get("checks") for r in ranks):
        return False, "check: no results to compare"
    checks = [c for r in ranks for c in r["checks"]]
    param = nanmax(c["param_err"] for c in checks)
    loss = nanmax(c["loss_err"] for c in checks)
    finite = all(math.isfinite(float(x)) for c in checks for x in (*c["losses"], *c["ref_losses"])
                 if x is not None)  # None: a rank off the last pipeline stage has no loss
    ok = finite and param <= tol and loss <= tol  # a NaN error compares False: not ok
    why = "" if ok else (": non-finite losses" if not finite else ": error above the tolerance"
                         if math.isfinite(param) and math.isfinite(loss) else ": non-finite error")
    return ok, (f"check {'passed' if ok else 'FAILED'}{why}: param_err {param:.3g}, loss_err {loss:.3g}, "
                f"tolerance {tol:g}")


def check_job(job: dict, rank: int, world_size: int) -> dict:
    """For each plan of ``job["plans"]`` (or ``job["plan"]``): run ``steps`` iterations and compare the loss and
    the updated parameters this rank holds with ``reference_step`` on one process."""
    from .pipeline import gpipe_step

    plans = job.get("plans") or [job["plan"]]
    cfg = ModelConfig.from_dict(job["model"])
    steps, lr, seed = int(job.get("steps", 1)), float(job.get("lr", 0.1)), int(job.get("seed", 0))
    pools, out, ref_cache = _pools(job, world_size, rank), [], {}
    for pd in plans:
        r = _runner(job, rank, world_size, pd, pools)
        losses = [gpipe_step(r, s) for s in range(steps)]
        B = r.plan.global_bsz
        if B not in ref_cache:
            ref_cache[B] = reference_step(cfg, init_params(cfg, seed), B, seed, lr, steps, device=r.dev)
        ref_losses, ref = ref_cache[B]
        mine = r.local_shards()
        errs = [_maxdiff(mine["blocks"][i], tp_shard(ref["blocks"][i], L.lay.tp_rank(r.j), L.lay.tp))
                for L, i in zip(r.layers, r.layer_ids)]
        errs += [_maxdiff(mine[part], ref[part]) for part in ("embed", "head") if mine[part]]
        err = nanmax(errs)
        loss_err = nanmax(abs(a - b) for a, b in zip(losses, ref_losses)) if r.last else 0.0
        out.append({"plan": r.plan.label(), "sdp_impl": r.sdp_impl, "param_err": err, "loss_err": loss_err,
                    "losses": losses, "ref_losses": ref_losses})
    return {"rank": rank, "checks": out}


def fail_rank_job(job: dict, rank: int, world_size: int) -> dict:
    """Diagnostic: rank ``job["rank"]`` raises while the others wait in a barrier (tests the launcher's
    guarantee that a failure mid-run leaves no rank hanging)."""
    import torch.distributed as dist

    if rank == int(job.get("rank", 0)):
        raise RuntimeError(f"rank {rank} failed on purpose")
    dist.barrier()
    return {"rank": rank}


def run_job(job: dict, rank: int, world_size: int) -> dict:
    """What one rank does once its process group exists; dispatched on ``job["kind"]``."""
    kinds = {"train": train_job, "check": check_job, "fail_rank": fail_rank_job}
    if job.get("kind") not in kinds:
        raise ValueError(f"job kind must be one of {sorted(kinds)}; got {job.get('kind')!r}")
    return kinds[job["kind"]](job, rank, world_size)


__all__ = ["precheck", "run_job", "train_job", "check_job", "fail_rank_job", "judge_checks", "nanmax"]
