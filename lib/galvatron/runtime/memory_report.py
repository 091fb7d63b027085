"""The cost model's memory estimate of a plan, per pipeline stage, set beside what each rank measured.

The estimate is the cost model's own (``lib.galvatron.search.cost``, spec 2.3), summed over the layers of a
stage, in MB (2^20 bytes), split into the two terms it has:

* **model states**: ``layer_memory_mb`` at a batch of 0 (4 x P/tp: fp32 weights, gradients and Adam's two
  moments; x (1/dp + 0.025) under SDP), plus the profile's ``other_model_states_mb`` (embedding and head);
* **activations**: the rest of ``layer_memory_mb`` at the global batch (act[tp] x B/dp per layer: a GPipe
  stage keeps the activations of its whole local batch), plus the activation part of ``other_memory_mb``.

``other_memory_mb`` also holds ``context_mb`` (the CUDA context, 1024 MB in the published profiles, 0 in a
profile measured on a CPU), which no tensor count sees; it is reported as its own term. As in the VLDB
cost model, all of the "other" memory is charged to **every** stage (the runtime keeps the embedding on the
first stage and the head on the last). The estimate has **no transient term**: gathered SDP weights,
communication buffers and gradients of activations are measured but not estimated.

The measured side is ``memory.MemoryRecord``: the largest model states and activations of the step and its
peak. ``memory_comparison`` gives one row per rank and term; ``within`` says whether the estimate holds.
Used in: book/galvatron/04_from_plan_to_run.
"""

from __future__ import annotations

from lib.book import signed_pct

from .memory import CATEGORIES, TRANSIENT, MemoryRecord

MB = 2 ** 20
TERMS = ("model_states", "activations", "peak")
#: What the comparison accepts: the estimate of a term within 10 % of the measurement. Model states are a
#: count of parameters, so the estimate misses only by the SDP bias (0.025 of a layer) and by charging every
#: stage the embedding and the head; activations are profiled with the same saved-tensor count, so they miss
#: by the "other" activations a stage does not hold. A wrong factor (model states without the optimizer,
#: activations of one micro-batch) misses by far more.
TOLERANCE = 0.10


def search_plan_of(plan):
    """The search's ``Plan`` (whose strategies the cost model takes) for a ``RunPlan`` or a ``Plan``."""
    from ..search.plan import Plan

    if isinstance(plan, Plan):
        return plan
    return Plan(pp_deg=plan.pp, tp_sizes_enc=tuple(s.tp for s in plan.layers),
                tp_consecutive_flags=tuple(int(s.consecutive) for s in plan.layers),
                dp_types_enc=tuple(int(s.sdp) for s in plan.layers), global_bsz=plan.global_bsz,
                chunks=plan.chunks, world_size=plan.world_size, pp_division=tuple(plan.pp_division),
                checkpoint=tuple(int(s.ckpt) for s in plan.layers))


def stage_estimate(plan, model, stage: int, split: dict | None = None) -> dict:
    """The cost model's MB for one stage of ``plan`` (a ``RunPlan`` or search ``Plan``) on ``model`` (a
    ``ModelProfile``): ``model_states``, ``activations``, ``context`` and their sum ``peak``.

    ``split`` (``profiler.other_split``): our correction, the "other" memory charged where it lives, its
    first-stage share to the first stage and its last-stage share to the last, instead of all of it to
    every stage as the VLDB cost model does."""
    from ..search.cost import layer_memory_mb, other_memory_mb

    p = search_plan_of(plan)
    if not 0 <= stage < p.pp_deg:
        raise ValueError(f"stage {stage} is not a stage of this plan; stages are 0..{p.pp_deg - 1}")
    if model.n_layers != p.n_layers:
        raise ValueError(f"the plan has {p.n_layers} layers; the model profile {model.name!r} has "
                         f"{model.n_layers}")
    strategies, layers, B = p.strategies(), model.layers(), p.global_bsz
    start = sum(p.stage_sizes()[:stage])
    ids = range(start, start + p.stage_sizes()[stage])
    states = sum(layer_memory_mb(layers[i], strategies[i], 0) for i in ids)
    act = sum(layer_memory_mb(layers[i], strategies[i], B) for i in ids) - states
    s0 = strategies[start]
    other_act = other_memory_mb(model, s0, B) - other_memory_mb(model, s0, 0)
    share = {"states": 1.0, "act": 1.0}
    if split is not None:
        for k in share:
            first, last = split[k]
            share[k] = (first if stage == 0 else 0.0) + (last if stage == p.pp_deg - 1 else 0.0)
    states += model.other_model_states_mb * share["states"]
    act += other_act * share["act"]
    return {"model_states": states, "activations": act, "context": model.context_mb,
            "peak": states + act + model.context_mb}


def measured_terms(record: MemoryRecord) -> dict:
    """MB of what the estimate's terms correspond to: the step's largest model states and activations, its
    peak, and the transient part of that peak (no estimate term)."""
    return {"model_states": record.maxima["model_states"] / MB, "activations": record.maxima["activations"] / MB,
            "peak": record.peak_bytes / MB, "transient": record.transient_at_peak / MB}


def memory_comparison(plan, model, measured: list, split: dict | None = None) -> list[dict]:
    """One row per rank and term (``TERMS``): estimated MB, measured MB, relative error of the estimate.

    ``measured``: each rank's ``{"rank", "stage", "memory"}`` (a ``MemoryRecord`` or its dict), as a train
    job returns them. ``peak`` compares the estimate's sum with the measured peak, whose transient part
    (``transient_mb``, also in each row) the estimate does not have. ``split``: see ``stage_estimate``."""
    rows = []
    for m in sorted(measured, key=lambda r: r["rank"]):
        rec = m["memory"] if isinstance(m["memory"], MemoryRecord) else MemoryRecord.from_dict(m["memory"])
        est, got = stage_estimate(plan, model, int(m["stage"]), split), measured_terms(rec)
        for term in TERMS:
            if got[term] <= 0:
                raise ValueError(f"rank {m['rank']}: measured {term} is {got[term]} MB; nothing to compare with")
            rows.append({"rank": int(m["rank"]), "stage": int(m["stage"]), "term": term,
                         "estimated_mb": est[term], "measured_mb": got[term],
                         "error": est[term] / got[term] - 1, "transient_mb": got["transient"]})
    return rows


def within(rows: list, tol: float = TOLERANCE, terms=TERMS) -> bool:
    """Whether every row of ``terms`` has |error| <= ``tol``."""
    sel = [r for r in rows if r["term"] in terms]
    if not sel:
        raise ValueError(f"no rows of terms {list(terms)} to judge")
    return all(abs(r["error"]) <= tol for r in sel)


def worst(rows: list, terms=TERMS) -> dict:
    """The row of ``terms`` with the largest |error|."""
    return max((r for r in rows if r["term"] in terms), key=lambda r: abs(r["error"]))


def validate_summary(summary: dict) -> dict:
    """A run's summary (what ``python -m lib.galvatron run`` writes) with every rank's memory record checked
    (``MemoryRecord``: categories that add up to the peak); ``ValueError`` naming the rank and plan."""
    if not isinstance(summary, dict) or not isinstance(summary.get("ranks"), list):
        raise ValueError("run summary: must be an object with a list 'ranks'")
    for r in summary["ranks"]:
        for i, run in enumerate(r.get("runs", ())):
            if run.get("memory") is not None:
                try:
                    MemoryRecord.from_dict(run["memory"])
                except ValueError as e:
                    raise ValueError(f"run summary: rank {r.get('rank')}, plan {i}: {e}") from None
    return summary


# -- what the chapter runs and shows ----------------------------------------------------------------------

MEASURED = "measured on this kernel (CPU, gloo)"
ESTIMATED = "estimated by the cost model"


def memory_plans(world_size: int, n_layer: int, global_bsz: int, searched=None) -> dict:
    """The plans whose memory the chapter measures: DP, SDP, TP over the whole world, 2-stage pipelines with 2
    and 4 micro-batches in flight (where the batch allows), and the searched plan if given."""
    from .plan import RunPlan, from_search_plan

    W, out = world_size, {}
    out["dp"] = RunPlan.uniform(W, n_layer, 1, 1, False, True, global_bsz, 1)
    if W > 1:
        out["sdp"] = RunPlan.uniform(W, n_layer, 1, 1, True, True, global_bsz, 1)
        out["tp"] = RunPlan.uniform(W, n_layer, 1, W, False, True, global_bsz, 1)
    if W % 2 == 0 and n_layer >= 2:
        for m in (2, 4):
            if global_bsz % m == 0 and (global_bsz // m) % (W // 2) == 0:
                out[f"pp, m={m}"] = RunPlan.uniform(W, n_layer, 2, 1, False, True, global_bsz, m)
    if searched is not None:
        rp = searched if isinstance(searched, RunPlan) else from_search_plan(searched, W)
        same = [n for n, p in out.items() if p == rp]
        if same:  # the search chose a baseline: measured once, named both ways
            out = {(f"{n} (searched)" if n == same[0] else n): p for n, p in out.items()}
        else:
            out["searched"] = rp
    return out


def measure_memory(plans: dict, cfg, world_size: int, sdp_impl: str = "auto", device: str = "cpu",
                   backend: str = "gloo", timeout_s: float = 300.0) -> dict:
    """Run every plan for one timed step plus one counted step (Adam, so the model states are the cost
    model's four copies) on ``world_size`` local ranks in one spawn; name -> each rank's
    ``{"rank", "stage", "memory", "sdp_impl"}``."""
    from .launch import spawn_local

    names = list(plans)
    job = {"kind": "train", "plans": [plans[n].to_dict() for n in names], "model": cfg.to_dict(), "steps": 1,
           "warmup": 0, "optimizer": "adam", "sdp_impl": sdp_impl, "device": device, "backend": backend}
    ranks = spawn_local(job, world_size, timeout_s)
    return {n: [{"rank": r["rank"], "stage": r["runs"][i]["stage"], "memory": r["runs"][i]["memory"],
                 "sdp_impl": r["runs"][i]["sdp_impl"]} for r in ranks] for i, n in enumerate(names)}


def stage_rows(plans: dict, model, measured: dict, split: dict | None = None) -> list[dict]:
    """One row per plan and stage (the stage's rank with the largest measured peak): estimated and measured
    MB of each term, their errors, and the measured transient part of the peak (``split``: see
    ``stage_estimate``)."""
    out = []
    for name, plan in plans.items():
        rows = memory_comparison(plan, model, measured[name], split)
        for stage in sorted({r["stage"] for r in rows}):
            mine = [r for r in rows if r["stage"] == stage]
            rank = max((r for r in mine if r["term"] == "peak"), key=lambda r: r["measured_mb"])["rank"]
            by = {r["term"]: r for r in mine if r["rank"] == rank}
            label = name if getattr(plan, "pp", 1) == 1 else f"{name}, stage {stage}"
            row = {"name": label, "plan": plan.label(), "rank": rank, "stage": stage,
                   "transient_mb": by["peak"]["transient_mb"]}
            for t in TERMS:
                row[f"est_{t}_mb"], row[f"got_{t}_mb"] = by[t]["estimated_mb"], by[t]["measured_mb"]
                row[f"err_{t}"] = by[t]["error"]
            out.append(row)
    return out


def memory_table(rows: list, caption: str):
    """Per plan and stage, each term as "estimated / measured MB (error of the estimate)", and the transient
    part of the measured peak."""
    from lib.html_table import HTMLTable

    body = tuple((r["name"], *(f"{r[f'est_{t}_mb']:.2f} / {r[f'got_{t}_mb']:.2f} ({signed_pct(r[f'err_{t}'])})"
                               for t in TERMS), f"{r['transient_mb']:.2f}") for r in rows)
    head = ("plan", "model states", "activations", "peak", "transient")
    return HTMLTable(head, body, caption + "; each cell: estimated / measured MB (error of the estimate)",
                     nowrap=(0, 4))  # a cell may break at its spaces: measured numbers vary in width


def memory_figure(rows: list, title: str, measured: str = MEASURED):
    """Per plan and stage, two stacked bars: measured (model states, activations, transient) and estimated
    (model states, activations). MB per rank."""
    import plotly.graph_objects as go

    from lib import viz

    x = [[r["name"] for r in rows for _ in (0, 1)], ["meas.", "est."] * len(rows)]

    def both(got, est):
        return [round(v, 3) for r in rows for v in (got(r), est(r))]
    parts = [("model states", viz.PALETTE["primary"], lambda r: r["got_model_states_mb"],
              lambda r: r["est_model_states_mb"]),
             ("activations", viz.PALETTE["secondary"], lambda r: r["got_activations_mb"],
              lambda r: r["est_activations_mb"]),
             ("transient (no estimate)", viz.PALETTE["neutral"],
              lambda r: r["got_peak_mb"] - r["got_model_states_mb"] - r["got_activations_mb"], lambda r: 0.0)]
    fig = go.Figure([go.Bar(name=n, x=x, y=both(g, e), marker_color=c) for n, c, g, e in parts])
    fig.update_layout(barmode="stack", yaxis_title="memory per rank (MB)",
                      xaxis_title=f"meas.: {measured}; est.: {ESTIMATED}")
    return viz.layout(fig, title, height=460)


def measured_label(device: str) -> str:
    """How the figure names the measured side: ``MEASURED`` on a CPU, the same for CUDA with NCCL."""
    return MEASURED if device == "cpu" else "measured on this kernel (CUDA, NCCL)"


def weight_inflation(cfg, batch: int) -> dict:
    """The profiler's old mistake, measured: one block's activation MB per sample with its weights counted
    (``F.linear`` saves the weight for backward) and without, at a profiling batch of ``batch`` samples."""
    from .model import block_forward, init_params
    from .profiler import saved_bytes

    import torch

    w = {k: v.clone().requires_grad_() for k, v in init_params(cfg, 0)["blocks"][0].items()}
    x = torch.randn(batch, cfg.seq_len, cfg.d_model, generator=torch.Generator().manual_seed(0)).requires_grad_()
    fn = lambda: block_forward(x, w, cfg.n_head)  # noqa: E731
    with_w, without = saved_bytes(fn) / batch / MB, saved_bytes(fn, w.values()) / batch / MB
    return {"with_weights_mb": with_w, "without_mb": without, "inflation": with_w / without - 1}


def memory_findings(rows: list, measured: dict, model, cfg, profile_batch: int,
                    split_rows: list | None = None) -> dict:
    """Glue for the chapter's "where the memory model is wrong": each gap with its number. ``rows`` from
    ``stage_rows``; ``measured`` by plan name (``measure_memory``), including ``"sdp"``, ``"dp"`` and, if it
    ran, ``"sdp, hand-written"``; ``model`` the profile; ``cfg`` the runtime's model."""
    names = {n.replace(" (searched)", ""): n for n in measured}  # "dp (searched)" is still the DP plan
    measured = {b: measured[n] for b, n in names.items()}
    rows = [dict(r, name=r["name"].replace(" (searched)", "")) for r in rows]

    def mx(name, cat):
        return max(r["memory"]["maxima"][cat] for r in measured[name]) / MB

    out = memory_glue(rows)
    flat = [abs(r["err_activations"]) for r in rows if r["plan"].startswith("pp1[")]  # no pipeline
    out["act_err_flat"] = f"{max(flat):.1%}" if flat else "not measured"
    w = weight_inflation(cfg, profile_batch)
    out["act_inflation"] = (f"{w['with_weights_mb']:.3f} MB per sample with the weights against "
                            f"{w['without_mb']:.3f} MB without ({w['inflation']:+.0%}) at a profiling batch "
                            f"of {profile_batch}")
    pp0 = [r for r in rows if r["stage"] == 0 and r["name"].startswith("pp")]
    pp_last = [r for r in rows if r["name"].startswith("pp") and r["stage"] > 0]
    out["pp_stage_act_err"] = (f"{pp0[0]['err_activations']:+.1%} on the first stage against "
                               f"{pp_last[0]['err_activations']:+.1%} on the last" if pp0 and pp_last
                               else "not measured (no pipeline ran)")
    if split_rows:  # the same rows with the "other" memory charged where it lives (``split``)
        fixed = [r for r in split_rows if r["name"].startswith("pp") and r["stage"] == 0]
        worst_t = {t: max(abs(r[f"err_{t}"]) for r in split_rows) for t in ("model_states", "activations")}
        out["pp_split_err"] = (f"{signed_pct(fixed[0]['err_activations'])} on the first stage" if fixed
                               else "not measured (no pipeline ran)")
        out["split_worst"] = (f"{worst_t['model_states']:.1%} for model states and "
                              f"{worst_t['activations']:.1%} for activations")
    else:
        out["pp_split_err"] = out["split_worst"] = "not computed"
    layer = model.layer_types[0]
    bias = 4 * layer.param_mb * 0.025 * model.n_layers
    out["sdp_bias_mb"] = f"{bias:.2f} MB"
    out["fsdp2_gathered"] = f"{mx('sdp', 'gathered_params'):.2f} MB" if "sdp" in measured else "not measured"
    manual = "sdp, hand-written"
    if manual in measured:
        r = next(r for r in rows if r["name"] == manual)
        out["manual_gathered"] = f"{mx(manual, 'gathered_params'):.2f} MB"
        out["manual_peak_err"] = f"{r['err_peak']:+.1%}"
    else:
        out["manual_gathered"] = out["manual_peak_err"] = "not measured"
    shares = [r["transient_mb"] / r["got_peak_mb"] for r in rows]
    out["transient_range"] = f"{min(shares):.0%} to {max(shares):.0%}"
    if "dp" in measured:
        grads = (model.n_layers * layer.param_mb + model.other_model_states_mb / 4)
        out["dp_comm_max"] = f"{mx('dp', 'comm_buffers'):.2f} MB"
        out["dp_grad_mb"] = f"{grads:.2f} MB"
    else:
        out["dp_comm_max"] = out["dp_grad_mb"] = "not measured"
    return out


def format_memory_rows(rows: list) -> str:
    """A plain-text table of ``stage_rows`` (what ``python -m lib.galvatron memory`` prints): per plan and
    stage, each term as estimated / measured MB (error), and the measured transient MB."""
    head = f"{'plan':<22} {'model states':>24} {'activations':>24} {'peak':>24} {'transient':>9}"
    lines = [head, "-" * len(head)]
    for r in rows:
        cells = [f"{r[f'est_{t}_mb']:.2f} / {r[f'got_{t}_mb']:.2f} ({signed_pct(r[f'err_{t}'])})" for t in TERMS]
        lines.append(f"{r['name'][:22]:<22} " + " ".join(f"{c:>24}" for c in cells) + f" {r['transient_mb']:9.2f}")
    return "\n".join(lines)


def memory_glue(rows: list) -> dict:
    """The numbers the chapter's prose quotes: the tolerance and the largest error of each term."""
    out = {"mem_tol": f"{TOLERANCE:.0%}"}
    for t in TERMS:
        w = max(rows, key=lambda r: abs(r[f"err_{t}"]))
        out[f"mem_worst_{t}"] = f"{signed_pct(w[f'err_{t}'])} ({w['name']})"
        inside = sum(abs(r[f"err_{t}"]) <= TOLERANCE for r in rows)
        out[f"mem_within_{t}"] = f"{inside} of {len(rows)}"
    return out


__all__ = ["TERMS", "TOLERANCE", "CATEGORIES", "TRANSIENT", "search_plan_of", "stage_estimate",
           "measured_terms", "memory_comparison", "within", "worst", "validate_summary", "memory_plans",
           "measure_memory", "stage_rows", "memory_table", "memory_figure", "memory_glue", "MEASURED", "ESTIMATED",
           "measured_label", "weight_inflation", "memory_findings", "format_memory_rows"]
