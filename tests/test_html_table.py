"""lib/html_table.py: the HTML tables chapters display instead of wide text."""

import pytest

from lib.html_table import HTMLTable


def test_html_table_escapes():
    h = HTMLTable(("a<b",), (("x & y",),), "c>d")._repr_html_()
    assert "a&lt;b" in h and "x &amp; y" in h and "c&gt;d" in h


def test_html_table_refuses_ragged_rows_and_aligns_numbers_right():
    with pytest.raises(ValueError):
        HTMLTable(("a", "b"), (("x",),))
    h = HTMLTable(("a", "b"), (("x", "1"),), nowrap=(1,))._repr_html_()
    assert "text-align:left" in h and "text-align:right;vertical-align:top;white-space:nowrap" in h
    assert h.count("nowrap") == 1  # the cell, not its header
