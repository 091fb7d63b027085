"""Your budget, your plan: Galvatron's search as a widget, with a static twin for the published book.

:func:`plan_answer` is the pure function behind it: settings in (model, GPU count, memory budget, cost rules,
search space), the search's answer out (``lib.galvatron.search.engine.search``: the plan, its estimated
throughput and memory) with the best baseline beside it (every baseline space, one strategy for all layers, as
the search chapter runs them). :class:`YourBudgetYourPlan` puts ipywidgets sliders and selectors around it and
draws the plan as the chapter does (``plan_figure``). In CI and in book builds (``lib.book.in_ci()``) its
``show()`` draws :func:`static_figure` instead: a precomputed grid (GPU counts x budgets, every published
model behind buttons, ``data/galvatron/twin_grid.json``), with a note saying where to run it live.
Every number is estimated by the cost model on the published RTX TITAN profiles (simulated, never measured).
Used in: book/galvatron/03_the_search ("Your budget, your plan").

:class:`PlanYourJob` is the planner for a reader's own job (book/galvatron/05_from_paper_to_practice, "Plan
your own job"): :func:`job_answer` takes a model (a name of ``search/analytic.SHAPES`` or a Hugging Face
config's fields), the GPU count and type, the global batch and the sequence length, and returns the fastest
layouts that fit under ``practice`` (``search/practice_search.search_top``, the search of
``job_plan.plan``, estimated); :func:`job_figure` draws them, and is the widget's static twin. Torch-free
and free of the published-runs readers, so it runs in the browser's live build.
"""

from __future__ import annotations

import html
import importlib
import inspect
import os
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

from lib.widget_base import LiveOrTwin
from lib.galvatron.search.engine import SearchResult, search
from lib.galvatron.search.profiles import load_model, model_names, published_cluster
from lib.galvatron.search.report import BASELINES, sim_label
from lib.galvatron.search.strategies import SPACES, check_power_of_two

#: Where a reader runs the live widget; shown under every static twin (the same words in every part).
#: The rule set when ``lib.galvatron.search`` exposes no named presets (today's cost model).
DEFAULT_RULES = "this book's cost model"
#: Where named cost rules may live: a module with ``PRESETS`` (name -> rules) or a ``CostRules`` class
#: with preset constructors; they are offered only if ``search`` takes a ``rules`` argument.
RULE_MODULES = ("lib.galvatron.search.rules", "lib.galvatron.search.cost_rules", "lib.galvatron.search.presets",
                "lib.galvatron.search.cost")
RULE_PRESET_NAMES = ("vldb2023", "galvatron2")
GPU_CHOICES = (2, 4, 8, 16, 32, 64)
BUDGET_RANGE_GB = (4.0, 32.0)
#: The static twin's grid.
TWIN_GPUS, TWIN_BUDGETS_GB = (4, 8, 16), (6.0, 8.0, 12.0, 16.0, 24.0)


def available_rules() -> dict:
    """Named cost rules the search accepts, by name ({DEFAULT_RULES: None} when there are none yet)."""
    if "rules" in inspect.signature(search).parameters:
        for name in RULE_MODULES:
            try:
                mod = importlib.import_module(name)
            except ModuleNotFoundError as e:
                if e.name == name:
                    continue
                raise
            presets = getattr(mod, "PRESETS", None)
            cls = getattr(mod, "CostRules", None)
            if not presets and cls is not None:
                presets = {n: getattr(cls, n)() for n in RULE_PRESET_NAMES if callable(getattr(cls, n, None))}
            if presets:
                return dict(presets)
    return {DEFAULT_RULES: None}


@lru_cache(maxsize=1)
def _model_names() -> list[str]:
    return model_names()


@dataclass(frozen=True)
class PlanSettings:
    """One question: ``model`` (a published profile), ``n_gpus``, ``budget_gb`` per GPU, ``rules`` (a name
    of :func:`available_rules`), ``space`` (``strategies.SPACES``; "full" is Galvatron's) and ``uniform``
    (one strategy for every layer, as the baseline systems run)."""

    model: str = "bert-huge-32"
    n_gpus: int = 8
    budget_gb: float = 8.0
    rules: str = ""
    space: str = "full"
    uniform: bool = False

    def __post_init__(self):
        if self.model not in _model_names():
            raise ValueError(f"model must be one of {_model_names()}; got {self.model!r}")
        check_power_of_two(self.n_gpus, "n_gpus")
        b = self.budget_gb
        if isinstance(b, bool) or not isinstance(b, (int, float)) or not 0 < b < 1e6:
            raise ValueError(f"budget_gb must be a number of GB in (0, 1e6); got {b!r}")
        if self.space not in SPACES:
            raise ValueError(f"space must be one of {SPACES}; got {self.space!r}")
        rules = available_rules()
        if self.rules == "":
            object.__setattr__(self, "rules", next(iter(rules)))
        elif self.rules not in rules:
            raise ValueError(f"rules must be one of {list(rules)}; got {self.rules!r}")
        if not isinstance(self.uniform, bool):
            raise ValueError(f"uniform must be True or False; got {self.uniform!r}")


@dataclass(frozen=True)
class PlanAnswer:
    """The search's answer (``result``) and every baseline's throughput (samples/s, 0 = no plan fits);
    ``best_baseline`` is the fastest baseline space, or None when none fits."""

    settings: PlanSettings
    result: SearchResult
    baselines: tuple[tuple[str, float], ...]
    best_baseline: str | None
    source: str

    @property
    def best_baseline_throughput(self) -> float:
        return dict(self.baselines).get(self.best_baseline, 0.0) if self.best_baseline else 0.0

    @property
    def gain(self) -> float | None:
        """Throughput over the best baseline, minus 1 (None when either has no plan)."""
        b = self.best_baseline_throughput
        return self.result.throughput / b - 1 if b > 0 and self.result.feasible else None

    def headline(self) -> str:
        s = self.settings
        if not self.result.feasible:
            return self.result.message
        p = self.result.plan
        head = (f"{s.space} space: {self.result.throughput:.2f} samples/s at global batch {p.global_bsz}, "
                f"pp={p.pp_deg}, {p.chunks} chunks; peak {p.est_mem_mb_per_device / 1024:.2f} GB of "
                f"{s.budget_gb:g} GB per GPU")
        return head + "; " + self.baseline_text()

    def baseline_text(self) -> str:
        if self.best_baseline is None:
            return "no baseline fits"
        g = self.gain
        vs = "" if g is None else f" ({g:+.0%} for this plan)"
        return f"best baseline {self.best_baseline}: {self.best_baseline_throughput:.2f} samples/s{vs}"


@lru_cache(maxsize=16)
def _model(name: str):
    return load_model(name)


@lru_cache(maxsize=16)
def _cluster(n_gpus: int):
    return published_cluster(n_gpus)


def _search(settings: PlanSettings, space: str, uniform: bool) -> SearchResult:
    kw = {}
    rules = available_rules()[settings.rules]
    if rules is not None:
        kw["rules"] = rules
    return search(_model(settings.model), _cluster(settings.n_gpus), float(settings.budget_gb),
                  space=space, uniform=uniform, **kw)


@lru_cache(maxsize=256)
def plan_answer(settings: PlanSettings) -> PlanAnswer:
    """The search under ``settings`` and the best of the baseline spaces (one strategy for all layers)."""
    res = _search(settings, settings.space, settings.uniform)
    base = tuple((sp, _search(settings, sp, True).throughput) for sp in BASELINES)
    fits = [(t, sp) for sp, t in base if t > 0]
    best = max(fits)[1] if fits else None
    label = sim_label(_cluster(settings.n_gpus), _model(settings.model))
    return PlanAnswer(settings, res, base, best, label)


# ----------------------------------------------------------------------------------------------- figures
def answer_figure(a: PlanAnswer, title: str | None = None):
    """The plan as the search chapter draws it (``plan_figure``), titled with its numbers."""
    from lib.galvatron.search.figures import plan_figure
    import plotly.graph_objects as go

    from lib.viz import layout

    s = a.settings
    title = title or _title(a)
    if not a.result.feasible:
        return layout(go.Figure(), title, height=360)
    return plan_figure(a.result.plan, _model(s.model), title)


def _title(a: PlanAnswer) -> str:
    s = a.settings
    where = f"{s.model} on {s.n_gpus} GPUs, {s.budget_gb:g} GB each"
    if not a.result.feasible:
        need = a.result.min_budget_gb
        return f"{where}: no plan fits" + (f" (needs {need:.2f} GB)" if need and need < 1e9 else "")
    g = a.gain
    vs = "no baseline fits" if a.best_baseline is None else (
        f"best baseline {a.best_baseline} {a.best_baseline_throughput:.1f} samples/s"
        + ("" if g is None else f" (this plan {g:+.0%})"))
    return (f"{where}: {a.result.throughput:.1f} samples/s, peak "
            f"{a.result.plan.est_mem_mb_per_device / 1024:.1f} GB; {vs}")


#: The static twin's precomputed grid (``python -m lib.galvatron.widgets`` writes it): every published model at
#: TWIN_GPUS x TWIN_BUDGETS_GB under the ``vldb2023`` rules, as the search chapter runs it. A test re-searches
#: cells of it, so it cannot drift from the search.
TWIN_GRID_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "data", "galvatron", "twin_grid.json")
TWIN_RULES = "vldb2023"


def grid_cell(model: str, n_gpus: int, budget_gb: float, rules: str = TWIN_RULES) -> dict:
    """One cell of the static twin: Galvatron's answer for (model, GPUs, budget per GPU) under ``rules``, as
    plain values (samples/s 0 and ``min_budget_gb`` when no plan fits)."""
    a = _search(PlanSettings(model, n_gpus, float(budget_gb), rules), "full", False)
    cell = dict(model=model, n_gpus=int(n_gpus), budget_gb=float(budget_gb), feasible=bool(a.feasible),
                throughput=float(a.throughput))
    if a.feasible:
        p = a.plan
        cell.update(global_bsz=int(p.global_bsz), pp=int(p.pp_deg), summary=p.summary(),
                    peak_gb=float(p.est_mem_mb_per_device) / 1024)
    else:
        need = a.min_budget_gb
        cell.update(min_budget_gb=float(need) if need is not None and need < 1e9 else None)
    return cell


def write_twin_grid(path: str = TWIN_GRID_PATH, models: Sequence[str] | None = None,
                    gpus: Sequence[int] = TWIN_GPUS, budgets_gb: Sequence[float] = TWIN_BUDGETS_GB) -> dict:
    """Search every cell of the twin's grid and write it to ``path`` (atomically). Minutes on one core."""
    from lib import atomic

    models = list(models or _model_names())
    cells = [grid_cell(m, n, gb) for m in models for n in gpus for gb in budgets_gb]
    grid = {"rules": TWIN_RULES, "source": "lib.galvatron.widgets.write_twin_grid: Galvatron's search on the "
            "published RTX TITAN profiles (simulated)", "models": models, "gpus": list(gpus),
            "budgets_gb": [float(b) for b in budgets_gb], "cells": cells}
    atomic.write_json(path, grid)
    return grid


def load_twin_grid(path: str = TWIN_GRID_PATH) -> dict:
    """The precomputed grid; ``ValueError`` naming the file if it is missing or not the twin's."""
    import json

    try:
        with open(path, encoding="utf-8") as f:
            grid = json.load(f)
    except FileNotFoundError:
        raise ValueError(f"twin grid {path} is missing; write it with: python -m lib.galvatron.widgets") from None
    if grid.get("rules") != TWIN_RULES or not grid.get("cells"):
        raise ValueError(f"twin grid {path} is not a {TWIN_RULES} grid with cells; rewrite it with: "
                         "python -m lib.galvatron.widgets")
    return grid


def static_figure(model: str = "bert-huge-32", active: tuple[int, float] = (8, 8.0), grid: dict | None = None):
    """The static twin: the precomputed grid (:func:`load_twin_grid`) as one heatmap per model, GPUs against
    budget per GPU, colour = estimated samples/s, each cell labelled with its throughput, batch and pipeline
    degree; a cross marks a cell where no plan fits. Buttons pick the model (``model`` first); the axes are the
    same for every model; the chapter's own setting ``active`` is outlined."""
    import plotly.graph_objects as go

    from lib.viz import PALETTE, layout

    grid = grid or load_twin_grid()
    models, gpus, budgets = grid["models"], grid["gpus"], [float(b) for b in grid["budgets_gb"]]
    if model not in models:
        raise ValueError(f"model must be one of the twin grid's {models}; got {model!r}")
    if int(active[0]) not in gpus or float(active[1]) not in budgets:
        raise ValueError(f"active must be a (GPUs, GB) pair of the grid, GPUs in {gpus} and GB in {budgets}; "
                         f"got {active!r}")
    cells = {(c["model"], c["n_gpus"], c["budget_gb"]): c for c in grid["cells"]}
    xs, ys = [f"{b:g} GB" for b in budgets], [f"{n} GPUs" for n in gpus]
    order = [model] + [m for m in models if m != model]
    fig = go.Figure()
    for k, m in enumerate(order):
        z, text, hover, bad_x, bad_y = [], [], [], [], []
        for n in gpus:
            zr, tr, hr = [], [], []
            for b in budgets:
                c = cells[(m, n, b)]
                if c["feasible"]:
                    zr.append(round(c["throughput"], 3))
                    tr.append(f"{c['throughput']:.1f}/s<br>B={c['global_bsz']} pp={c['pp']}")
                    hr.append(f"{c['summary']}<br>{c['throughput']:.2f} samples/s; peak {c['peak_gb']:.2f} of "
                              f"{b:g} GB per GPU")
                else:
                    zr.append(None)
                    tr.append("")
                    need = c.get("min_budget_gb")
                    hr.append("no plan fits" + (f" (needs {need:.1f} GB per GPU)" if need else ""))
                    bad_x.append(f"{b:g} GB")
                    bad_y.append(f"{n} GPUs")
            z.append(zr)
            text.append(tr)
            hover.append(hr)
        fig.add_heatmap(z=z, x=xs, y=ys, text=text, texttemplate="%{text}", customdata=hover,
                        hovertemplate="%{y}, %{x}: %{customdata}<extra></extra>", colorscale="Viridis",
                        colorbar=dict(title="samples/s"), visible=k == 0, name=m)
        fig.add_scatter(x=bad_x, y=bad_y, mode="markers", name="no plan fits", visible=k == 0,
                        marker=dict(symbol="x", size=22, color=PALETTE["bad"]), hoverinfo="skip")
    n_tr = 2 * len(order)
    buttons = [dict(label=m, method="update",
                    args=[{"visible": [j // 2 == k for j in range(n_tr)]},
                          {"title.text": _twin_title(m)}]) for k, m in enumerate(order)]
    fig.update_layout(updatemenus=[dict(type="buttons", direction="right", buttons=buttons, x=0, y=1.0,
                                        xanchor="left", yanchor="bottom", showactive=True)],
                      xaxis=dict(title="memory budget per GPU", type="category", categoryarray=xs),
                      yaxis=dict(title="GPUs", type="category", categoryarray=ys))
    ax, ay = xs.index(f"{float(active[1]):g} GB"), ys.index(f"{int(active[0])} GPUs")
    fig.add_shape(type="rect", x0=ax - 0.5, x1=ax + 0.5, y0=ay - 0.5, y1=ay + 0.5,
                  line=dict(color=PALETTE["bad"], width=3))
    fig = layout(fig, _twin_title(model), height=460)
    fig.update_layout(margin=dict(t=max(fig.layout.margin.t or 0, 110)))
    return fig


def _twin_title(model: str) -> str:
    return (f"{model}: Galvatron's estimated throughput for every GPU count and budget "
            f"({TWIN_RULES} rules, simulated); the outline marks the chapter's setting")


# ----------------------------------------------------------------------------------------------- the widget
class YourBudgetYourPlan(LiveOrTwin):
    """Galvatron's search as a widget. ``show()`` displays the live widget in a running kernel, or the
    static twin with :data:`LIVE_NOTE` under CI and in book builds (``live=False`` forces the twin)."""

    runs_in_page = True  # the chapter runs it under a live-widget block ("Run it live")

    TWIN_ID = "galv-plan-twin"  # not the section's anchor id

    def __init__(self, model: str = "bert-huge-32", n_gpus: int = 8, budget_gb: float = 8.0, space: str = "full",
                 rules: str = "", live: bool = True):
        self.settings = PlanSettings(model, n_gpus, float(budget_gb), rules, space)
        self.live = live
        self.last: PlanAnswer | None = None
        self.figure = None
        self._built = None

    def current_settings(self) -> PlanSettings:
        w = self._widgets()
        return PlanSettings(w["model"].value, w["gpus"].value, float(w["budget"].value), w["rules"].value,
                            w["space"].value, w["uniform"].value)

    def refresh(self, *_):
        """Search under the controls' settings now: the summary and the plan figure."""
        w = self._widgets()
        a = plan_answer(self.current_settings())
        self.last = a
        plan = ("" if not a.result.feasible else
                f"<br><small>plan: {html.escape(a.result.plan.summary())}</small>")
        w["summary"].value = (f"<b>{html.escape(a.headline())}</b>{plan}<br>"
                              f"<small>{html.escape(a.source)}; searched in {a.result.search_s:.2f} s</small>")
        self.figure = answer_figure(a)
        from IPython.display import display

        from lib.viz import PlotlyHTML, to_html

        w["out"].clear_output(wait=True)
        with w["out"]:
            display(PlotlyHTML(to_html(self.figure, "galv-plan-live")))

    def _build(self) -> dict:
        import ipywidgets as W

        s = self.settings
        wide = dict(layout=W.Layout(width="420px"), style=dict(description_width="120px"))
        w = dict(
            budget=W.FloatSlider(value=s.budget_gb, min=BUDGET_RANGE_GB[0], max=BUDGET_RANGE_GB[1], step=0.5,
                                 description="budget (GB/GPU)", continuous_update=False, **wide),
            gpus=W.SelectionSlider(options=sorted({*GPU_CHOICES, s.n_gpus}), value=s.n_gpus, description="GPUs",
                                   continuous_update=False, **wide),
            model=W.Dropdown(options=_model_names(), value=s.model, description="model", **wide),
            rules=W.Dropdown(options=list(available_rules()), value=s.rules, description="cost rules", **wide),
            space=W.Dropdown(options=list(SPACES), value=s.space, description="search space", **wide),
            uniform=W.Checkbox(value=s.uniform, description="one strategy for all layers", indent=False),
            summary=W.HTML(), out=W.Output())
        for k in ("budget", "gpus", "model", "rules", "space", "uniform"):
            w[k].observe(self.refresh, "value")
        w["box"] = W.VBox([W.HBox([W.VBox([w["budget"], w["gpus"], w["model"]]),
                                   W.VBox([w["rules"], w["space"], w["uniform"]])]), w["summary"], w["out"]])
        return w

    def static_twin(self):
        s = self.settings
        grid = load_twin_grid()
        active = (s.n_gpus, float(s.budget_gb))
        if s.n_gpus not in grid["gpus"] or float(s.budget_gb) not in grid["budgets_gb"]:
            active = (8, 8.0)  # the settings are off the precomputed grid: outline its default cell
        return static_figure(s.model, active, grid)


def main(argv=None) -> int:
    """``python -m lib.galvatron.widgets``: rewrite the static twin's grid (data/galvatron/twin_grid.json)."""
    grid = write_twin_grid()
    print(f"wrote {len(grid['cells'])} cells to {os.path.relpath(TWIN_GRID_PATH)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


# ------------------------------------------------------------------------------- plan your own job (chapter 9)
#: GPU types the widget offers (``data/hardware/gpus/``).
JOB_GPUS = ("h100-sxm-80gb", "a100-sxm-80gb")
#: The choice that reads the model from the Hugging Face fields box.
CUSTOM = "HF config fields"
#: A Hugging Face config's fields the widget shows as an example (Llama 3 8B's config.json).
EXAMPLE_FIELDS = ('{"num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,\n'
                  ' "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,\n'
                  ' "hidden_act": "silu"}')


@dataclass(frozen=True)
class JobSettings:
    """A reader's job: ``model`` is a name of ``search/analytic.SHAPES`` or a dict of Hugging Face config
    fields (``job_plan.shape_from_config``); ``stack`` a software stack of ``data/stacks/`` or an alias;
    ``fabric`` a fabric of ``data/hardware/fabrics/fabrics.json`` ("": the GPU type's port, ``plan --fabric``)."""
    model: object = "llama3-8b"
    gpus: int = 64
    gpu: str = "h100-sxm-80gb"
    global_batch: int = 512
    seq_len: int = 4096
    top: int = 5
    stack: str = "megatron-lm"
    fabric: str = ""


@dataclass(frozen=True)
class JobAnswer:
    """The fastest layouts that fit (``rows``: label, tokens/s/GPU, MFU, peak GB, step s), estimated, and
    what they were judged against; ``error`` is the one-line message of a bad setting (then no rows)."""
    settings: JobSettings
    model: str
    rows: tuple
    usable_gb: float
    priced: int
    error: str | None = None
    stack: str = "megatron-lm"

    def headline(self) -> str:
        if self.error:
            return self.error
        best = self.rows[0]
        fabric = f" on {self.settings.fabric}" if self.settings.fabric else ""
        return (f"{self.model} on {self.settings.gpus:,} x {self.settings.gpu}{fabric} under {self.stack}: fastest of "
                f"{self.priced:,} "
                f"layouts priced is {best['label']}, {best['tokens_per_s_per_gpu']:,.0f} tokens/s/GPU, "
                f"MFU {best['mfu']:.0%}, {best['peak_gb']:.0f} of {self.usable_gb:.0f} GB (estimated)")


def job_answer(settings: JobSettings) -> JobAnswer:
    """The planner's top layouts for ``settings`` under ``practice`` and the settings' stack (estimated): the
    report of ``job_plan.plan``, the command line's own; a bad setting comes back as ``error`` (the one line
    ``plan`` would print), not as an exception."""
    from lib.cli_errors import UserError

    from .job_plan import make_job, plan, read_model, shape_from_config

    s = settings
    name = s.model if isinstance(s.model, str) else "your model"
    try:
        shape = (read_model(s.model, s.seq_len) if isinstance(s.model, str)
                 else shape_from_config(s.model, name, s.seq_len, where="config"))
        report = plan(make_job(shape, s.gpu, s.gpus, s.global_batch, fabric=s.fabric or None), s.stack, s.top)
    except UserError as e:
        return JobAnswer(s, name, (), 0.0, 0, str(e))
    rows = tuple({k: r[k] for k in ("label", "tokens_per_s_per_gpu", "mfu", "peak_gb", "step_s")}
                 for r in report["layouts"])
    return JobAnswer(s, name, rows, report["usable_gb"], report["priced"], stack=report["stack"])


def job_figure(a: JobAnswer):
    """The top layouts as bars of estimated tokens/s/GPU, each labelled with its MFU and peak memory against
    the usable capacity."""
    import plotly.graph_objects as go

    from lib.viz import PALETTE, layout

    fig = go.Figure()
    rows = list(a.rows)[::-1]           # the fastest on top
    fig.add_trace(go.Bar(
        y=[r["label"] for r in rows], x=[r["tokens_per_s_per_gpu"] for r in rows], orientation="h",
        marker_color=[PALETTE["accent"] if r is a.rows[0] else PALETTE["primary"] for r in rows],
        text=[f"MFU {r['mfu']:.0%}, {r['peak_gb']:.0f}/{a.usable_gb:.0f} GB" for r in rows],
        textposition="inside", insidetextanchor="start", showlegend=False,
        hovertemplate="%{y}: %{x:,.0f} tokens/s/GPU<extra></extra>"))
    s = a.settings
    fig.update_xaxes(title_text="tokens/s/GPU (estimated, practice)")
    fig.update_yaxes(automargin=True)
    title = (f"{a.model}, {s.gpus:,} x {s.gpu}, batch {s.global_batch:,} x {s.seq_len:,} tokens, {a.stack}: "
             "the fastest layouts that fit" if not a.error else a.error)
    return layout(fig, title, height=140 + 45 * max(len(rows), 1))


class PlanYourJob(LiveOrTwin):
    """The planner for the reader's own job as a widget; its static twin is :func:`job_figure` at the
    settings it was made with."""

    runs_in_page = True  # chapter 9 runs it under a live-widget block ("Run it live")
    TWIN_ID = "galv-job-twin"  # not the section's anchor id

    def __init__(self, model="llama3-8b", gpus: int = 64, gpu: str = "h100-sxm-80gb",
                 global_batch: int = 512, seq_len: int = 4096, live: bool = True, stack: str = "megatron-lm",
                 fabric: str = ""):
        self.settings = JobSettings(model, gpus, gpu, global_batch, seq_len, stack=stack, fabric=fabric)
        self.live = live
        self.last: JobAnswer | None = None
        self._built = None

    def current_settings(self) -> JobSettings:
        import json

        w = self._widgets()
        model = w["model"].value
        if model == CUSTOM:
            try:
                model = json.loads(w["fields"].value)
            except json.JSONDecodeError as e:
                model = f"config fields: not JSON ({e.msg} at character {e.pos})"
        return JobSettings(model, w["gpus"].value, w["gpu"].value, w["batch"].value, w["seq"].value,
                           stack=w["stack"].value, fabric=w["fabric"].value)

    def refresh(self, *_):
        """Plan the controls' job now: the headline and the figure."""
        from IPython.display import display

        from lib.viz import PlotlyHTML, to_html

        w = self._widgets()
        a = job_answer(self.current_settings())
        self.last = a
        w["summary"].value = f"<b>{html.escape(a.headline())}</b>"
        w["out"].clear_output(wait=True)
        if not a.error:
            with w["out"]:
                display(PlotlyHTML(to_html(job_figure(a), "galv-job-live")))

    def _build(self) -> dict:
        import ipywidgets as W

        from .search.analytic import SHAPES
        from .search.fabrics import fabric_names
        from .stacks import resolve_stack, stack_names

        s = self.settings
        wide = dict(layout=W.Layout(width="320px"), style=dict(description_width="110px"))
        start = s.model if isinstance(s.model, str) and s.model in SHAPES else CUSTOM
        w = dict(
            model=W.Dropdown(options=[*sorted(SHAPES), CUSTOM], value=start, description="model", **wide),
            fields=W.Textarea(value=EXAMPLE_FIELDS, description="HF fields",
                              layout=W.Layout(width="640px", height="80px")),
            gpus=W.BoundedIntText(value=s.gpus, min=1, max=1 << 20, description="GPUs", **wide),
            gpu=W.Dropdown(options=list(JOB_GPUS), value=s.gpu, description="GPU type", **wide),
            batch=W.BoundedIntText(value=s.global_batch, min=1, max=1 << 30, description="global batch",
                                   **wide),
            seq=W.BoundedIntText(value=s.seq_len, min=1, max=1 << 20, description="sequence length",
                                 **wide),
            stack=W.Dropdown(options=stack_names(), value=resolve_stack(s.stack), description="software stack",
                             **wide),
            fabric=W.Dropdown(options=[("the GPU type's port", ""), *((f, f) for f in fabric_names())],
                              value=s.fabric, description="fabric", **wide),
            summary=W.HTML(), out=W.Output())
        for k in ("model", "fields", "gpus", "gpu", "batch", "seq", "stack", "fabric"):
            w[k].observe(self.refresh, "value")
        w["box"] = W.VBox([W.HBox([W.VBox([w["model"], w["gpus"], w["gpu"], w["fabric"]]),
                                   W.VBox([w["batch"], w["seq"], w["stack"]])]),
                           w["fields"], w["summary"], w["out"]])
        return w

    def static_twin(self):
        return job_figure(job_answer(self.settings))
