"""Galvatron's search: a dynamic program over (layer, memory) per pipeline stage, outer loops over the
pipeline degree and the global batch size, stage partitioning, baselines as restricted spaces, and the Plan.

Used in: book/galvatron/03_the_search.ipynb.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass

import numpy as np

from .cost import cost_tables, default_chunks, layer_memory_mb, other_memory_mb
from .profiles import ClusterProfile, ModelProfile
from .strategies import Strategy, check_power_of_two, generate

PLAN_FIELDS = ("pp_deg", "tp_sizes_enc", "tp_consecutive_flags", "dp_types_enc", "global_bsz", "chunks")


# ------------------------------------------------------------------------------------------------ the DP
@dataclass(frozen=True)
class DPResult:
    """Optimum of one stage: total seconds, the strategy index per layer, the memory used (MB)."""

    feasible: bool
    cost_s: float
    choice: tuple
    mem_mb: int


def _ints(mem_mb) -> np.ndarray:
    return np.ceil(np.asarray(mem_mb, float) - 1e-9).astype(np.int64)


def viterbi(time_s, trans_s) -> tuple[float, tuple]:
    """Cheapest per-layer choice ignoring memory (time + transitions), O(L S^2)."""
    time_s, trans_s = np.asarray(time_s, float), np.asarray(trans_s, float)
    L, S = time_s.shape
    f = time_s[0].copy()
    back = np.zeros((L, S), dtype=np.int64)
    for i in range(1, L):
        tot = f[:, None] + trans_s[i]
        back[i] = np.argmin(tot, axis=0)
        f = tot[back[i], np.arange(S)] + time_s[i]
    s = int(np.argmin(f))
    choice = [s]
    for i in range(L - 1, 0, -1):
        s = int(back[i, s])
        choice.append(s)
    return float(np.min(f)), tuple(reversed(choice))


def dp_tables(time_s, mem_mb, trans_s, budget_mb: int):
    """The DP tables: ``fs[i]`` holds f after layer i for memory levels ``lo[i] .. lo[i] + len(fs[i]) - 1``
    (MB), one column per strategy; inf where nothing fits. Used by ``dp_solve`` and shown in 03_the_search."""
    time_s, trans_s = np.asarray(time_s, float), np.asarray(trans_s, float)
    mem = _ints(mem_mb)
    L, S = time_s.shape
    E = int(math.floor(budget_mb))
    if E < mem.min(axis=1).sum():
        raise ValueError(f"budget {E} MB is below the least memory any assignment needs ({mem.min(axis=1).sum()} MB)")
    # Only memory levels a path to f[L-1][E] can visit matter: after layer i, at least the minimum memory of
    # layers <= i is used, and at most E minus the minimum of the layers still to come.
    mn, mx = mem.min(axis=1), mem.max(axis=1)
    pre_min = np.cumsum(mn)
    suf_min = np.concatenate([np.cumsum(mn[::-1])[::-1][1:], [0]])
    suf_max = np.concatenate([np.cumsum(mx[::-1])[::-1][1:], [0]])
    lo = np.maximum(pre_min, E - suf_max)
    hi = E - suf_min
    fs = []
    f = np.full((hi[0] - lo[0] + 1, S), np.inf)
    for s in range(S):
        f[max(mem[0, s] - lo[0], 0):, s] = time_s[0, s]
    fs.append(f)
    for i in range(1, L):
        # g[u, s] = min over the previous strategy s' of f[u, s'] + trans[s', s]
        g = np.min(f[:, None, :] + trans_s[i].T[None, :, :], axis=2)
        nf = np.full((hi[i] - lo[i] + 1, S), np.inf)
        for s in range(S):
            u0 = lo[i] - mem[i, s]                       # source level of the window's first row
            skip = max(lo[i - 1] - u0, 0)                 # rows whose source is below the reachable minimum
            src0 = u0 + skip - lo[i - 1]
            n_rows = nf.shape[0] - skip
            if n_rows > 0:
                nf[skip:, s] = g[src0:src0 + n_rows, s] + time_s[i, s]
        f = nf
        fs.append(f)
    return fs, lo


def dp_solve(time_s, mem_mb, trans_s, budget_mb: int, shortcut: bool = True) -> DPResult:
    """Exact minimum of sum_i time[i, s_i] + trans[i, s_{i-1}, s_i] subject to sum_i mem[i, s_i] <= budget.

    f[v, s] = least time of the layers so far using at most v MB with the last layer under s (capacity-style
    start f = 0). Memory is in whole MB (rounded up). Vectorised over v and s; backtracking recomputes the
    argmin over the previous strategy along the chosen path only. ``shortcut``: return the unconstrained
    optimum (Viterbi) directly when it fits.
    """
    time_s = np.asarray(time_s, float)
    trans_s = np.asarray(trans_s, float)
    mem = _ints(mem_mb)
    L, S = time_s.shape
    budget = int(math.floor(budget_mb))
    inf = DPResult(False, math.inf, (), 0)
    if budget < 0 or mem.min(axis=1).sum() > budget:
        return inf
    # Shortcut: if the unconstrained optimum fits, it is the answer.
    c0, ch0 = viterbi(time_s, trans_s)
    used0 = int(sum(mem[i, s] for i, s in enumerate(ch0)))
    if shortcut and used0 <= budget:
        return DPResult(True, c0, ch0, used0)
    E = min(budget, int(mem.max(axis=1).sum()))
    fs, lo = dp_tables(time_s, mem, trans_s, E)
    f = fs[-1]
    s = int(np.argmin(f[E - lo[L - 1]]))
    best = float(f[E - lo[L - 1], s])
    if not np.isfinite(best):
        return inf
    v, choice = E, [s]
    for i in range(L - 1, 0, -1):
        v -= mem[i, s]
        row = fs[i - 1][v - lo[i - 1]]
        s = int(np.argmin(row + trans_s[i][:, s]))
        choice.append(s)
    choice = tuple(reversed(choice))
    used = int(sum(mem[i, s] for i, s in enumerate(choice)))
    return DPResult(True, best, choice, used)


def brute_force(time_s, mem_mb, trans_s, budget_mb: int) -> DPResult:
    """Enumerate every assignment (S^L): the oracle for ``dp_solve`` on tiny instances."""
    import itertools

    time_s, trans_s, mem = np.asarray(time_s, float), np.asarray(trans_s, float), _ints(mem_mb)
    L, S = time_s.shape
    best = DPResult(False, math.inf, (), 0)
    for ch in itertools.product(range(S), repeat=L):
        used = int(sum(mem[i, s] for i, s in enumerate(ch)))
        if used > budget_mb:
            continue
        c = sum(time_s[i, s] for i, s in enumerate(ch)) + sum(trans_s[i, ch[i - 1], ch[i]] for i in range(1, L))
        if c < best.cost_s:
            best = DPResult(True, float(c), ch, used)
    return best


# ------------------------------------------------------------------------------------------------ the Plan
def _enc(x) -> str:
    return ",".join(str(int(v)) for v in x)


def _dec(x, name) -> tuple:
    if isinstance(x, str):
        x = [v for v in x.split(",") if v.strip() != ""]
    try:
        return tuple(int(v) for v in x)
    except (TypeError, ValueError):
        raise ValueError(f"field {name!r} must be a comma-separated list of integers; got {x!r}") from None


@dataclass(frozen=True)
class Plan:
    """A layer-wise hybrid-parallel plan in the published format (spec 3.5), plus our estimates.

    Per-layer tuples have one entry per layer; ``pp_division`` gives layers per stage; ``world_size`` is the
    GPU count. ``est_*`` are cost-model estimates (None when the plan was not estimated).
    """

    pp_deg: int
    tp_sizes_enc: tuple
    tp_consecutive_flags: tuple
    dp_types_enc: tuple
    global_bsz: int
    chunks: int
    world_size: int
    pp_division: tuple = ()
    checkpoint: tuple = ()
    model: str = ""
    est_iter_s: float | None = None
    est_throughput_samples_per_s: float | None = None
    est_mem_mb_per_device: float | None = None

    def __post_init__(self):
        n = len(self.tp_sizes_enc)
        check_power_of_two(self.world_size, "world_size")
        check_power_of_two(self.pp_deg, "pp_deg")
        if n == 0:
            raise ValueError("a plan needs at least one layer; tp_sizes_enc is empty")
        for name in ("tp_consecutive_flags", "dp_types_enc") + (("checkpoint",) if self.checkpoint else ()):
            if len(getattr(self, name)) != n:
                raise ValueError(f"{name} has {len(getattr(self, name))} entries; tp_sizes_enc has {n} layers")
            if any(v not in (0, 1) for v in getattr(self, name)):
                raise ValueError(f"{name} entries must be 0 or 1; got {getattr(self, name)}")
        for t in self.tp_sizes_enc:
            check_power_of_two(int(t), "tp size")
            if self.pp_deg * t > self.world_size:
                raise ValueError(f"pp_deg {self.pp_deg} x tp {t} exceeds world_size {self.world_size}")
            if self.global_bsz % (self.world_size // (self.pp_deg * t)):
                raise ValueError(f"global_bsz {self.global_bsz} is not divisible by the data-parallel degree "
                                 f"{self.world_size // (self.pp_deg * t)} of a tp={t} layer")
        if self.global_bsz < 1 or self.chunks < 1:
            raise ValueError(f"global_bsz and chunks must be >= 1; got {self.global_bsz}, {self.chunks}")
        if self.pp_division:
            if len(self.pp_division) != self.pp_deg or sum(self.pp_division) != n or min(self.pp_division) < 1:
                raise ValueError(f"pp_division {self.pp_division} must have pp_deg={self.pp_deg} positive entries "
                                 f"summing to the {n} layers")
        elif n % self.pp_deg:
            raise ValueError(f"{n} layers do not split evenly into pp_deg={self.pp_deg}; give pp_division")
        else:  # normalise: the even division and no checkpointing are written out explicitly
            object.__setattr__(self, "pp_division", (n // self.pp_deg,) * self.pp_deg)
        if not self.checkpoint:
            object.__setattr__(self, "checkpoint", (0,) * n)

    @property
    def n_layers(self) -> int:
        return len(self.tp_sizes_enc)

    def stage_sizes(self) -> tuple:
        return self.pp_division or (self.n_layers // self.pp_deg,) * self.pp_deg

    def strategies(self) -> list[Strategy]:
        ck = self.checkpoint or (0,) * self.n_layers
        return [Strategy.from_shape(self.pp_deg, t, self.world_size // (self.pp_deg * t), bool(d), bool(c), bool(k))
                for t, c, d, k in zip(self.tp_sizes_enc, self.tp_consecutive_flags, self.dp_types_enc, ck)]

    def to_dict(self) -> dict:
        d = {"pp_deg": self.pp_deg, "tp_sizes_enc": _enc(self.tp_sizes_enc),
             "tp_consecutive_flags": _enc(self.tp_consecutive_flags), "dp_types_enc": _enc(self.dp_types_enc),
             "global_bsz": self.global_bsz, "chunks": self.chunks,
             "checkpoint": _enc(self.checkpoint or (0,) * self.n_layers),
             "pp_division": _enc(self.stage_sizes()), "world_size": self.world_size, "model": self.model}
        for k in ("est_iter_s", "est_throughput_samples_per_s", "est_mem_mb_per_device"):
            if getattr(self, k) is not None:
                d[k] = getattr(self, k)
        return d

    @classmethod
    def from_dict(cls, d: dict, world_size: int | None = None) -> "Plan":
        """Read the published format. ``world_size`` (if given) must match the plan's."""
        if not isinstance(d, dict):
            raise ValueError(f"a plan must be a JSON object; got {type(d).__name__}")
        missing = [k for k in PLAN_FIELDS if k not in d]
        if missing:
            raise ValueError(f"plan is missing field(s) {missing}; required: {list(PLAN_FIELDS)}")
        ws = d.get("world_size", world_size)
        if ws is None:
            raise ValueError("plan has no 'world_size'; pass world_size=")
        if world_size is not None and int(ws) != int(world_size):
            raise ValueError(f"plan was made for world_size={ws}; this run has world_size={world_size}")
        tp = _dec(d["tp_sizes_enc"], "tp_sizes_enc")
        ck = _dec(d["checkpoint"], "checkpoint") if "checkpoint" in d else ()
        div = _dec(d["pp_division"], "pp_division") if "pp_division" in d else ()
        return cls(pp_deg=int(d["pp_deg"]), tp_sizes_enc=tp,
                   tp_consecutive_flags=_dec(d["tp_consecutive_flags"], "tp_consecutive_flags"),
                   dp_types_enc=_dec(d["dp_types_enc"], "dp_types_enc"), global_bsz=int(d["global_bsz"]),
                   chunks=int(d["chunks"]), world_size=int(ws), pp_division=div, checkpoint=ck,
                   model=str(d.get("model", "")), est_iter_s=d.get("est_iter_s"),
                   est_throughput_samples_per_s=d.get("est_throughput_samples_per_s"),
                   est_mem_mb_per_device=d.get("est_mem_mb_per_device"))

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1)

    @classmethod
    def from_json(cls, text: str, world_size: int | None = None) -> "Plan":
        try:
            d = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"plan is not valid JSON: {e}") from None
        return cls.from_dict(d, world_size)

    @classmethod
    def from_strategies(cls, strategies: list[Strategy], global_bsz: int, chunks: int, pp_division=(),
                        model: str = "", **est) -> "Plan":
        s0 = strategies[0]
        return cls(pp_deg=s0.pp, tp_sizes_enc=tuple(s.tp for s in strategies),
                   tp_consecutive_flags=tuple(int(s.tp_consec) for s in strategies),
                   dp_types_enc=tuple(int(s.sdp) for s in strategies), global_bsz=int(global_bsz),
                   chunks=int(chunks), world_size=s0.n_gpus, pp_division=tuple(pp_division),
                   checkpoint=tuple(int(s.ckpt) for s in strategies), model=model, **est)

    def summary(self) -> str:
        names = [s.code for s in self.strategies()]
        runs, prev, n = [], None, 0
        for x in names + [None]:
            if x == prev:
                n += 1
                continue
            if prev is not None:
                runs.append(f"{n}x {prev}")
            prev, n = x, 1
        return f"B={self.global_bsz}, pp={self.pp_deg}, chunks={self.chunks}: " + ", ".join(runs)


# ------------------------------------------------------------------------------------------------ stages
def even_division(n_layers: int, pp: int) -> tuple:
    """Layers per stage as even as possible (earlier stages take the remainder)."""
    q, r = divmod(n_layers, pp)
    return tuple(q + (1 if k < r else 0) for k in range(pp))


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


def _stage_plan(model, cluster, strats, B, pp, budget_mb, chunks, uniform, cache, division_strats, step_mb=1):
    """Best assignment for one (B, pp): per-stage DPs. Returns (iter_s, strategies per layer, division,
    peak MB per device) or None if infeasible, plus the least memory any plan would need."""
    layers = model.layers()
    L = len(layers)
    first = strats[0]
    other = other_memory_mb(model, first, B)
    tabs = {}
    for lt in {id(x): x for x in layers}.values():
        tabs[id(lt)] = np.array([layer_memory_mb(lt, s, B) for s in strats])
    min_mem = [float(np.ceil(tabs[id(lt)] - 1e-9).min()) for lt in layers]
    # Stages are cut with the full space of this pp degree, so a restricted space gets the same stages.
    div_mem = [min(math.ceil(layer_memory_mb(lt, s, B) - 1e-9) for s in division_strats) for lt in layers]
    if model.uniform:
        division = even_division(L, pp)
        budgets = [budget_mb - other] * pp
        overheads = [other] * pp
    else:
        division = greedy_division(div_mem, other, pp)
        budgets = [budget_mb - other] + [budget_mb - model.context_mb] * (pp - 1)
        overheads = [other] + [model.context_mb] * (pp - 1)
    need = 0.0
    start = 0
    total, choice, peak = 0.0, [], 0.0
    ok = True
    for k, n in enumerate(division):
        stage_layers = layers[start:start + n]
        need = max(need, overheads[k] + sum(min_mem[start:start + n]))
        start += n
        if not ok:
            continue
        key = (tuple(id(x) for x in stage_layers), int(math.floor(budgets[k])), B, pp, uniform)
        if key not in cache:
            t, m, r = cost_tables(model, strats, B, cluster, chunks, layers=stage_layers)
            if uniform:
                best = DPResult(False, math.inf, (), 0)
                for si in range(len(strats)):
                    used = int(_ints(m[:, si]).sum())
                    c = float(t[:, si].sum())
                    if _ints(np.ceil(m[:, si] - 1e-9) / step_mb).sum() <= budgets[k] // step_mb and c < best.cost_s:
                        best = DPResult(True, c, (si,) * n, used)
                cache[key] = best
            else:
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


def search(model: ModelProfile, cluster: ClusterProfile, budget_gb: float, space: str = "full",
           strategies: list | None = None, batch_sizes=None, pp_degrees=None, ckpt: bool = False,
           uniform: bool = False, chunks: int | None = None, max_bsz: int = 1024, progress: bool = False,
           mem_step_mb: int | None = None) -> SearchResult:
    """Search the best plan for ``model`` on ``cluster`` with ``budget_gb`` GB per GPU.

    For each global batch size (multiples of the GPU count up to ``max_bsz``, stopping at the first one no
    pipeline degree fits) and each pipeline degree, run the per-stage DP over the strategies of that degree.
    Memory is binned in ``mem_step_mb`` MB (default 1 MB up to 16 GB, coarser above so the table has at most
    16k rows). ``space`` picks a baseline ('dp', 'sdp', 'tp', 'pp', 'dp+tp', 'dp+pp', '3d'); ``uniform=True`` forces
    one strategy for every layer (how the baseline systems run). Returns a SearchResult; an impossible
    budget gives ``feasible=False`` with the smallest budget that would fit.
    """
    t0 = time.perf_counter()
    n = cluster.n_gpus
    check_power_of_two(n)
    if not isinstance(model, ModelProfile) or not isinstance(cluster, ClusterProfile):
        raise ValueError("search needs a ModelProfile and a ClusterProfile (see lib.galvatron.profiles)")
    if not budget_gb > 0:
        raise ValueError(f"budget_gb must be > 0; got {budget_gb!r}")
    strategies = generate(n, ckpt=ckpt, space=space) if strategies is None else list(strategies)
    if not strategies:
        raise ValueError(f"space {space!r} has no strategies for {n} GPUs")
    budget_mb = budget_gb * 1024.0
    # 1 MB bins as in the paper; large budgets use coarser bins (memory rounded up, so plans stay feasible)
    step_mb = int(mem_step_mb) if mem_step_mb else max(1, math.ceil(budget_mb / 16384))
    if step_mb < 1:
        raise ValueError(f"mem_step_mb must be >= 1; got {mem_step_mb!r}")
    L = model.n_layers
    pps = sorted({s.pp for s in strategies if s.pp <= L})
    if pp_degrees is not None:
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
            m = chunks if chunks is not None else default_chunks(B, pp, n)
            full = [s for s in generate(n, ckpt=ckpt) if s.pp == pp]
            res, need = _stage_plan(model, cluster, strats, B, pp, budget_mb, m, uniform, cache, full, step_mb)
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
                best = (thr, B, m, choice, division, iter_s, peak)
        if not any_ok:
            break
    elapsed = time.perf_counter() - t0
    if best is None:
        need_gb = min_need / 1024.0
        msg = (f"no feasible plan for {model.name} on {n} GPUs with {budget_gb:g} GB per GPU in space {space!r}: "
               f"the smallest plan (global batch {bszs[0]}) needs at least {need_gb:.2f} GB per GPU")
        return SearchResult(False, None, msg, need_gb, tuple(cands), elapsed, space, len(strategies))
    thr, B, m, choice, division, iter_s, peak = best
    plan = Plan.from_strategies(choice, B, m, pp_division=division, model=model.name, est_iter_s=iter_s,
                                est_throughput_samples_per_s=thr, est_mem_mb_per_device=peak)
    msg = f"best: {thr:.2f} samples/s at global batch {B}, pp={plan.pp_deg}"
    return SearchResult(True, plan, msg, None, tuple(cands), elapsed, space, len(strategies))


def evaluate_plan(plan: Plan, model: ModelProfile, cluster: ClusterProfile) -> dict:
    """Re-estimate a plan with the cost model: iteration seconds, throughput, peak MB per device."""
    from .cost import layer_time_s, transition_s

    if plan.n_layers != model.n_layers:
        raise ValueError(f"plan has {plan.n_layers} layers; model {model.name!r} has {model.n_layers}")
    if plan.world_size != cluster.n_gpus:
        raise ValueError(f"plan is for world_size={plan.world_size}; cluster {cluster.name!r} has {cluster.n_gpus}")
    strats, layers, B = plan.strategies(), model.layers(), plan.global_bsz
    first = [s for s in generate(cluster.n_gpus) if s.pp == plan.pp_deg][0]
    other = other_memory_mb(model, first, B)
    t, start, peak = 0.0, 0, 0.0
    for k, n in enumerate(plan.stage_sizes()):
        mem = other if (k == 0 or model.uniform) else model.context_mb
        for i in range(start, start + n):
            t += layer_time_s(layers[i], strats[i], B, cluster, plan.chunks, model.extra_overhead_ms)
            if i > start:
                t += transition_s(layers[i - 1], strats[i - 1], strats[i], B, cluster)
            mem += math.ceil(layer_memory_mb(layers[i], strats[i], B) - 1e-9)
        peak = max(peak, mem)
        start += n
    return {"iter_s": t, "throughput": B / t, "mem_mb": peak}
