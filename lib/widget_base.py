"""What every chapter widget shares: live in a running kernel, its static twin in CI and in the published book.

A widget class subclasses :class:`LiveOrTwin` and gives ``_build()`` (its ipywidgets controls, a dict with the
displayable ``"box"``), ``refresh()`` (answer the controls' settings now), ``static_twin()`` (a plotly figure drawn
from the same pure function) and ``TWIN_ID`` (the twin's div id: not a section's anchor, or the anchor wins and
the figure never draws). ``show()`` decides: the live widget only when asked (``live``) and not under CI or a
book build (``lib.book.in_ci()``, also set by batch reruns); otherwise the twin and :data:`LIVE_NOTE`. The
controls are built on first use only, so CI never creates them. Used in: lib/placement/widgets.py,
lib/galvatron/widgets.py, lib/straggler/widgets.py.
"""

from __future__ import annotations

import html
import os

from lib import book

LIVE_NOTE = ("This is the static twin of a live widget. To play it, open this page on Colab or Binder "
             "(the rocket launch button at the top of the page) and run the cell.")
#: The same note on a page of a live build (``make book LIVE=1``), whose "Run it live" button sits under the cell.
LIVE_NOTE_IN_PAGE = ("This is the static twin of a live widget. To play it here, press \u201cRun it live\u201d "
                     "below (it runs in your browser), or open this page on Colab or Binder (the rocket launch "
                     "button at the top of the page) and run the cell.")


def live_page() -> bool:
    """Whether this page is being built with its live part (``make book LIVE=1`` exports ``BOOK_LIVE=1``)."""
    return os.environ.get("BOOK_LIVE", "") not in ("", "0")


def live_allowed(live: bool = True) -> bool:
    """Whether ``show()`` builds the live widget: asked for, and not in CI or a book build."""
    return bool(live) and not book.in_ci()


class LiveOrTwin:
    TWIN_ID = "widget-twin"
    live: bool = True
    #: Whether the chapter puts this widget under a ``live-widget`` block (a "Run it live" button in a live build).
    runs_in_page: bool = False
    _built: dict | None = None

    def _widgets(self) -> dict:
        if self._built is None:
            self._built = self._build()
        return self._built

    def _build(self) -> dict:  # pragma: no cover - every widget defines it
        raise NotImplementedError

    def answered(self) -> bool:
        """Whether the controls' settings have been answered once (``refresh`` sets ``last``)."""
        return getattr(self, "last", None) is not None

    def widget(self):
        """The live widget (built on first call, answered at once)."""
        w = self._widgets()
        if not self.answered():
            self.refresh()
        return w["box"]

    def twin_note(self) -> str:
        """The line under the static twin (where to run the widget live)."""
        return LIVE_NOTE_IN_PAGE if self.runs_in_page and live_page() else LIVE_NOTE

    def show_twin_figure(self) -> bool:
        """Whether ``show()`` draws the twin (a chapter may already show it above the cell)."""
        return True

    def show(self):
        """Display the live widget, or (CI, book builds, ``live=False``) the static twin and the note."""
        from IPython.display import HTML, display

        from lib.viz import show

        if live_allowed(self.live):
            display(self.widget())
            return
        if self.show_twin_figure():
            show(self.static_twin(), self.TWIN_ID)
        display(HTML(f"<p><em>{html.escape(self.twin_note())}</em></p>"))
