"""What "From plan to run" prints: the plans it checks, their check results, the profile, the estimated-against-
measured rows and memory as HTML tables, the figure, and the verdicts its prose quotes (glue text).

Pure functions of what ``rt_eval`` and the launcher return (no process is started here), so the chapter's cells
stay short and every sentence-building step is tested. Used in: book/galvatron/04_from_plan_to_run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from lib.html_table import HTMLTable

from .grid import Layout
from .evaluate import median_abs_error
from .plan import LayerStrategy, RunPlan, summary_of_label
from .tp import plan_transition

#: The paper's Slice-Gather example (TP4 -> DP4 needs no communication), its reverse, and a strided case.
TRANSITION_CASES = {
    "TP4 -> DP4": (Layout(4, 1), Layout(1, 4)),
    "DP4 -> TP4": (Layout(1, 4), Layout(4, 1)),
    "TP2* x DP2 -> TP2 x DP2*": (Layout(2, 2, True), Layout(2, 2, False)),
}
SDP_NAMES = {"fsdp2": "FSDP2's fully_shard", "manual": "the hand-written fallback"}


def plural(n: int, word: str) -> str:
    """``"1 rank"``, ``"2 ranks"``."""
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def device_label(device: str, world_size: int, gpu_name: str | None = None, machine: str | None = None,
                 cores: int | None = None) -> str:
    """Where the chapter's times are measured, e.g. ``cpu with gloo, 2 ranks on x86_64 (2 cores)``."""
    if device.startswith("cuda"):
        return f"cuda with NCCL, {world_size} x {gpu_name or 'GPU'}"
    where = f" on {machine}" if machine else ""
    return f"cpu with gloo, {plural(world_size, 'rank')}{where}" + (f" ({plural(cores, 'core')})" if cores else "")


def model_text(cfg, global_bsz: int) -> str:
    """One short line: the model's shape and the global batch."""
    return (f"model: {cfg.n_layer} layers, d_model {cfg.d_model}, {cfg.n_head} heads, sequence {cfg.seq_len}, "
            f"vocabulary {cfg.vocab}; global batch {global_bsz}")


def transition_rows(cases: dict = TRANSITION_CASES, stage_size: int = 4) -> HTMLTable:
    """Slice-Gather between two layouts of one stage: slice only, or all-gather in which rank groups."""
    rows = []
    for name, (a, b) in cases.items():
        fam = plan_transition(a, b, stage_size)
        groups = sorted({fam(j) for j in range(stage_size)})
        verdict = ("slice only (no communication)" if all(len(g) == 1 for g in groups)
                   else "all-gather in rank groups " + ", ".join(str(list(g)) for g in groups))
        rows.append((name, verdict))
    return HTMLTable(("between layers", "what moves"), tuple(rows), f"a stage of {stage_size} ranks",
                     nowrap=(0,), left=(0, 1))


def check_plans(world_size: int, n_layer: int, n_head: int, global_bsz: int) -> list[RunPlan]:
    """Every uniform strategy of this world size (pp, tp, dp powers of two; SDP and the TP order where they
    mean something; TP only where it divides the heads), plus one mixed per-layer plan."""
    out, pp = [], 1
    while pp <= min(world_size, n_layer):
        stage, tp = world_size // pp, 1
        while tp <= stage:
            dp = stage // tp
            for consecutive in ((True, False) if tp > 1 and dp > 1 else (True,)):
                for sdp in ((False, True) if dp > 1 else (False,)):
                    if n_head % tp == 0:
                        out.append(RunPlan.uniform(world_size, n_layer, pp, tp, sdp, consecutive, global_bsz,
                                                   2 if pp > 1 else 1))
            tp *= 2
        pp *= 2
    mixed = tuple(LayerStrategy(world_size if i % 2 == 0 else 1, 1 if i % 2 == 0 else world_size, i % 4 == 1)
                  for i in range(n_layer))
    if n_head % world_size == 0:
        out.append(RunPlan(world_size, 1, mixed, global_bsz))
    return out


@dataclass(frozen=True)
class CheckSummary:
    """Per plan: the largest |parameter - reference| and |loss - reference| over the ranks; SDP's implementation."""

    labels: tuple
    param_err: tuple
    loss_err: tuple
    sdp_impls: tuple

    @property
    def worst_param(self) -> float:
        return max(self.param_err)

    @property
    def worst_loss(self) -> float:
        return max(self.loss_err)

    def ok(self, tol: float = 1e-4) -> bool:
        return self.worst_param < tol and self.worst_loss < tol


def summarise_checks(ranks: list[dict], plans: list[RunPlan]) -> CheckSummary:
    """Fold the ranks' ``check`` results (one entry per plan, in order) into one row per plan."""
    n = len(plans)
    if any(len(r["checks"]) != n for r in ranks):
        raise ValueError(f"every rank must report {n} checks; got {[len(r['checks']) for r in ranks]}")
    return CheckSummary(
        labels=tuple(p.label() for p in plans),
        param_err=tuple(max(r["checks"][i]["param_err"] for r in ranks) for i in range(n)),
        loss_err=tuple(max(r["checks"][i]["loss_err"] for r in ranks) for i in range(n)),
        sdp_impls=tuple(sorted({c["sdp_impl"] for r in ranks for c in r["checks"] if c.get("sdp_impl")})))


def checks_table(s: CheckSummary, label: str) -> HTMLTable:
    rows = tuple((summary_of_label(lab), f"{p:.1e}", f"{l:.1e}")
                 for lab, p, l in zip(s.labels, s.param_err, s.loss_err))
    return HTMLTable(("plan", "max |parameter − reference|", "max |loss − reference|"), rows, label,
                     nowrap=(0, 1, 2))


def checks_glue(s: CheckSummary) -> dict:
    impl = " and ".join(SDP_NAMES.get(i, i) for i in s.sdp_impls) or "nothing (no SDP plan at this world size)"
    return {"n_checked": f"{len(s.labels)}", "worst_param_err": f"{s.worst_param:.1e}", "sdp_ran_as": impl}


def profile_text(out: dict) -> str:
    """The profile ``profile_search_run`` measured, as short lines (ms, MB)."""
    model, cluster = out["model"], out["cluster"]
    lay = model.layer_types[0]
    acts = ", ".join(f"TP{k}: {v:.3f} MB" for k, v in sorted(lay.act_mb_per_sample.items(), key=lambda kv: int(kv[0])))
    ar = ", ".join(f"group of {k.split('_')[1]}: {v:.2f}" for k, v in sorted(cluster.allreduce_ms_per_mb.items()))
    p2p = f"{cluster.p2p_ms_per_mb:.2f} ms/MB" if cluster.p2p_ms_per_mb is not None else "not measured"
    return "\n".join([
        f"forward, per sample per layer: {lay.fwd_ms_per_sample:.3f} ms (1/3 of forward + backward)",
        f"activations per sample per layer: {acts}",
        f"all-reduce (ms/MB): {ar}; point-to-point {p2p}",
        f"overlap slowdown {cluster.overlap_coe:.2f}; non-layer work {out['other_s'] * 1e3:.2f} ms per iteration",
        f"searched plan: {out['plans']['galvatron'].summary()}" if "galvatron" in out["plans"]
        else "searched plan: none fits the budget",
        f"speed drift between profile and runs: x{out['drift']:.2f} (1 = steady)",
    ])


def rows_table(rows: list, caption: str) -> HTMLTable:
    """Estimated against measured, one row per plan (ms per iteration, relative errors)."""
    body = tuple((r["name"], summary_of_label(r["plan"]), f"{r['measured_s'] * 1e3:.1f}", f"{r['est_s'] * 1e3:.1f}", f"{r['err']:+.0%}",
                  f"{r['est_no_overlap_s'] * 1e3:.1f}", f"{r['err_no_overlap']:+.0%}") for r in rows)
    head = ("plan", "layers", "measured (ms)", "estimate (ms)", "error", "κ = 1 (ms)", "error, κ = 1")
    return HTMLTable(head, body, caption, nowrap=(0, 4, 6), left=(0, 1))


def memory_table(rows: list, caption: str) -> HTMLTable:
    """Estimated per-rank memory next to what the device reports: the CUDA allocator's peak (comparable), or on
    a CPU the process's peak resident memory (the whole runtime: context only, not comparable)."""
    cuda = all(r.get("peak_cuda_mb") is not None for r in rows)
    got = "allocator peak (MB)" if cuda else "process peak resident (MB)"
    body = tuple((r["name"], f"{r['est_mem_mb']:.1f}",
                  f"{r['peak_cuda_mb']:.1f}" if cuda else f"{r['peak_rss_mb']:.0f}") for r in rows)
    note = "" if cuda else "; on CPU the resident peak is the whole runtime's: context, not comparable"
    return HTMLTable(("plan", "estimate per rank (MB)", f"measured: {got}"), body, caption + note)


def verdict_glue(rows: list, overlap_coe: float, drift: float = 1.0) -> dict:
    """The numbers and verdicts the prose quotes about estimated against measured."""
    by_name = {r["name"]: r for r in rows}
    worst = max(rows, key=lambda r: abs(r["err"]))
    sdp = by_name.get("sdp")
    if sdp is None:
        sdp_verdict = "no SDP plan ran"
    elif abs(sdp["err"]) <= 0.10:
        sdp_verdict = "within 10% of its estimate after all"
    else:
        slow = sdp["measured_s"] / sdp["est_s"]
        sdp_verdict = f"{slow:.2f} times its estimate" if slow > 1 else f"faster than estimated ({slow:.2f} x)"
    shift = max(rows, key=lambda r: r["est_s"] / r["est_no_overlap_s"])
    rel = shift["est_s"] / shift["est_no_overlap_s"] - 1
    overlap = (f"by at most {rel:.1%} ({shift['name']})" if rel >= 0.0005 else
               f"not at all: the measured slowdown is {overlap_coe:.2f}, so both estimates agree")
    if drift <= 1.2:
        drift_text = (f"The machine kept its speed between the profile and the runs (drift x{drift:.2f}), so "
                      "the gaps below are the cost model's.")
    else:
        drift_text = (f"The machine did not keep its speed: the layer timed just before and after the runs "
                      f"differs from the profile by a factor of {drift:.2f}. Part of every gap below is this "
                      "drift (other work on a shared machine), not the cost model.")
    est, mem = [r["est_mem_mb"] for r in rows], [r["peak_rss_mb"] for r in rows]
    fastest = min(rows, key=lambda r: r["measured_s"])
    chosen = by_name.get("galvatron")
    if chosen is None:
        choice = "The search found no plan within the budget"
    elif chosen["plan"] == fastest["plan"]:
        choice = "The searched plan was also the fastest measured"
    else:
        same = [r["name"] for r in rows if r["plan"] == chosen["plan"] and r["name"] != "galvatron"]
        what = f" (the same as {same[0]})" if same else ""
        choice = (f"The searched plan{what} was not the fastest measured: {fastest['name']} was, and the "
                  f"searched plan took {chosen['measured_s'] / fastest['measured_s'] - 1:.0%} longer")
    return {
        "err_median": f"{median_abs_error(rows):.0%}", "err_median_k1": f"{median_abs_error(rows, 'err_no_overlap'):.0%}",
        "worst_name": worst["name"], "worst_err": f"{worst['err']:+.0%}",
        "sdp_err": f"{sdp['err']:+.0%}" if sdp else "not run (no SDP plan fits)", "sdp_verdict": sdp_verdict,
        "dp_err": f"{by_name['dp']['err']:+.0%}" if "dp" in by_name else "not run",
        "overlap_shift": overlap, "overlap_coe": f"{overlap_coe:.2f}", "drift_text": drift_text,
        "choice_text": choice,
        "rss_vs_est": (f"{min(mem):.0f}-{max(mem):.0f} MB resident against {min(est):.0f}-{max(est):.0f} MB "
                       "estimated per rank"),
    }


def est_vs_measured_figure(rows: list, title: str):
    """Bars per plan: measured, the estimate with the measured overlap slowdown, and with none (kappa = 1)."""
    import plotly.graph_objects as go

    from lib import viz

    names = [r["name"] for r in rows]
    ms = lambda key: [round(r[key] * 1e3, 3) for r in rows]
    fig = go.Figure([
        go.Bar(name="measured", x=names, y=ms("measured_s"), marker_color=viz.PALETTE["primary"]),
        go.Bar(name="estimate, measured<br>overlap slowdown", x=names, y=ms("est_s"),
               marker_color=viz.PALETTE["secondary"]),
        go.Bar(name="estimate, no slowdown<br>(κ = 1)", x=names, y=ms("est_no_overlap_s"),
               marker_color=viz.PALETTE["neutral"]),
    ])
    fig.update_layout(barmode="group", yaxis_title="time per iteration (ms)", xaxis_title="plan")
    return viz.layout(fig, title)


def wrap_command(cmd: str, width: int = 78) -> str:
    """A shell command broken before its options (an option keeps its value) into lines of at most ``width``
    characters where the pieces allow, continued with a backslash and indented: what fits the book's column."""
    import shlex

    words = [("$NODE_RANK" if w == "__NODE_RANK__" else shlex.quote(w))
             for w in shlex.split(cmd.replace("$NODE_RANK", "__NODE_RANK__"))]
    pieces = []  # an option with its value stays on one line
    for w in words:
        if pieces and not w.startswith("-") and pieces[-1].startswith("-") and " " not in pieces[-1]:
            pieces[-1] += " " + w
        else:
            pieces.append(w)
    lines, cur = [], ""
    for q in pieces:
        if cur and len(cur) + 1 + len(q) > width - 2:
            lines.append(cur + " \\")
            cur = "    " + q
        else:
            cur = f"{cur} {q}" if cur else q
    return "\n".join(lines + [cur])


def relative_name(path: str, root: str) -> str:
    """``path`` relative to ``root`` (the repository), never absolute: what the chapter may print."""
    rel = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
    return rel if not rel.startswith("..") else os.path.basename(path)
