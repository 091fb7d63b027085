"""What the chapter's section "The page against production clusters" prints and quotes: every published
observation beside the page's model and the production-calibrated one, the errors by kind for the calibration
set and the held-out set apart, the fitted constants with what they were fitted to, and the numbers the prose
quotes (glue). Pure functions, no plotting (the figure is ``lib/straggler/production_figures.py``).
Used in: book/stragglers/01_the_one_slow_gpu.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lib.html_table import HTMLTable
from lib.straggler import calibration as cal
from lib.straggler import predict as pr
from lib.straggler.production import KINDS, SHARE_KINDS, Observation, load_many
from lib.straggler.switches import PAGE, PRODUCTION, Switches

SETS = {"calibration": "calibration set", "heldout": "held out"}


@dataclass(frozen=True)
class Comparison:
    """The observations with their predictions under the page's switches and the production ones."""

    observations: tuple  # (path, Observation) pairs
    page: tuple  # Prediction per observation, same order
    production: tuple

    def set_of(self, i: int) -> str:
        return Path(self.observations[i][0]).stem

    def named(self, name: str) -> tuple[Observation, pr.Prediction, pr.Prediction]:
        for (path, o), a, b in zip(self.observations, self.page, self.production):
            if o.name == name:
                return o, a, b
        raise KeyError(name)

    def subset(self, stem: str | None = None, kind: str | None = None) -> list[int]:
        return [i for i, (path, o) in enumerate(self.observations)
                if (stem is None or Path(path).stem == stem) and (kind is None or o.kind == kind)]


def compare(paths=(cal.CALIBRATION, cal.HELDOUT), page: Switches = PAGE,
            production: Switches = PRODUCTION) -> Comparison:
    pairs = tuple(load_many([str(p) for p in paths]))
    return Comparison(pairs, tuple(pr.predict_all(pairs, page)), tuple(pr.predict_all(pairs, production)))


def by_set(cmp: Comparison) -> dict:
    """``{(set, model): by_kind}`` for set in calibration/heldout and model in page/production."""
    out = {}
    for stem in SETS:
        idx = cmp.subset(stem)
        out[(stem, "page")] = pr.by_kind([cmp.page[i] for i in idx])
        out[(stem, "production")] = pr.by_kind([cmp.production[i] for i in idx])
    return out


def fmt_value(kind: str, v) -> str:
    if v is None:
        return "none"
    if kind in SHARE_KINDS:
        return f"{v:.1%}"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def fmt_error(kind: str, e) -> str:
    if e is None:
        return "no model"
    return f"{100 * e:+.1f} pt" if kind in SHARE_KINDS else f"{e:+.0%}"


def fmt_abs(kind: str, e) -> str:
    return f"{100 * e:.1f} pt" if kind in SHARE_KINDS else f"{e:.0%}"


def table(cmp: Comparison, caption: str) -> HTMLTable:
    """One row per observation: its set, kind, published value, and each model's prediction and error."""
    rows = []
    fitted = cal.fitted_names()
    for i, (path, o) in enumerate(cmp.observations):
        a, b = cmp.page[i], cmp.production[i]
        where = "fitted" if o.name in fitted else SETS[cmp.set_of(i)]
        rows.append((o.name, where, o.kind.replace("_", " "), fmt_value(o.kind, o.value), fmt_value(o.kind, a.predicted),
                     fmt_error(o.kind, a.error), fmt_value(o.kind, b.predicted), fmt_error(o.kind, b.error)))
    return HTMLTable(("observation", "set", "kind", "published", "page", "error", "production", "error"),
                     tuple(rows), caption, nowrap=(3, 4, 5, 6, 7), left=(0, 1, 2))


def errors_table(cmp: Comparison, caption: str) -> HTMLTable:
    """Median and largest absolute error per kind: calibration set and held-out set apart, both models."""
    s = by_set(cmp)
    rows = []
    for stem in SETS:
        for kind in KINDS:
            a, b = s[(stem, "page")].get(kind), s[(stem, "production")].get(kind)
            if a is None and b is None:
                continue
            n = (b or a)["n"]

            def cell(x, key):
                return fmt_abs(kind, x[key]) if x else "no model"

            rows.append((SETS[stem], kind, str(n), cell(a, "median_abs_error"), cell(a, "max_abs_error"),
                         cell(b, "median_abs_error"), cell(b, "max_abs_error")))
    return HTMLTable(("set", "kind", "n", "page: median", "page: largest", "production: median",
                      "production: largest"), tuple(rows), caption, nowrap=(3, 4, 5, 6), left=(0, 1))


def constants_table(caption: str) -> HTMLTable:
    """The production switches' constants, each with the observations it was fitted to (or its source)."""
    rows = []
    for c in cal.fitted_constants():
        value = f"{c['value']:,.0f}" if abs(c["value"]) >= 100 else f"{c['value']:.3g}"
        basis = ("fitted to " + ", ".join(c["fitted_to"]) if "fitted_to" in c else
                 "quoted: " + c["quoted_from"] if "quoted_from" in c else "assumed: " + c["assumed"])
        rows.append((c["switch"], c["name"], f"{value} {c['unit']}".strip(), basis))
    return HTMLTable(("switch", "constant", "value", "basis"), tuple(rows), caption, nowrap=(2,), left=(0, 1, 3))


def glue_values(cmp: Comparison) -> dict:
    """The numbers the section's prose quotes: glue name -> text."""
    def pred(name, which="production"):
        o, a, b = cmp.named(name)
        p = a if which == "page" else b
        return fmt_value(o.kind, p.predicted)

    def err(name, which="production"):
        o, a, b = cmp.named(name)
        return fmt_error(o.kind, (a if which == "page" else b).error)

    alpha, _ = cal.size_law()
    mu, sigma = cal.straggler_fit()
    s = by_set(cmp)
    kokolis_ettr = [i for i in cmp.subset("calibration", "ettr") if cmp.observations[i][1].name.startswith("rsc")]
    g = {
        "prod_n_obs": f"{len(cmp.observations)}",
        "prod_n_cal": f"{len(cmp.subset('calibration'))}", "prod_n_held": f"{len(cmp.subset('heldout'))}",
        "prod_llama_pred": pred("llama3-405b-interruptions", "page"),
        "prod_llama_err": err("llama3-405b-interruptions", "page"),
        "prod_mttf8_page": pred("rsc1-8gpu-mttf", "page"), "prod_mttf8_prod": pred("rsc1-8gpu-mttf"),
        "prod_mttf1024_page": pred("rsc1-1024gpu-mttf", "page"),
        "prod_mttf1024_err": err("rsc1-1024gpu-mttf"),
        "prod_mttf16k_prod": pred("rsc1-16k-mttf-projected"),
        "prod_alpha": f"{alpha:.2f}",
        "prod_a100_mtbf": f"{cal.A100_MTBF_H:,.0f} h", "prod_h100_mtbf": f"{cal.GPU_MTBF_H['h100-sxm-80gb']:,.0f} h",
        "prod_ettr60_page": pred("rsc1-16k-ettr-60min", "page"), "prod_ettr60_prod": pred("rsc1-16k-ettr-60min"),
        "prod_ettr_kok_max": fmt_abs("ettr", max(abs(cmp.production[i].error) for i in kokolis_ettr)),
        "prod_ettr_kok_max_page": fmt_abs("ettr", max(abs(cmp.page[i].error) for i in kokolis_ettr)),
        "prod_byte_pred": pred("byterobust-9600gpu-ettr"),
        "prod_share_page": pred("bytedance-straggler-jobs", "page"),
        "prod_waste_page": pred("bytedance-straggler-waste", "page"),
        "prod_falcon_prod": pred("falcon-fail-slow-jct"), "prod_falcon_page": pred("falcon-fail-slow-jct", "page"),
        "prod_mu": f"{mu:.2f}", "prod_sigma": f"{sigma:.2f}",
        "prod_opt_page": pred("opt175b-restarts-16-days", "page"), "prod_opt_prod": pred("opt175b-restarts-16-days"),
        "prod_bloom_page": pred("bloom176b-gpu-failures-per-week", "page"),
        "prod_bloom_prod": pred("bloom176b-gpu-failures-per-week"),
        "prod_faulty_pred": pred("llama3-cause-faulty-gpu"), "prod_gpu_all_pred": pred("llama3-cause-gpu-all"),
    }
    m = pr.mtbf_min("h100-sxm-80gb", 9_600, PAGE)
    g["prod_byte_ckpt_cost"] = f"{(2 * pr.PAGE_FAILURE.checkpoint_min / m) ** 0.5:.1%}"
    o, _, _ = cmp.named("llama3-405b-ettr")
    g["prod_llama_ettr_growing"] = fmt_value("ettr", pr.predict(o, PRODUCTION.with_(restart="growing")).predicted)
    for stem in SETS:
        for model in ("page", "production"):
            for kind in ("interruptions", "mttf_hours", "ettr"):
                x = s[(stem, model)].get(kind)
                if x:
                    g[f"prod_{stem}_{model}_{kind}_median"] = fmt_abs(kind, x["median_abs_error"])
    return g
