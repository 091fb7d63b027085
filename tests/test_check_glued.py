"""tools/check_glued.py: a glued number shown as a tuple fails the built book."""

import os

import pytest

from tools import check_glued as cg

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _span(v, cls="pasted-text"):
    return f'<p>at <span class="{cls}">{v}</span> tokens</p>'


@pytest.mark.parametrize("value", ["(32, 768)", "(65, 536)", "(2, 667)", "[1, 5]", "(0.5, 1)"])
def test_a_glued_tuple_is_found(value):
    assert cg.glued_sequences(_span(value)) == [value]
    assert cg.glued_sequences(_span(value, "pasted-inline")) == [value]


@pytest.mark.parametrize("value", ["32,768", "2.5 GB", "(quoted from the paper)", "30%", "(7 runs)"])
def test_plain_values_pass(value):
    assert cg.glued_sequences(_span(value)) == []


def test_text_outside_glue_spans_is_not_judged():
    # a tensor shape printed by a code cell is not a glued value
    assert cg.glued_sequences("<pre>(32, 768)</pre>" + _span("32,768")) == []


def test_main_exits_1_on_a_tuple_and_2_on_a_missing_folder(tmp_path, capsys):
    (tmp_path / "ok.html").write_text(_span("32,768"))
    assert cg.main([str(tmp_path)]) == 0
    (tmp_path / "bad.html").write_text(_span("(32, 768)"))
    assert cg.main([str(tmp_path)]) == 1
    assert "bad.html: glued value shown as a tuple: (32, 768)" in capsys.readouterr().out
    assert cg.main([str(tmp_path / "nowhere")]) == 2


def test_the_glue_helper_pastes_no_tuple():
    # what lib.book.glue hands myst-nb for a number with thousands separators, through myst-nb's own role
    from myst_nb.core.variables import format_plain_text

    from lib.book import _Text

    for text in ("32,768", "65,536", "2,667", "1,024"):
        shown = format_plain_text(repr(_Text(text)), "")
        assert cg.glued_sequences(_span(shown)) == [] and shown == text


@pytest.mark.skipif(not os.path.isdir(os.path.join(ROOT, "_build", "html")), reason="the book is not built")
def test_the_built_book_shows_no_glued_tuple():
    assert cg.check(os.path.join(ROOT, "_build", "html")) == {}


def test_chapters_paste_glued_values_with_the_text_role_only():
    # lib.book.glue quotes text that literal_eval would misread; {glue:text} reads the quotes away, the
    # {glue:} role would show them
    import glob
    import re

    rx = re.compile(r"\{glue(?::any)?\}`|\{glue:\}`")
    bad = []
    for path in glob.glob(os.path.join(ROOT, "book", "**", "*.md"), recursive=True):
        with open(path, encoding="utf-8") as f:
            bad += [f"{os.path.relpath(path, ROOT)}:{n}" for n, line in enumerate(f, 1) if rx.search(line)]
    assert not bad, bad
