"""The one slow GPU as a widget: GPUs, checkpoint interval and backups, with the five ways beside them.

:func:`live_answer` is the pure function behind it (``lib.straggler.report.live_view``: the five-ways
comparison and the interval curve at one setting). :class:`StragglerExplorer` puts ipywidgets sliders around
it. In CI and in book builds (``lib.book.in_ci()``) its ``show()`` shows the static twin instead, the chapter's
slider figures over precomputed frames (``lib.straggler.figures``), with a note saying where to run it live;
when the chapter already shows those figures above the cell (``twin_above=True``) only the note is shown.
The same conventions as ``lib.placement.widgets`` and ``lib.galvatron.widgets``.
Used in: book/stragglers/01_the_one_slow_gpu.
"""

from __future__ import annotations

from dataclasses import dataclass

from lib.widget_base import LiveOrTwin, live_page
from lib.straggler.model import FailureModel, StepModel
from lib.straggler.settings import check_setting

#: Where a reader runs the live widget; shown under every static twin (the same words in every part).
#: When the twin is already on the page, above the widget's cell.
ABOVE_NOTE = ("The slider figures above are this widget's static twin. To move the GPUs, the interval and the "
              "backups together, open this page on Colab or Binder (the rocket launch button at the top of "
              "the page) and run the cell.")
ABOVE_NOTE_IN_PAGE = ("The slider figures above are this widget's static twin. To move the GPUs, the interval "
                      "and the backups together, press \u201cRun it live\u201d below (it runs in your browser), "
                      "or open this page on Colab or Binder (the rocket launch button at the top of the page) "
                      "and run the cell.")
GPU_CHOICES = (8, 64, 512, 1024, 4096, 16_384, 65_536)


@dataclass(frozen=True)
class StragglerSettings:
    """One setting of the sliders: ``n_gpus``, ``interval_min`` (checkpoint interval, minutes), ``backup_pct``
    (backup GPUs, % of the cluster), over a run of ``days`` with failure times from ``seed``."""

    n_gpus: int = 16_384
    interval_min: float = 120.0
    backup_pct: float = 0.0
    days: float = 14.0
    seed: int = 0

    def __post_init__(self):  # the command line's bounds (lib.straggler.settings): 10^12 GPUs is one line
        for name in ("n_gpus", "interval_min", "backup_pct", "days", "seed"):
            object.__setattr__(self, name, check_setting(name, getattr(self, name)))


def live_answer(settings: StragglerSettings, step: StepModel = StepModel(),
                failure: FailureModel = FailureModel()):
    """(the five-ways ``Comparison``, the interval figure at this one setting): what the sliders redraw."""
    from lib.straggler.report import live_view

    s = settings
    return live_view(s.n_gpus, float(s.interval_min), float(s.backup_pct), float(s.days), s.seed, step, failure)


class StragglerExplorer(LiveOrTwin):
    """Sliders over GPUs, checkpoint interval and backups redrawing :func:`live_answer`. ``show()`` displays
    the live widget in a running kernel, or the static twin with a note under CI and in book builds."""

    runs_in_page = True  # the chapter runs it under a live-widget block ("Run it live")

    TWIN_ID = "straggler-twin"  # not the section's anchor id

    def __init__(self, n_gpus: int = 16_384, interval_min: float = 120.0, backup_pct: float = 0.0,
                 days: float = 14.0, seed: int = 0, step: StepModel = StepModel(),
                 failure: FailureModel = FailureModel(), live: bool = True, twin_above: bool = False):
        self.settings = StragglerSettings(n_gpus, float(interval_min), float(backup_pct), float(days), seed)
        self.step, self.failure, self.live, self.twin_above = step, failure, live, twin_above
        self.comparison = self.figure = None
        self._built = None

    def current_settings(self) -> StragglerSettings:
        w, s = self._widgets(), self.settings
        return StragglerSettings(w["n_gpus"].value, float(w["interval_min"].value), float(w["backup_pct"].value),
                                 s.days, s.seed)

    def refresh(self, *_):
        """Redraw the five ways and the interval curve at the sliders' setting."""
        from IPython.display import display

        from lib.straggler.report import five_ways_html
        from lib.viz import PlotlyHTML, to_html

        w = self._widgets()
        self.comparison, self.figure = live_answer(self.current_settings(), self.step, self.failure)
        w["table"].value = five_ways_html(self.comparison)._repr_html_()
        w["out"].clear_output(wait=True)
        with w["out"]:
            display(PlotlyHTML(to_html(self.figure, "straggler-live")))

    def _build(self) -> dict:
        import ipywidgets as W

        s = self.settings
        style = dict(description_width="140px")
        w = dict(
            n_gpus=W.SelectionSlider(options=sorted({*GPU_CHOICES, s.n_gpus}), value=s.n_gpus, description="GPUs",
                                     continuous_update=False, style=style),
            interval_min=W.FloatLogSlider(value=s.interval_min, base=10, min=0, max=2.7, step=0.02,
                                          description="interval (min)", continuous_update=False, style=style),
            backup_pct=W.FloatSlider(value=s.backup_pct, min=0, max=10, step=0.5, description="backups (%)",
                                     continuous_update=False, style=style),
            table=W.HTML(), out=W.Output())
        for k in ("n_gpus", "interval_min", "backup_pct"):
            w[k].observe(self.refresh, "value")
        w["box"] = W.VBox([w["n_gpus"], w["interval_min"], w["backup_pct"], w["table"], w["out"]])
        return w

    def answered(self) -> bool:
        return self.comparison is not None

    def static_twin(self):
        """The chapter's interval figure over precomputed frames (``figures.interval_figure``)."""
        from lib.straggler.figures import interval_choices, interval_figure
        from lib.straggler.model import young_daly_min

        s = self.settings
        yd = young_daly_min(self.failure.cluster_mtbf_min(s.n_gpus))
        return interval_figure(s.n_gpus, s.backup_pct / 100, interval_choices(yd, extra=(s.interval_min,)),
                               s.interval_min, s.days, s.seed, self.failure)

    def show_twin_figure(self) -> bool:
        return not self.twin_above  # the chapter shows the slider figures above the cell

    def twin_note(self) -> str:
        if not self.twin_above:
            return super().twin_note()
        return ABOVE_NOTE_IN_PAGE if live_page() else ABOVE_NOTE