"""Galvatron's search: outer loops over the global batch size and the pipeline degree, stage partitioning,
and baselines as restricted spaces, around the per-stage dynamic program (``dynamic_program.py``). The result
is a ``Plan`` (``plan.py``). The modelling choices on which Galvatron versions differ (micro-batches, stage
budgets and division, memory bins, ...) come from a ``CostRules`` (``rules.py``): ``search(..., rules=...)``,
default ``galvatron2``; ``vldb2023`` reproduces the VLDB artifact's search.

Used in: book/galvatron/03_the_search.ipynb.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from .cost import cost_tables, layer_memory_mb, layer_time_s, other_memory_mb, transition_s
from .dynamic_program import DPResult, _ints, brute_force, dp_solve, dp_tables, viterbi  # noqa: F401 (re-export)
from .plan import PLAN_FIELDS, Plan  # noqa: F401 (re-export: Plan's home was this module)
from .profiles import ClusterProfile, ModelProfile
from .rules import GALVATRON2, VLDB2023, CostRules, get_rules  # noqa: F401 (re-export)
from .strategies import Strategy, check_power_of_two, generate


# ------------------------------------------------------------------------------------------------ stages
def even_division(n_layers: int, pp: int) -> tuple:
    """Layers per stage as even as possible (earlier stages take the remainder)."""
    q, r = divmod(n_layers, pp)
    return tuple(q + (1 if k < r else 0) for k in range(pp))


def greedy_division_artifact(layer_min_mem_mb, other_mb: float, pp: int) -> tuple:
    """The artifact's greedy (``pp_stage_divide_greedy``): fill from the last stage backwards, close a stage
    when the average minus its memory is below half the next layer's; then, if stage 0 is empty, move one
    layer into it from stage 1."""
    mems = list(layer_min_mem_mb)
    if pp == 1:
        return (len(mems),)
    avg = (sum(mems) + other_mb) / pp
    div = [0] * pp
    stage_mem = [other_mb] + [0.0] * (pp - 1)
    idx = len(mems) - 1
    for k in range(pp - 1, -1, -1):
        while idx >= 0 and not (k > 0 and avg - stage_mem[k] < 0.5 * mems[idx]):
            stage_mem[k] += mems[idx]
            div[k] += 1
            idx -= 1
    if div[0] == 0:
        div[0], div[1] = 1, div[1] - 1
    if min(div) < 1:
        raise ValueError(f"the artifact's greedy leaves an empty stage for pp={pp}: {div}")
    return tuple(div)


def greedy_division(layer_min_mem_mb, other_mb: float, pp: int) -> tuple:
    """Memory-balanced stages (artifact's greedy): fill from the last stage backwards towards the average
    (sum of per-layer minimum memory + other)/pp; stage 0 carries ``other``; never leave stage 0 empty."""
    mems = list(layer_min_mem_mb)
    if pp == 1:
        return (len(mems),)
    if pp > len(mems):
        raise ValueError(f"cannot split {len(mems)} layers into pp={pp} stages")
    avg = (sum(mems) + other_mb) / pp
    div = [0] * pp
    stage_mem = [other_mb] + [0.0] * (pp - 1)
    idx = len(mems) - 1
    for k in range(pp - 1, -1, -1):
        while idx >= 0:
            # keep at least one layer for each earlier stage
            if k > 0 and (avg - stage_mem[k] < 0.5 * mems[idx] or idx < k) and div[k] > 0:
                break
            stage_mem[k] += mems[idx]
            div[k] += 1
            idx -= 1
    return tuple(div)


# ------------------------------------------------------------------------------------------------ search
#: Largest global batch the search tries by default; the loop normally ends earlier, at the first batch no
#: plan fits. ``SearchResult.bsz_capped`` says when it did not.
MAX_BSZ = 8192


def check_gpus(n_gpus, what: str = "n_gpus", max_bsz: int | None = None) -> int:
    """``n_gpus`` if the search can plan for it: a power of two no larger than the largest global batch it
    tries (``max_bsz``, default ``MAX_BSZ``; every batch tried is a multiple of the GPU count); a
    :class:`UserError` naming ``what`` (a flag, a field) otherwise. Every tool that searches checks this."""
    from lib.cli_errors import UserError

    check_power_of_two(n_gpus, what)
    hi = MAX_BSZ if max_bsz is None else max_bsz
    if n_gpus > hi:
        raise UserError(f"{what}: {n_gpus} GPUs is beyond the searched range: the search tries global batches "
                        f"that are multiples of the GPU count, up to {hi}; allowed: a power of two in [1, {hi}]")
    return n_gpus


@dataclass(frozen=True)
class SearchResult:
    """The best plan (or why there is none) and every (batch, pp) candidate evaluated on the way."""

    feasible: bool
    plan: Plan | None
    message: str
    min_budget_gb: float | None
    candidates: tuple            # dicts: global_bsz, pp, iter_s, throughput, mem_mb, feasible
    search_s: float
    space: str
    n_strategies: int
    bsz_capped: bool = False     # True if the batch loop stopped at max_bsz while plans still fitted

    @property
    def throughput(self) -> float:
        return self.plan.est_throughput_samples_per_s if self.plan else 0.0

    @property
    def max_feasible_bsz(self) -> int:
        ok = [c["global_bsz"] for c in self.candidates if c["feasible"]]
        return max(ok) if ok else 0

    def __repr__(self) -> str:
        if not self.feasible:
            return f"SearchResult({self.message})"
        return (f"SearchResult({self.space}: {self.throughput:.2f} samples/s, {self.plan.summary()}, "
                f"searched in {self.search_s:.2f} s)")


def _stage_plan(model, cluster, strats, B, pp, budget_mb, chunks, uniform, cache, division_strats, step_mb=1,
                rules: CostRules = GALVATRON2):
    """Best assignment for one (B, pp): per-stage DPs (or, with ``uniform``, one strategy for every layer).
    ``chunks``: one count per strategy of ``strats``. Returns (iter_s, strategies per layer, division, peak MB
    per device) or None if infeasible, plus the least memory (MB per device) any such assignment would need."""
    layers = model.layers()
    L = len(layers)
    first = strats[0]
    other = other_memory_mb(model, first, B)
    tabs = {}
    for lt in {id(x): x for x in layers}.values():
        tabs[id(lt)] = np.array([layer_memory_mb(lt, s, B, rules) for s in strats])
    min_mem = [float(np.ceil(tabs[id(lt)] - 1e-9).min()) for lt in layers]
    if model.uniform:
        division = even_division(L, pp)
        budgets = [budget_mb - other] * pp
        overheads = [other] * pp
    else:
        # Stages are cut with the full space of this pp degree, so a restricted space gets the same stages.
        if rules.division_input == "pure-dp":
            pure_dp = Strategy.from_shape(1, 1, cluster.n_gpus)
            div_other = other_memory_mb(model, pure_dp, B)
            div_mem = [min(layer_memory_mb(lt, s, B, rules) for s in division_strats) for lt in layers]
            try:
                division = greedy_division_artifact(div_mem, div_other, pp)
            except ValueError:  # the artifact would fail on an empty stage; keep one layer per stage instead
                division = greedy_division(div_mem, div_other, pp)
        else:
            div_mem = [min(math.ceil(layer_memory_mb(lt, s, B, rules) - 1e-9) for s in division_strats)
                       for lt in layers]
            division = greedy_division(div_mem, other, pp)
        later = 0.0 if rules.stage_budgets == "full" else model.context_mb
        budgets = [budget_mb - other] + [budget_mb - later] * (pp - 1)
        overheads = [other] + [later] * (pp - 1)
    bounds = np.cumsum((0,) + tuple(division))
    stages = [layers[bounds[k]:bounds[k + 1]] for k in range(pp)]
    if uniform:
        return _uniform_plan(model, cluster, strats, B, pp, chunks, cache, stages, division, budgets, overheads,
                             step_mb, rules)
    need = 0.0
    total, choice, peak = 0.0, [], 0.0
    ok = True
    for k, stage_layers in enumerate(stages):
        need = max(need, overheads[k] + sum(min_mem[bounds[k]:bounds[k + 1]]))
        if not ok:
            continue
        key = (tuple(id(x) for x in stage_layers), int(math.floor(budgets[k])), B, pp)
        if key not in cache:
            t, m, r = cost_tables(model, strats, B, cluster, chunks, layers=stage_layers, rules=rules)
            res = dp_solve(t, np.ceil(m - 1e-9) / step_mb, r, int(math.floor(budgets[k] / step_mb)))
            if res.feasible:  # report memory in MB, not in bins
                res = DPResult(True, res.cost_s, res.choice,
                               int(sum(math.ceil(m[i, si] - 1e-9) for i, si in enumerate(res.choice))))
            cache[key] = res
        res = cache[key]
        if not res.feasible:
            ok = False
            continue
        total += res.cost_s
        choice += [strats[i] for i in res.choice]
        peak = max(peak, res.mem_mb + overheads[k])
    if not ok:
        return None, need
    return (total, choice, division, peak), need


def _uniform_plan(model, cluster, strats, B, pp, chunks, cache, stages, division, budgets, overheads, step_mb,
                  rules=GALVATRON2):
    """One strategy for every layer of every stage (how the baseline systems run): the cheapest strategy that
    fits each stage's budget. Same return values as ``_stage_plan``."""
    per_stage = []
    for stage_layers in stages:
        key = ("tables", tuple(id(x) for x in stage_layers), B, pp)
        if key not in cache:
            t, m, _ = cost_tables(model, strats, B, cluster, chunks, layers=stage_layers, rules=rules)
            cache[key] = (t, m)
        per_stage.append(cache[key])
    best, need = None, math.inf
    for si in range(len(strats)):
        used = [int(_ints(m[:, si]).sum()) for _, m in per_stage]
        need = min(need, max(u + o for u, o in zip(used, overheads)))
        fits = all(_ints(np.ceil(m[:, si] - 1e-9) / step_mb).sum() <= budgets[k] // step_mb
                   for k, (_, m) in enumerate(per_stage))
        total = 0.0
        for t, _ in per_stage:
            total += float(t[:, si].sum())
        if fits and (best is None or total < best[0]):
            best = (total, si, max(u + o for u, o in zip(used, overheads)))
    if best is None:
        return None, need
    total, si, peak = best
    return (total, [strats[si]] * sum(division), division, peak), need


def _layerwise(rules: CostRules) -> CostRules:
    """``rules`` if the layer-wise model can honour them: the mechanisms of practice (``rules.MECHANISMS``)
    are priced only by ``cost.step_estimate`` and searched by ``practice_search``, so rules with any of them
    on are refused here rather than silently priced as ``galvatron2``."""
    from .rules import MECHANISM_FIELDS, STACK_FIELDS

    on = [f for f in MECHANISM_FIELDS + STACK_FIELDS if getattr(rules, f)]
    if on:
        raise ValueError(f"rules {rules.name!r} switch on {', '.join(on)}: the layer-wise search prices none of "
                         f"them; use lib.galvatron.search.practice_search (or rules galvatron2 / vldb2023)")
    return rules


def search(model: ModelProfile, cluster: ClusterProfile, budget_gb: float, space: str = "full",
           strategies: list | None = None, batch_sizes=None, pp_degrees=None, ckpt: bool = False,
           uniform: bool = False, chunks: int | None = None, max_bsz: int | None = None, progress: bool = False,
           mem_step_mb: int | None = None, rules: CostRules | str | None = None,
           _confirm_min: bool = True) -> SearchResult:
    """Search the best plan for ``model`` on ``cluster`` with ``budget_gb`` GB per GPU.

    For each global batch size (multiples of the GPU count, or of the largest data-parallel degree of the
    ``strategies`` given with explicit ``batch_sizes``; stopping at the first one no pipeline degree fits,
    or at ``max_bsz``: default ``MAX_BSZ``, and ``bsz_capped`` says when that cut the search short) and each
    pipeline degree, run the per-stage DP over the strategies of that degree.
    Memory is binned in ``mem_step_mb`` MB (default from ``rules``: ``galvatron2`` 1 MB up to 16 GB, coarser
    above so the table has at most 16k rows; ``vldb2023`` always 1 MB). ``rules``: a ``CostRules`` or a preset
    name (default ``galvatron2``); ``chunks`` given here overrides the rules' micro-batch count. ``space`` picks a baseline ('dp', 'sdp', 'tp', 'pp', 'dp+tp', 'dp+pp', '3d'); ``uniform=True`` forces
    one strategy for every layer (how the baseline systems run). Returns a SearchResult; an impossible
    budget gives ``feasible=False`` with the smallest budget that would fit.
    """
    t0 = time.perf_counter()
    rules = _layerwise(get_rules(rules))
    n = cluster.n_gpus
    if batch_sizes is None:
        check_gpus(n, "the cluster's n_gpus", MAX_BSZ if max_bsz is None else max_bsz)
    else:
        check_power_of_two(n)
    if not isinstance(model, ModelProfile) or not isinstance(cluster, ClusterProfile):
        raise ValueError("search needs a ModelProfile and a ClusterProfile (see lib.galvatron.search.profiles)")
    if not (isinstance(budget_gb, (int, float)) and 0 < budget_gb < math.inf):
        raise ValueError(f"budget_gb must be a finite number > 0; got {budget_gb!r}")
    if chunks is not None and (int(chunks) != chunks or chunks < 1):
        raise ValueError(f"chunks must be a positive integer (micro-batches per iteration); got {chunks!r}")
    max_bsz = MAX_BSZ if max_bsz is None else max_bsz
    if batch_sizes is None and max_bsz < n:
        raise ValueError(f"max_bsz={max_bsz} is below the GPU count {n}: no global batch to try")
    strategies = generate(n, ckpt=ckpt, space=space) if strategies is None else list(strategies)
    if not strategies:
        raise ValueError(f"space {space!r} has no strategies for {n} GPUs")
    if batch_sizes is not None:
        # every strategy's data-parallel degree must divide the batch: the GPU count, or the largest
        # data-parallel degree of the strategies given (degrees are powers of two)
        unit = max(s.dp for s in strategies)
        what = f"the GPU count {n}" if unit == n else f"the largest data-parallel degree {unit} of the strategies"
        batch_sizes = list(batch_sizes)
        bad = [b for b in batch_sizes if int(b) != b or b < 1 or b % unit]
        if not batch_sizes or bad:
            raise ValueError(f"batch_sizes must be a non-empty list of positive multiples of {what} "
                             f"(every strategy's data-parallel degree divides them); got {batch_sizes!r}")
    budget_mb = budget_gb * 1024.0
    # 1 MB bins as in the paper; large budgets use coarser bins (memory rounded up, so plans stay feasible)
    step_mb = int(mem_step_mb) if mem_step_mb else rules.mem_step_mb(budget_mb)
    if step_mb < 1:
        raise ValueError(f"mem_step_mb must be >= 1; got {mem_step_mb!r}")
    L = model.n_layers
    pps = sorted({s.pp for s in strategies if s.pp <= L})
    if pp_degrees is not None:
        unknown = sorted(set(pp_degrees) - set(pps))
        if unknown:
            raise ValueError(f"pp_degrees {unknown} are not available here; the strategies of this space on {n} "
                             f"GPUs for {L} layers have pipeline degrees {pps}")
        pps = [p for p in pps if p in set(pp_degrees)]
    bszs = list(batch_sizes) if batch_sizes is not None else list(range(n, max_bsz + 1, n))
    cands, best, min_need = [], None, math.inf
    cache: dict = {}
    it = bszs
    if progress:
        from tqdm.auto import tqdm
        it = tqdm(bszs, desc=f"search {model.name} {budget_gb} GB")
    for B in it:
        any_ok = False
        for pp in pps:
            strats = [s for s in strategies if s.pp == pp]
            if chunks is not None:
                m = [chunks] * len(strats)
            else:
                m = [rules.chunks_for(model.name, B, s, n) for s in strats]
            full = [s for s in generate(n, ckpt=ckpt) if s.pp == pp]
            res, need = _stage_plan(model, cluster, strats, B, pp, budget_mb, m, uniform, cache, full, step_mb,
                                    rules)
            if B == bszs[0]:
                min_need = min(min_need, need)
            if res is None:
                cands.append(dict(global_bsz=B, pp=pp, iter_s=None, throughput=0.0, mem_mb=None, feasible=False))
                continue
            any_ok = True
            iter_s, choice, division, peak = res
            thr = B / iter_s
            cands.append(dict(global_bsz=B, pp=pp, iter_s=iter_s, throughput=thr, mem_mb=peak, feasible=True))
            if best is None or thr > best[0]:
                m_plan = chunks if chunks is not None else rules.plan_chunks(model.name, B, choice, n)
                best = (thr, B, m_plan, choice, division, iter_s, peak)
        if not any_ok:
            break
    capped = batch_sizes is None and best is not None and cands[-1]["feasible"] and bszs[-1] + n > max_bsz
    elapsed = time.perf_counter() - t0
    if best is None:
        if not pps:  # e.g. pure PP on 64 GPUs for 32 layers: no stage split exists
            msg = (f"no feasible plan for {model.name} on {n} GPUs in space {space!r}: its pipeline degrees "
                   f"{sorted({s.pp for s in strategies})} all exceed the {L} layers")
            return SearchResult(False, None, msg, math.inf, tuple(cands), elapsed, space, len(strategies))
        need_gb = math.ceil(min_need / 1024.0 * 100) / 100  # stated with 2 decimals, rounded up
        if _confirm_min and math.isfinite(need_gb):
            # memory bins grow with the budget above 16 GB: make sure the stated minimum really fits
            again = dict(space=space, strategies=strategies, batch_sizes=bszs[:1], pp_degrees=pp_degrees, ckpt=ckpt,
                         uniform=uniform, chunks=chunks, mem_step_mb=mem_step_mb, rules=rules, _confirm_min=False)
            for _ in range(64):
                if search(model, cluster, need_gb, **again).feasible:
                    break
                need_gb = round(need_gb + max(0.01, math.ceil(need_gb * 1024 / 16384) / 1024), 2)
        msg = (f"no feasible plan for {model.name} on {n} GPUs with {budget_gb:g} GB per GPU in space {space!r}: "
               f"the smallest plan (global batch {bszs[0]}) needs at least {need_gb:.2f} GB per GPU")
        return SearchResult(False, None, msg, need_gb, tuple(cands), elapsed, space, len(strategies))
    thr, B, m, choice, division, iter_s, peak = best
    plan = Plan.from_strategies(choice, B, m, pp_division=division, model=model.name, est_iter_s=iter_s,
                                est_throughput_samples_per_s=thr, est_mem_mb_per_device=peak)
    msg = f"best: {thr:.2f} samples/s at global batch {B}, pp={plan.pp_deg}"
    if capped:
        msg += f" (stopped at max_bsz={max_bsz} while plans still fitted)"
    return SearchResult(True, plan, msg, None, tuple(cands), elapsed, space, len(strategies), capped)


def evaluate_plan(plan: Plan, model: ModelProfile, cluster: ClusterProfile,
                  rules: CostRules | str | None = None) -> dict:
    """Re-estimate a plan with the cost model: iteration seconds, throughput, peak MB per device.
    ``rules`` as in ``search`` (default ``galvatron2``: the plan's own ``chunks`` for every layer; under
    ``vldb2023`` each layer's count comes from the rules, as in the search)."""
    rules = _layerwise(get_rules(rules))
    if plan.n_layers != model.n_layers:
        raise ValueError(f"plan has {plan.n_layers} layers; model {model.name!r} has {model.n_layers}")
    if plan.world_size != cluster.n_gpus:
        raise ValueError(f"plan is for world_size={plan.world_size}; cluster {cluster.name!r} has {cluster.n_gpus}")
    strats, layers, B = plan.strategies(), model.layers(), plan.global_bsz
    first = [s for s in generate(cluster.n_gpus) if s.pp == plan.pp_deg][0]
    other = other_memory_mb(model, first, B)
    t, start, peak = 0.0, 0, 0.0
    later = 0.0 if rules.stage_budgets == "full" else model.context_mb
    for k, n in enumerate(plan.stage_sizes()):
        mem = other if (k == 0 or model.uniform) else later
        for i in range(start, start + n):
            m = plan.chunks if rules.chunks == "galvatron2" else rules.chunks_for(model.name, B, strats[i],
                                                                                   cluster.n_gpus)
            t += layer_time_s(layers[i], strats[i], B, cluster, m, model.extra_overhead_ms, rules)
            if i > start:
                t += transition_s(layers[i - 1], strats[i - 1], strats[i], B, cluster)
            mem += math.ceil(layer_memory_mb(layers[i], strats[i], B, rules) - 1e-9)
        peak = max(peak, mem)
        start += n
    return {"iter_s": t, "throughput": B / t, "mem_mb": peak}
