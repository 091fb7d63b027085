"""The numbers and tables the Galvatron chapters show, computed from the cost model and the search.

Chapters stay a few lines per cell: each function here takes results (or runs the searches a section needs) and
returns plain values, small HTML tables, or a dict of formatted numbers and names for the chapter's
``{glue:text}`` roles. No function here writes the chapters' sentences: the prose is written by hand in the
chapters, beside claim cells that assert it. Nothing here changes what the cost model or the search compute.

Used in: book/galvatron/01_the_space, 02_the_cost_model, 03_the_search.
"""

from __future__ import annotations

import html
import math
import re
import textwrap
import time

import numpy as np

from lib.book import glue, quoted, simulated
from .cost import cost_tables, layer_memory_mb
from .strategies import Strategy, generate

#: The paper, as every quoted number of Part II names it.
PAPER = quoted("the paper (Miao et al., VLDB 2023)")

#: The baseline spaces of chapter 7 (``space=`` of ``search``) and what each one is.
BASELINES = {
    "dp": "pure data parallelism (PyTorch DDP): every GPU holds the whole layer",
    "sdp": "pure sharded data parallelism (ZeRO-3 / FSDP) over all GPUs",
    "tp": "pure tensor parallelism (Megatron-style) over all GPUs",
    "pp": "a pure pipeline with one stage per GPU (GPipe)",
    "dp+tp": "Megatron-LM: TP on consecutive GPUs inside, DP outside, no PP",
    "dp+pp": "DeepSpeed-style: pipeline stages, each data parallel, no TP",
    "3d": "PP x DP x TP (TP inside), no sharding",
}
PURE, HYBRID = ("dp", "sdp", "tp", "pp"), ("dp+tp", "dp+pp", "3d")


# ----------------------------------------------------------------------------------------------- helpers
def sim_label(cluster, model=None) -> str:
    """The provenance label of a cost-model number, e.g. ``simulated with cluster profile rtx-titan-8 ...``."""
    what = cluster.name + (f" and layer profile {model.name}" if model is not None else "")
    return simulated(what, kind="cluster profile")


def glue_all(values: dict) -> None:
    """Glue every ``name: value`` of ``values`` for the chapter's prose (returns None, so a cell ending with
    it shows nothing)."""
    for k, v in values.items():
        glue(k, v)


def plans_text(n_strategies: int, n_layers: int) -> str:
    """The number of plans n^L in scientific notation with superscripts, e.g. ``22³² ≈ 9.0 × 10⁴²``."""
    sup = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")
    e10, mant = divmod(n_layers * math.log10(n_strategies), 1)
    mant = round(10 ** mant, 1)
    if mant >= 10:
        e10, mant = e10 + 1, mant / 10
    return f"{n_strategies}{str(n_layers).translate(sup)} ≈ {mant:.1f} × 10{str(int(e10)).translate(sup)}"


def wrap(text: str, width: int = 88, indent: str = "  ") -> str:
    """``text`` wrapped to ``width`` columns, continuation lines indented (outputs fit the text column)."""
    return textwrap.fill(text, width=width, subsequent_indent=indent, break_on_hyphens=False)


class Table:
    """A small table that shows as HTML in the book (it fits the column) and as aligned text elsewhere."""

    def __init__(self, header, rows, caption: str | None = None):
        self.header = [str(h) for h in header]
        self.rows = [[c if isinstance(c, str) else _fmt(c) for c in r] for r in rows]
        self.caption = caption
        for r in self.rows:
            if len(r) != len(self.header):
                raise ValueError(f"every row needs {len(self.header)} cells like the header; got {r}")

    def _numeric(self, j: int) -> bool:
        return all(_NUM.match(r[j]) for r in self.rows) and bool(self.rows)

    def _repr_html_(self) -> str:
        num = [self._numeric(j) for j in range(len(self.header))]

        def cell(tag, c, j):
            align = "right" if num[j] else "left"
            return f'<{tag} style="text-align:{align};padding:2px 8px">{html.escape(c)}</{tag}>'

        head = "".join(cell("th", h, j) for j, h in enumerate(self.header))
        body = "".join("<tr>" + "".join(cell("td", c, j) for j, c in enumerate(r)) + "</tr>" for r in self.rows)
        cap = (f'<caption style="caption-side:bottom;text-align:left;font-size:0.85em">'
               f"{html.escape(self.caption)}</caption>") if self.caption else ""
        return (f'<table class="galv-table" style="border-collapse:collapse;font-size:0.85em">{cap}'
                f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")

    def __repr__(self) -> str:
        w = [max(len(x) for x in col) for col in zip(self.header, *self.rows)]
        num = [self._numeric(j) for j in range(len(self.header))]
        lines = ["  ".join(c.rjust(w[j]) if num[j] else c.ljust(w[j]) for j, c in enumerate(r))
                 for r in [self.header] + self.rows]
        return "\n".join(lines + ([self.caption] if self.caption else []))


_NUM = re.compile(r"^[-+]?[0-9][0-9,.]*(e[-+]?[0-9]+)?[%×x]?$|^-$")


def _fmt(x) -> str:
    if isinstance(x, bool) or x is None:
        return str(x)
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    return f"{x:.2f}"


# ------------------------------------------------------------------------------- chapter 5: the space
def pure_costs_table(rows, label: str) -> Table:
    """The 'four ways' table of ``figures.pure_costs`` rows (MB and ms per layer)."""
    return Table(["kind", "model states MB", "activations MB", "sent MB", "ms per layer"],
                 [[r["kind"], f"{r['states_mb']:.1f}", f"{r['act_mb']:.1f}", f"{r['comm_mb']:.1f}",
                   f"{r['time_s'] * 1e3:.2f}"] for r in rows], caption=label)


def four_ways(rows) -> dict:
    """Glue values for the 'four ways' paragraph: which pure strategy is fastest, lightest and quietest."""
    mem_of = lambda r: r["states_mb"] + r["act_mb"]
    fastest, lightest = min(rows, key=lambda r: r["time_s"]), min(rows, key=mem_of)
    quietest = min(rows, key=lambda r: r["comm_mb"])
    by = {r["kind"]: r for r in rows}
    tp, dp = by["TP"], by["DP"]
    return {
        "fastest_kind": fastest["kind"], "fastest_ms": f"{fastest['time_s'] * 1e3:.1f} ms",
        "lightest_kind": lightest["kind"], "lightest_mb": f"{mem_of(lightest):.0f} MB",
        "quietest_kind": quietest["kind"], "quietest_mb": f"{quietest['comm_mb']:.1f} MB",
        "tp_ms": f"{tp['time_s'] * 1e3:.1f} ms", "dp_ms": f"{dp['time_s'] * 1e3:.1f} ms",
        "tp_mb": f"{tp['comm_mb']:.1f} MB", "dp_mb": f"{dp['comm_mb']:.1f} MB",
        "dp_overhead_ms": f"{dp['overhead_ms']:.1f} ms",
    }


PURE_SHAPES = ("DP", "SDP", "TP", "PP")


def pure_shape(kind: str, n_gpus: int) -> Strategy:
    """The pure strategy ``kind`` (DP, SDP, TP or PP) over ``n_gpus`` GPUs."""
    shapes = {"DP": (1, 1, n_gpus, False), "SDP": (1, 1, n_gpus, True), "TP": (1, n_gpus, 1, False),
              "PP": (n_gpus, 1, 1, False)}
    if kind not in shapes:
        raise ValueError(f"kind must be one of {PURE_SHAPES}; got {kind!r}")
    pp, tp, dp, sdp = shapes[kind]
    return Strategy.from_shape(pp, tp, dp, sdp=sdp)


def whole_model_rows(model, cluster, global_bsz: int, rules=None, kinds=PURE_SHAPES) -> list[dict]:
    """Each pure strategy over the whole model, per GPU (the worked example of chapter 5).

    ``layers_mb``: the layers one GPU holds, i.e. layer memory x L/pp (a pipeline stage holds its own layers
    only); ``other_mb``: embeddings, heads and context (``other_memory_mb``); ``peak_mb`` their sum (the first
    pipeline stage, which holds the "other" memory). ``iter_ms``: one iteration, the sum of every layer's
    ``layer_time_s`` (which already charges a pipeline 1/pp of the compute plus its bubble); ``throughput``
    B / iteration. Micro-batches per ``rules``. Used in: book/galvatron/01_the_space."""
    from .cost import layer_time_s, other_memory_mb
    from .rules import get_rules

    rules = get_rules(rules)
    out = []
    for kind in kinds:
        s = pure_shape(kind, cluster.n_gpus)
        layers = model.layers()
        ch = rules.chunks_for(model.name, global_bsz, s, cluster.n_gpus)
        per_layer_mb = [layer_memory_mb(lt, s, global_bsz, rules) for lt in layers]
        layers_mb = sum(per_layer_mb) / s.pp
        other = other_memory_mb(model, s, global_bsz)
        iter_ms = 1e3 * sum(layer_time_s(lt, s, global_bsz, cluster, ch, model.extra_overhead_ms, rules)
                            for lt in layers)
        out.append(dict(kind=kind, strategy=s, global_bsz=global_bsz, chunks=ch, layer_mb=per_layer_mb[-1], layers_per_gpu=len(layers)
                        // s.pp, layers_mb=layers_mb, other_mb=other, peak_mb=layers_mb + other,
                        iter_ms=iter_ms, throughput=global_bsz / iter_ms * 1e3))
    return out


def whole_model_table(rows, budget_gb: float, label: str) -> Table:
    """``whole_model_rows`` as a table: per-GPU memory (GB) and time, and whether it fits ``budget_gb``
    ("layers": how many layers one GPU holds)."""
    return Table(["kind", "code", "B", "layers", "a layer MB", "layers GB", "other GB", "peak GB",
                  f"fits {budget_gb:g} GB", "ms/iter", "samples/s"],
                 [[r["kind"], r["strategy"].code, str(r["global_bsz"]), str(r["layers_per_gpu"]), f"{r['layer_mb']:.1f}",
                   f"{r['layers_mb'] / 1024:.2f}", f"{r['other_mb'] / 1024:.2f}", f"{r['peak_mb'] / 1024:.2f}",
                   "yes" if r["peak_mb"] <= budget_gb * 1024 else "no", f"{r['iter_ms']:.0f}",
                   f"{r['throughput']:.2f}"] for r in rows], caption=label)


def whole_model_glue(rows, budget_gb: float) -> dict:
    """Glue values (numbers only) for the worked example's paragraph in chapter 5, keyed by kind and batch:
    ``wm_<kind>_<B>_<what>``."""
    out = {"wm_budget": f"{budget_gb:g} GB"}
    for r in rows:
        key = f"wm_{r['kind'].lower()}_{r['global_bsz']}"
        out[f"{key}_gb"] = f"{r['layers_mb'] / 1024:.2f} GB"
        out[f"{key}_peak"] = f"{r['peak_mb'] / 1024:.2f} GB"
        out[f"{key}_layer"] = f"{r['layer_mb']:.0f} MB"
        out[f"{key}_ms"] = f"{r['iter_ms']:,.0f} ms"
        out[f"{key}_rate"] = f"{r['throughput']:.2f} samples/s"
        out[f"{key}_layers"] = str(r["layers_per_gpu"])
    return out


def layer_by_hand(layer, s: Strategy, global_bsz: float, cluster, extra_overhead_ms: float, rules=None) -> dict:
    """One data-parallel layer (``pp = tp = 1``, no sharding, no checkpointing) priced term by term, in ms per
    layer, as chapter 6 writes it by hand, next to the cost model's own ``layer_time_s``:

    fwd = f b, C = 2 f b (the backward), G = 2 (dp-1)/dp P c (the gradient all-reduce at c ms/MB),
    overlap = max(G, C) + (kappa - 1) min(G, C), eo = extra overhead / 24, sum = fwd + overlap + eo,
    total = 1.1 x sum. ``code_ms`` is ``layer_time_s`` x 1000; the two agree (a test and a claim cell check it).
    Used in: book/galvatron/02_the_cost_model."""
    from .cost import DUMMY_LAYERS, layer_time_s

    if (s.pp, s.tp, s.sdp, s.ckpt) != (1, 1, False, False) or s.dp < 2:
        raise ValueError(f"layer_by_hand covers plain DP shapes 1-1-N (N >= 2) only; got {s.code}")
    b = global_bsz / s.dp
    coe = cluster.allreduce_coe(1, s.dp, True)
    kappa = cluster.overlap_coe
    fwd = layer.fwd_ms_per_sample * b
    bwd = 2 * fwd
    msg_mb = 2 * (s.dp - 1) / s.dp * layer.param_mb
    comm = msg_mb * coe
    overlap = max(comm, bwd) + (kappa - 1) * min(comm, bwd)
    eo = extra_overhead_ms / DUMMY_LAYERS
    total_raw = fwd + overlap + eo
    total = total_raw * cluster.time_inflation
    code = layer_time_s(layer, s, global_bsz, cluster, 1, extra_overhead_ms, rules) * 1e3
    states = 4 * layer.param_mb
    act = layer.act_mb(1) * b
    return dict(b=b, f_ms=layer.fwd_ms_per_sample, coe=coe, kappa=kappa, inflation=cluster.time_inflation,
                fwd_ms=fwd, bwd_ms=bwd, msg_mb=msg_mb, comm_ms=comm, overlap_ms=overlap, eo_ms=eo,
                sum_ms=total_raw, total_ms=total, code_ms=code, states_mb=states, act_mb=act,
                mem_mb=states + act, code_mem_mb=layer_memory_mb(layer, s, global_bsz, rules))


def layer_by_hand_glue(h: dict, n_layers: int) -> dict:
    """Glue values (numbers only) of ``layer_by_hand`` for chapter 6's worked layer."""
    f = lambda x, d=2: f"{x:.{d}f}"
    return {"h_b": f(h["b"], 0), "h_f": f(h["f_ms"], 3), "h_fwd": f(h["fwd_ms"]), "h_bwd": f(h["bwd_ms"]),
            "h_msg": f(h["msg_mb"], 1), "h_coe": f(h["coe"], 4), "h_comm": f(h["comm_ms"]),
            "h_kappa": f"{h['kappa']:g}", "h_kappa1": f"{h['kappa'] - 1:.1f}",
            "h_overlap": f(h["overlap_ms"]), "h_eo": f(h["eo_ms"]), "h_sum": f(h["sum_ms"]),
            "h_infl": f"{h['inflation']:g}", "h_total": f(h["total_ms"]), "h_code": f(h["code_ms"], 4),
            "h_states": f(h["states_mb"], 1), "h_act": f(h["act_mb"], 1), "h_mem": f(h["mem_mb"], 1),
            "h_mem_gb": f"{h['mem_mb'] * n_layers / 1024:.1f} GB", "h_iter": f"{h['total_ms'] * n_layers:.0f} ms"}


def code_examples(n_gpus: int) -> Table:
    """How to read a strategy code: a few strategies of ``n_gpus`` GPUs with their trees in words."""
    picks = [Strategy.from_shape(1, 1, n_gpus), Strategy.from_shape(1, 1, n_gpus, sdp=True),
             Strategy.from_shape(1, n_gpus, 1), Strategy.from_shape(n_gpus, 1, 1)]
    if n_gpus >= 4:
        picks += [Strategy.from_shape(1, 2, n_gpus // 2, tp_consec=True),
                  Strategy.from_shape(1, 2, n_gpus // 2, tp_consec=False, sdp=True)]
    if n_gpus >= 8:
        picks += [Strategy.from_shape(2, 2, n_gpus // 4, tp_consec=True)]
    picks += [Strategy.from_shape(1, 1, n_gpus, ckpt=True)]
    seen, rows = set(), []
    for s in picks:
        if s.code not in seen:
            seen.add(s.code)
            inner = s.levels[-1][0].upper() if s.tp > 1 and s.dp > 1 else "-"
            rows.append([s.code, s.name, str(s.pp), str(s.tp), str(s.dp),
                         "SDP" if s.sdp else "DP" if s.dp > 1 else "-", inner])
    return Table(["code", "tree, outer > inner", "pp", "tp", "dp", "data-parallel kind",
                  "on consecutive GPUs"], rows)


def baseline_spaces(n_gpus: int) -> Table:
    """Every baseline space of chapter 7: its name, what it is, and its strategies per layer on ``n_gpus``."""
    rows = []
    for name, what in BASELINES.items():
        codes = [s.code for s in generate(n_gpus, space=name)]
        rows.append([name, what, str(len(codes))])
    rows.append(["galvatron", "the whole pruned space, one strategy per layer", str(len(generate(n_gpus)))])
    return Table(["name", "what it is", f"strategies ({n_gpus} GPUs)"], rows)


# -------------------------------------------------------------------------- chapter 6: the cost model
def memory_rows(layer, strategies, global_bsz: float) -> list[dict]:
    """Model states and activations of one layer (MB per GPU) under each strategy, as in section 5.1's formula:
    states = 4 P / tp (x (1/dp + 0.025) under SDP only), activations = a_tp B / dp. ``total_mb`` is the cost
    model's own ``layer_memory_mb``; the two parts add up to it."""
    out = []
    for s in strategies:
        states = 4.0 * layer.param_mb / s.tp * ((1.0 / s.dp + 0.025) if s.sdp else 1.0)
        act = (layer.ckpt_act_mb() if s.ckpt else layer.act_mb(s.tp)) * global_bsz / s.dp
        out.append(dict(strategy=s, states_mb=states, act_mb=act, total_mb=layer_memory_mb(layer, s, global_bsz)))
    return out


def memory_table(rows) -> Table:
    return Table(["strategy", "tree", "model states MB", "activations MB", "total MB"],
                 [[r["strategy"].code, r["strategy"].name, f"{r['states_mb']:.1f}", f"{r['act_mb']:.1f}",
                   f"{r['total_mb']:.1f}"] for r in rows])


def best_for_layer(rows) -> dict:
    """Glue values: the fastest strategy for one layer (``figures.term_rows`` rows) and the lightest."""
    best = min(rows, key=lambda r: r["total_ms"])
    light = min(rows, key=lambda r: r["mem_mb"])
    return {"best_code": best["strategy"].code, "best_ms": f"{best['total_ms']:.1f} ms",
            "best_mb": f"{best['mem_mb']:.0f} MB", "light_code": light["strategy"].code,
            "light_mb": f"{light['mem_mb']:.0f} MB"}


def dp_terms(rows, n_gpus: int) -> dict:
    """Glue values: pure DP's total for this layer and its fixed-overhead part (ms), from ``term_rows``."""
    dp = next(r for r in rows if r["strategy"].code == f"1-1-{n_gpus}")
    return {"dp_total_ms": f"{dp['total_ms']:.2f} ms", "dp_eo_ms": f"{dp['extra_overhead_ms']:.2f} ms",
            "dp_without_eo_ms": f"{dp['total_ms'] - dp['extra_overhead_ms']:.2f} ms"}


#: The paper's error without the overlap slowdown: "more than 15%" (quoted, the paper, section 5.3).
PAPER_ERROR_PCT = 15
PAPER_KAPPA = 1.3


def overlap_gaps(with_ov, no_ov) -> dict:
    """How much the slowdown raises each estimate (% per strategy) and the glue values of section 5.3.

    ``with_ov`` and ``no_ov`` are ``figures.term_rows`` rows of the same strategies at kappa 1.3 and 1.0."""
    gap = [100 * (a["total_ms"] / b["total_ms"] - 1) for a, b in zip(with_ov, no_ov)]
    strategies = [r["strategy"] for r in with_ov]
    return {"codes": [s.code for s in strategies], "gap": gap,
            "glue": {"gap_max": f"{max(gap):.1f}%", "gap_mean": f"{np.mean(gap):.1f}%"}}


# ------------------------------------------------------------------------------ chapter 7: the search
def demo_instance(model, cluster, codes, global_bsz: int, slack: float = 0.35):
    """The step-by-step example: cost tables of ``model`` for the strategies named by ``codes`` and a budget
    between the lightest and the heaviest plan (``slack`` of the way), so that memory binds.
    Returns (strategies, time_s, mem_mb, trans_s, budget_mb)."""
    strats = [s for s in generate(cluster.n_gpus) if s.code in codes]
    if len(strats) != len(set(codes)):
        raise ValueError(f"codes {codes} are not all strategies of {cluster.n_gpus} GPUs")
    t, m, r = cost_tables(model, strats, global_bsz, cluster, 1)
    mi = np.ceil(m - 1e-9)
    budget = int(mi.min(axis=1).sum() + slack * (mi.max(axis=1) - mi.min(axis=1)).sum())
    return strats, t, m, r, budget


def complexity(n_layers: int, budget_mb: int, n_strategies: int) -> dict:
    """Glue values: the work of the DP with transitions, L E |S|^2, against the paper's L E |S|.

    Every value is text that myst-nb cannot read as a Python literal ('8,192' would show as a tuple)."""
    ours, paper = n_layers * budget_mb * n_strategies ** 2, n_layers * budget_mb * n_strategies
    return {"cx_L": f"{n_layers} layers", "cx_E": f"{budget_mb:,} MB", "cx_S": str(n_strategies),
            "cx_ours": sci(ours), "cx_paper": sci(paper), "cx_ratio": f"{ours / paper:.0f}"}


def sci(x: float) -> str:
    """``x`` as ``3.2 × 10⁷`` (two significant figures)."""
    e = int(math.floor(math.log10(abs(x)))) if x else 0
    sup = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
    return f"{x / 10 ** e:.1f} × 10{str(e).translate(sup)}"


def compare_systems(models, budgets_gb, systems, cluster, uniform: bool = True, load=None, rules=None):
    """Search every model at every budget with Galvatron and each baseline space (under ``rules``).

    Returns (throughput table {(model, GB, system): samples/s, 0 when no plan fits}, results, seconds)."""
    from .profiles import load_model
    from .engine import search

    load = load or load_model
    table, results = {}, {}
    t0 = time.perf_counter()
    for name in models:
        mdl = load(name)
        for gb in budgets_gb:
            for sysname in systems:
                space, ckpt = (sysname[: -len(CKPT)], True) if sysname.endswith(CKPT) else (sysname, False)
                if space == "galvatron":
                    res = search(mdl, cluster, gb, ckpt=ckpt, rules=rules)
                else:
                    res = search(mdl, cluster, gb, space=space, uniform=uniform, ckpt=ckpt, rules=rules)
                table[(name, gb, sysname)], results[(name, gb, sysname)] = res.throughput, res
    return table, results, time.perf_counter() - t0


#: Suffix of a system name in ``compare_systems`` that allows activation checkpointing ("sdp+ckpt").
CKPT = "+ckpt"


def fair_rows(table, models, budgets_gb, systems) -> list[dict]:
    """Per model and budget: Galvatron (without checkpointing), the best baseline without checkpointing and
    the best with it (name and samples/s), and Galvatron's gain (%) over the better of the two; negative where
    a checkpointed baseline is faster. ``systems`` as given to ``compare_systems`` (baselines with the
    ``+ckpt`` suffix are the checkpointed ones). Used in: book/galvatron/03_the_search (section 7.4)."""
    plain = [s for s in systems if s != "galvatron" and not s.endswith(CKPT)]
    ckpt = [s for s in systems if s.endswith(CKPT) and not s.startswith("galvatron")]
    out = []
    for name in models:
        for gb in budgets_gb:
            galv = table[(name, gb, "galvatron")]
            bp = max(plain, key=lambda s: table[(name, gb, s)]) if plain else None
            bc = max(ckpt, key=lambda s: table[(name, gb, s)]) if ckpt else None
            vp = table[(name, gb, bp)] if bp else 0.0
            vc = table[(name, gb, bc)] if bc else 0.0
            best = max(vp, vc)
            gain = 100 * (galv / best - 1) if best > 0 and galv > 0 else float("nan")
            out.append(dict(model=name, gb=gb, galvatron=galv, best_plain=bp, plain=vp, best_ckpt=bc, ckpt=vc,
                            best=best, gain_pct=gain))
    return out


def fair_table(rows, label: str) -> Table:
    """``fair_rows`` as a table: what Galvatron adds over the best baseline, with or without CKPT."""
    def val(v, who=None):
        return "-" if v <= 0 else (f"{v:.2f} ({who})" if who else f"{v:.2f}")

    def add(r):
        g = r["gain_pct"]
        if math.isnan(g):
            return "no plan" if r["galvatron"] <= 0 else "no baseline fits"
        return f"+{g:.0f}%" if g > 0.5 else ("nothing" if g > -0.5 else f"nothing ({g:.0f}%)")
    return Table(["model", "GB", "Galvatron", "best baseline", "best baseline with CKPT",
                  "Galvatron adds"],
                 [[r["model"], f"{r['gb']:g}", val(r["galvatron"]), val(r["plain"], r["best_plain"]),
                   val(r["ckpt"], r["best_ckpt"]), add(r)] for r in rows],
                 caption=label + "; Galvatron adds: its gain over the better of the two baselines, "
                                 "'nothing (-x%)' where it is x% slower; - = no plan fits")


def fair_glue(rows) -> dict:
    """Glue values (counts and extremes) of the fair comparison."""
    ok = [r for r in rows if not math.isnan(r["gain_pct"])]
    lose = [r for r in ok if r["gain_pct"] <= 0.5]
    ckpt_wins = [r for r in ok if r["ckpt"] > r["plain"]]
    win = [r for r in ok if r["gain_pct"] > 0.5]
    return {"fair_n": str(len(ok)), "fair_n_lose": str(len(lose)), "fair_n_ckpt": str(len(ckpt_wins)),
            "fair_n_win": str(len(win)),
            "fair_max_win": f"{max(r['gain_pct'] for r in win):.0f}%" if win else "0%"}


def comparison_table(table, models, budgets_gb, systems, label: str) -> Table:
    """Throughput (samples/s) per model and budget, one column per system; '-' where no plan fits."""
    rows = [[name, f"{gb:g}"] + [f"{table[(name, gb, s)]:.2f}" if table[(name, gb, s)] > 0 else "-"
                                 for s in systems] for name in models for gb in budgets_gb]
    return Table(["model", "GB"] + list(systems), rows, caption=label + "; - = no plan fits")


def gains(table, models, budgets_gb) -> dict:
    """Largest gain (%) of Galvatron over the best pure and the best hybrid baseline, per model (NaN: none)."""
    out = {}
    for name in models:
        def gain(group):
            g = [100 * (table[(name, gb, "galvatron")] / best - 1) for gb in budgets_gb
                 if (best := max(table.get((name, gb, s), 0.0) for s in group)) > 0]
            return max(g, default=float("nan"))
        out[name] = (gain(PURE), gain(HYBRID))
    return out


def gains_table(g: dict, label: str) -> Table:
    pct = lambda x: "-" if math.isnan(x) else f"{x:.0f}%"
    return Table(["model", "max gain over pure", "max gain over hybrid"],
                 [[n, pct(a), pct(b)] for n, (a, b) in g.items()], caption=label)


def comparison_glue(table, results, g: dict) -> dict:
    """Glue values of the comparison: largest gains ("-" where no baseline fits), how many baseline cells have
    no plan, and, per (model, budget) where Galvatron itself finds none, the budget it needs
    (``galv_needs_<model>_<GB>``, the model's dashes as underscores)."""
    misses = [(n, gb) for (n, gb, s), v in table.items() if s == "galvatron" and v == 0]
    n_oom = sum(1 for (n, gb, s), v in table.items() if v == 0 and s != "galvatron")
    pure = [a for a, _ in g.values() if not math.isnan(a)]
    hyb = [b for _, b in g.values() if not math.isnan(b)]
    out = {"gain_pure_max": f"{max(pure):.0f}%" if pure else "-",
           "gain_hybrid_max": f"{max(hyb):.0f}%" if hyb else "-",
           "n_oom": n_oom, "n_cells": sum(1 for k in table if k[2] != "galvatron"), "n_galv_none": len(misses)}
    for n, gb in misses:
        key = f"galv_needs_{n.replace('-', '_')}_{gb:g}"
        out[key] = f"{results[(n, gb, 'galvatron')].min_budget_gb:.1f} GB"
    return out


_KIND = {"dp": "DP", "sdp": "SDP", "tp": "TP"}


def kinds_of(s: Strategy) -> list[str]:
    """The parallelisms of one layer's strategy, outer to inner (PP first), e.g. ['SDP', 'TP']."""
    return (["PP"] if s.pp > 1 else []) + [_KIND[k] for k, _ in s.levels]


def plan_kinds(plan) -> list[str]:
    """The parallelisms a whole plan uses, in the order DP, SDP, TP, PP."""
    used = {k for s in plan.strategies() for k in kinds_of(s)}
    return [k for k in ("DP", "SDP", "TP", "PP") if k in used]


def plan_line(plan, gb: float, label: str | None = None) -> str:
    """One plan in words (and its provenance ``label``, if given), wrapped to the text column."""
    return wrap(f"{gb:g} GB: {plan.summary()}; {plan.est_throughput_samples_per_s:.2f} samples/s, "
                f"{plan.est_mem_mb_per_device / 1024:.2f} GB per GPU" + (f"; {label}" if label else ""))


def plan_json_excerpt(plan, width: int = 88) -> str:
    """The plan's JSON, each line cut to ``width`` characters (long per-layer lists end in '...')."""
    lines = []
    for line in plan.to_json().splitlines():
        lines.append(line if len(line) <= width else line[:width - 5] + ' ..."')
    return "\n".join(lines)


def swin_table(res, swin):
    """Per layer type of our Swin plan: its size and the mean TP degree its layers get (a Table), or None
    when the search found no plan."""
    if not res.feasible:
        return None
    tps = np.array(res.plan.tp_sizes_enc)
    kinds = np.array(swin.layer_type_index())
    rows = [[lt.name, str(lt.hidden), f"{lt.param_mb:.0f}", f"{lt.act_mb(1):.0f}",
             f"{tps[kinds == k].mean():.2f}"] for k, lt in enumerate(swin.layer_types)]
    return Table(["layer type", "hidden", "parameters MB", "activations MB per sample", "mean TP degree"], rows)


def time_searches(model, cluster, n_layers, budgets_gb, rules=None):
    """Wall-clock seconds of the full search for ``model`` stretched to each depth, per budget (measured),
    whether each search found a plan (a search that finds none stops at its first batch, so it is quick), and
    how many (batch, pipeline degree) candidates it tried, one DP per stage each (fewer as fewer batches fit).
    Returns (times, feasible, tried), each {"<GB> GB": [one per depth]}."""
    from .engine import search

    times = {f"{gb:g} GB": [] for gb in budgets_gb}
    feasible = {f"{gb:g} GB": [] for gb in budgets_gb}
    tried = {f"{gb:g} GB": [] for gb in budgets_gb}
    for L in n_layers:
        for gb in budgets_gb:
            t0 = time.perf_counter()
            res = search(model.with_layers(L), cluster, gb, rules=rules)
            times[f"{gb:g} GB"].append(time.perf_counter() - t0)
            feasible[f"{gb:g} GB"].append(bool(res.feasible))
            tried[f"{gb:g} GB"].append(len(res.candidates))
    return times, feasible, tried


#: Galvatron and the best baseline on 16 GPUs, ViT-Huge-32 at 16 GB, samples/s (quoted, the paper, Table 3).
PAPER_16 = (131.15, 63.25)
#: Search cost on 16 and 64 GPUs relative to 8 (quoted, the paper, section 5.6).
PAPER_SEARCH_GROWTH = {16: 2.2, 64: 9.2}


def scaling(model, n_gpus: int, scaling_gpus, systems, uniform: bool = True, budget_gb: float = 16,
            rules=None) -> dict:
    """Galvatron against the best baseline on larger clusters, and the search time relative to ``n_gpus``.

    Returns {"rows": [(GPUs, galvatron, best baseline, its name, search s, ratio)], "glue": {...}} (per size n
    in ``scaling_gpus``: strategies per layer, search-time ratio, both estimates, the baseline's name and
    galvatron / baseline); search times are measured on this machine's CPU."""
    from .profiles import published_cluster
    from .engine import search

    t0 = time.perf_counter()
    search(model, published_cluster(n_gpus), budget_gb, rules=rules)
    t_base = time.perf_counter() - t0
    rows = []
    for n in scaling_gpus:
        cl = published_cluster(n)
        t0 = time.perf_counter()
        g = search(model, cl, budget_gb, rules=rules)
        dt = time.perf_counter() - t0
        base = {s: search(model, cl, budget_gb, space=s, uniform=uniform, rules=rules).throughput
                for s in systems if s != "galvatron"}
        which = max(base, key=base.get)
        rows.append((n, g.throughput, base[which], which, dt, dt / t_base))
    out = {"n_strat_here": str(len(generate(n_gpus)))}
    for n, ours, best, which, _, ratio in rows:
        out[f"n_strat_{n}"] = str(len(generate(n)))
        out[f"growth_{n}"] = f"{ratio:.1f}×"
        out[f"s{n}_ours"] = f"{ours:.1f} samples/s"
        out[f"s{n}_base"] = f"{best:.1f}"
        out[f"s{n}_which"] = which
        out[f"s{n}_ratio"] = f"{ours / best:.2f}×" if best > 0 else "-"
    return {"rows": rows, "glue": out}


def scaling_table(rows, n_gpus: int, label: str) -> Table:
    return Table(["GPUs", "galvatron", "best baseline", "which", "search s", f"vs {n_gpus} GPUs"],
                 [[str(n), f"{g:.1f}", f"{b:.1f}", w, f"{dt:.2f}", f"{r:.1f}×"] for n, g, b, w, dt, r in rows],
                 caption=label)


def what_if(model, cluster, budget_gb: float, spaces, batch_sizes, uniform: bool = True) -> Table:
    """Galvatron with activation checkpointing against a few baselines on an analytic profile: a Table."""
    from .engine import search

    rows = []
    g = search(model, cluster, budget_gb, ckpt=True, batch_sizes=batch_sizes)
    for name in ("galvatron",) + tuple(spaces):
        r = g if name == "galvatron" else search(model, cluster, budget_gb, space=name, ckpt=True,
                                                  batch_sizes=batch_sizes, uniform=uniform)
        rows.append([name, f"{r.throughput:.2f}", r.plan.summary() if r.plan else "no plan fits"])
    return Table(["system", "samples/s", "plan"], rows)


# ------------------------------------------------------------------------------------- the two rule sets
def rules_table(a, b) -> Table:
    """Every field in which two CostRules differ, with what it decides (rules.py documents each)."""
    from .rules import differences

    fmt = lambda v: "None (1 MB)" if v is None else (f"{v:.3g}" if isinstance(v, float) else str(v))
    rows = [[f, what, fmt(va), fmt(vb)] for f, what, va, vb in differences(a, b)]
    return Table(["field", "what it decides", a.name, b.name], rows)


#: The paper's largest measured speed-ups on 8 GPUs (quoted, the paper, sections 1 and 5.2).
PAPER_GAINS = ("up to 338% (ViT); 200–334% for the other three", "up to 55%; 28–52% for the other three")


def gains_side_by_side(g_main: dict, g_other: dict, main: str, other: str) -> Table:
    """Largest gains over the best pure and best hybrid baseline under two rule sets (estimated), and the
    paper's (quoted) in a last row."""
    pct = lambda x: "-" if math.isnan(x) else f"{x:.0f}%"
    rows = [[n, pct(a), pct(b), pct(g_other[n][0]), pct(g_other[n][1])] for n, (a, b) in g_main.items()]
    rows.append(["the paper (quoted, measured)", PAPER_GAINS[0], PAPER_GAINS[1], "", ""])
    return Table(["model", f"over pure, {main}", f"over hybrid, {main}", f"over pure, {other}",
                  f"over hybrid, {other}"], rows,
                 caption="estimated on the published profiles, except the paper's row")


def camera_ready_bert():
    """BERT-Huge-32 with the constants of the camera-ready artifact (Hsword/Hetu commit 3757771,
    tools/Galvatron/bert/search_layerwise_hp_8gpus.py: extra overhead 0 ms, other memory 790 MB + 300 MB per
    sample; the layer constants are the VLDB artifact's). Its plan files were searched with these."""
    from dataclasses import replace

    from .profiles import load_model

    b = load_model("bert-huge-32")
    return replace(b, extra_overhead_ms=0.0, other_model_states_mb=790.0, other_act_mb_per_sample=300.0,
                   source="camera-ready constants, Hsword/Hetu 3757771 tools/Galvatron/bert/"
                          "search_layerwise_hp_8gpus.py (quoted)")


#: The two BERT-Huge-32 plan files shipped with the camera-ready artifact (Hsword/Hetu 3757771,
#: tools/Galvatron/bert/configs/galvatron_config_8gpus_1280hidden_32layers_{8,12}G_full.json), summarised.
PUBLISHED_BERT_PLANS = {8: "B=8, pp=2, chunks=2: (15x 2-2*-2, 1x 2-2*-2f) per stage",
                        12: "B=16, pp=1, chunks=1: 16x 1-2*-4, 16x 1-2*-4f"}


def dp_speed(model, cluster, budget_gb: float, global_bsz: int, pp: int, rules=None, repeat: int = 3) -> dict:
    """Time one stage's DP (BERT-like uniform model, one (B, pp)) three ways on this CPU: ``dp_solve``
    (numpy, reachable band, no shortcut), ``dp_solve`` with the shortcut, and the same recurrence in plain
    Python (``dp_readable.solve``, every memory level). Best of ``repeat`` for the numpy ones; measured."""
    from . import dp_readable
    from .cost import cost_tables, other_memory_mb
    from .dynamic_program import dp_solve
    from .rules import get_rules
    from .strategies import generate

    rules = get_rules(rules)
    strats = [s for s in generate(cluster.n_gpus) if s.pp == pp]
    layers = model.layers()[: model.n_layers // pp]
    chunks = [rules.chunks_for(model.name, global_bsz, s, cluster.n_gpus) for s in strats]
    t, m, r = cost_tables(model, strats, global_bsz, cluster, chunks, layers=layers, rules=rules)
    E = int(math.floor(budget_gb * 1024 - other_memory_mb(model, strats[0], global_bsz)))

    def best(fn):
        out = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            res = fn()
            out.append(time.perf_counter() - t0)
        return min(out), res

    t_np, a = best(lambda: dp_solve(t, m, r, E, shortcut=False))
    t_sc, _ = best(lambda: dp_solve(t, m, r, E))
    t0 = time.perf_counter()
    b_cost, b_choice, _ = dp_readable.solve(t.tolist(), m.tolist(), r.tolist(), E)
    t_py = time.perf_counter() - t0
    if a.feasible != bool(b_choice) or (a.feasible and abs(a.cost_s - b_cost) > 1e-9):
        raise AssertionError("dp_solve and the pure-Python DP disagree")
    return {"layers": len(layers), "E": E, "S": len(strats), "numpy_s": t_np, "shortcut_s": t_sc,
            "python_s": t_py, "ratio": t_py / t_np, "ratio_shortcut": t_py / max(t_sc, 1e-9)}


#: One run of the artifact's own search script (anonymous-cs-system/Galvatron 2a09c265,
#: bert/search_layerwise_hp.py with its utils/cost_model.py and utils/dp_utils.py, unmodified but for the budget
#: list) at 8 GB, numpy only, under nice on one core of this book's 2-core build machine (2026-12-01), recorded
#: once: its best plan, its estimate and its wall-clock time. Not re-run by the chapter (it takes minutes).
ARTIFACT_RUN = {"budget_gb": 8, "throughput": 7.944699256475842, "global_bsz": 8, "pp": 2,
                "plan": "1x 2-4-1, 14x 2-2*-2, 1x 2-2*-2f per stage", "wall_s": 141.4}
