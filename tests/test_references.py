"""references.bib: every entry carries a link (doi, eprint or url) that the bibliography renders as one, and
every key the book cites is in it (issue 27). The bibliography is in one style with the text (issue 37): labels in
the text's author-year form, titles with their capitals, each arXiv id once, entries sorted by first author."""

import glob
import os
import re
import sys
import unicodedata

import pytest
import yaml
from pybtex.database import parse_file
from pybtex.plugin import find_plugin
from pybtex.richtext import Text

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIB = parse_file(os.path.join(ROOT, "references.bib"))
sys.path.insert(0, os.path.join(ROOT, "_ext"))
import bib_style  # noqa: E402  (the book's local extension)

bib_style.register()
with open(os.path.join(ROOT, "_config.yml"), encoding="utf-8") as _f:
    SPHINX = yaml.safe_load(_f)["sphinx"]


def book_style():
    """The pybtex style the book's bibliography uses (``bibtex_default_style``, sphinxcontrib-bibtex's
    default ``alpha`` when unset)."""
    return find_plugin("pybtex.style.formatting", SPHINX["config"].get("bibtex_default_style", "alpha"))()


def rendered(style=None) -> list:
    """The bibliography as the book renders it: (entry, label, text), in the style's order."""
    style = style or book_style()
    backend = find_plugin("pybtex.backends", "text")()
    entries = list(style.sort(BIB.entries.values()))
    labels = list(style.format_labels(entries))
    return [(e, lab, style.format_entry(lab, e).text.render(backend)) for e, lab in zip(entries, labels)]


@pytest.mark.parametrize("key", sorted(BIB.entries))
def test_every_entry_has_a_doi_eprint_or_url(key):
    fields = {k.lower() for k in BIB.entries[key].fields}
    assert fields & {"doi", "eprint", "url"}, f"{key}: add a doi, an arXiv eprint or a url"


def test_every_entry_renders_a_link():
    # the bibliography page uses pybtex's styles (sphinxcontrib-bibtex): each entry must come out with an <a href>
    style = book_style()
    backend = find_plugin("pybtex.backends", "html")()
    for entry in style.format_entries(BIB.entries.values()):
        html = entry.text.render(backend)
        assert re.search(r'<a href="https?://', html), f"{entry.key} renders no link: {html}"


def test_every_cited_key_is_in_the_bib():
    sources = [*glob.glob(os.path.join(ROOT, "book", "*", "*.md")), *glob.glob(os.path.join(ROOT, "*.md")),
               *glob.glob(os.path.join(ROOT, "_glossary", "*.md"))]
    cited = set()
    for path in sources:
        for keys in re.findall(r"\{cite(?::[a-z]+)?\}`([^`]+)`", open(path, encoding="utf-8").read()):
            cited.update(k.strip() for k in keys.split(","))
    assert cited, "found no citations"
    assert not cited - set(BIB.entries), f"cited but not in references.bib: {sorted(cited - set(BIB.entries))}"


def test_llama3_sorts_under_its_first_author():
    authors = BIB.entries["llama3herd2024"].persons["author"]
    assert str(authors[0].last_names[0]) == "Dubey"


def test_the_book_loads_the_style():
    assert SPHINX["local_extensions"].get("bib_style") == "_ext/"
    assert SPHINX["config"]["bibtex_reference_style"] == "author_year"
    assert isinstance(book_style(), bib_style.AuthorYearStyle)


def _in_text(entry) -> str:
    """A parenthetical citation's text, as sphinxcontrib-bibtex's author_year reference style prints it."""
    from pybtex.style.template import join
    from sphinxcontrib.bibtex.style.referencing.author_year import AuthorYearReferenceStyle
    from sphinxcontrib.bibtex.style.template import year

    st = AuthorYearReferenceStyle()
    node = join(sep=st.author_year_sep)[st.person.author_or_editor_or_title(full=False), year]
    return node.format_data({"entry": entry, "style": st}).render_as("text")


def test_labels_are_the_texts_author_year_form():
    # "[Dubey et al., 2024]" beside the text's "Dubey et al. [2024]", never "[DJP+24]"
    labels = {e.key: lab for e, lab, _ in rendered()}
    assert labels["llama3herd2024"] == "Dubey et al., 2024" and labels["dean2013tail"] == "Dean and Barroso, 2013"
    for key, entry in BIB.entries.items():
        assert labels[key] == _in_text(entry), key
    assert len(set(labels.values())) == len(labels), "two entries share a label"


def _words(title: str) -> list[str]:
    return re.findall(r"[\w][\w.-]*[\w]|\w", Text.from_latex(title).render_as("text"))


def test_titles_keep_their_capitals():
    # "Megatron-Turing NLG 530B", not "megatron-turing nlg 530b": every word is printed as the .bib writes it
    for entry, label, text in rendered():
        missing = [w for w in _words(entry.fields["title"]) if w not in text]
        assert not missing, f"{label}: title words changed: {missing} in {text}"


def _unbraced(title: str) -> str:
    depth, out = 0, []
    for ch in title:
        depth += (ch == "{") - (ch == "}")
        out.append(ch if depth == 0 and ch not in "{}" else " ")
    return "".join(out)


@pytest.mark.parametrize("key", sorted(BIB.entries))
def test_words_with_inner_capitals_are_braced(key):
    # so that any sentence-case style (other tools read the .bib too) keeps "530B", "GPUs", "SGD"
    title = BIB.entries[key].fields["title"]
    parts = [p for w in re.split(r"[\s:,]+", _unbraced(title)) for p in w.split("-")]
    bad = [p for p in parts if re.search(r".[A-Z]|\d[A-Za-z]", p)]
    assert not bad, f"{key}: brace {bad} in its title"


def test_each_arxiv_id_is_printed_once():
    for entry, label, text in rendered():
        eprint = entry.fields.get("eprint")
        if eprint:
            assert text.count(eprint) == 1, f"{label}: arXiv {eprint} printed {text.count(eprint)} times: {text}"
    ids = [e.fields["eprint"] for e in BIB.entries.values() if "eprint" in e.fields]
    assert len(ids) == len(set(ids)), "one arXiv id in two entries"


def _first_author(entry) -> str:
    person = entry.persons["author"][0]
    name = " ".join(str(n) for n in person.last_names).strip("{}")
    name = Text.from_latex(name).render_as("text")
    return unicodedata.normalize("NFKD", name).casefold()


def test_entries_are_sorted_by_first_author_then_year():
    # as author-year lists go: by first author, a sole author's works before those with co-authors, then year
    order = [(_first_author(e), len(e.persons["author"]) > 1, e.fields["year"]) for e, _, _ in rendered()]
    assert order == sorted(order), [a for a, b in zip(order, sorted(order)) if a != b][:4]
