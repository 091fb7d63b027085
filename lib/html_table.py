"""A small table that a notebook displays as HTML: wide tables on a page stay readable instead of running
past the text column as text would. No pandas. Used in: book/galvatron/04_from_plan_to_run,
book/stragglers/01_the_one_slow_gpu.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

_CELL = "padding:0.2em 0.6em;text-align:{align};vertical-align:top"


@dataclass(frozen=True)
class HTMLTable:
    """``head`` (column names), ``rows`` (tuples of cells, shown with ``str``), an optional ``caption``.

    ``nowrap`` lists the columns whose cells (not headers) never break (numbers, plan labels); ``left`` the columns aligned
    left (the others, numbers, align right). The first column is left-aligned unless told otherwise.
    """

    head: tuple
    rows: tuple
    caption: str = ""
    nowrap: tuple = ()
    left: tuple = (0,)

    def __post_init__(self):
        bad = [i for i, r in enumerate(self.rows) if len(r) != len(self.head)]
        if bad:
            raise ValueError(f"every row needs {len(self.head)} cells like the head; rows {bad} do not")

    def _style(self, i: int, head: bool = False) -> str:
        s = _CELL.format(align="left" if i in self.left else "right")
        return s + (";white-space:nowrap" if i in self.nowrap and not head else "")  # headers may wrap

    def _repr_html_(self) -> str:
        cap = f"<caption>{html.escape(self.caption)}</caption>" if self.caption else ""
        th = "".join(f'<th style="{self._style(i, head=True)}">{html.escape(str(c))}</th>' for i, c in enumerate(self.head))
        body = "".join("<tr>" + "".join(f'<td style="{self._style(i)}">{html.escape(str(c))}</td>'
                                        for i, c in enumerate(r)) + "</tr>" for r in self.rows)
        return f'<table style="font-size:0.9em">{cap}<thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>'

    def __repr__(self) -> str:  # a plain-text view for terminals
        return "\n".join(" | ".join(map(str, r)) for r in (self.head, *self.rows))
