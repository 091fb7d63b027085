"""references.bib: every entry carries a link (doi, eprint or url) that the bibliography renders as one, and
every key the book cites is in it (issue 27)."""

import glob
import os
import re

import pytest
from pybtex.database import parse_file
from pybtex.plugin import find_plugin

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIB = parse_file(os.path.join(ROOT, "references.bib"))


@pytest.mark.parametrize("key", sorted(BIB.entries))
def test_every_entry_has_a_doi_eprint_or_url(key):
    fields = {k.lower() for k in BIB.entries[key].fields}
    assert fields & {"doi", "eprint", "url"}, f"{key}: add a doi, an arXiv eprint or a url"


def test_every_entry_renders_a_link():
    # the bibliography page uses pybtex's styles (sphinxcontrib-bibtex): each entry must come out with an <a href>
    style = find_plugin("pybtex.style.formatting", "alpha")()
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
