"""Sphinx extension: the bibliography in the same author-year form as the citations in the text.

sphinxcontrib-bibtex cites author-year in the text (``bibtex_reference_style: author_year``: "Dubey et al.
[2024]", "[Dean and Barroso, 2013]"), but its default bibliography style, pybtex's ``alpha``, labels the entries
"[DJP+24]", sorts them by that label and puts every title in sentence case ("530b"). This registers the pybtex
style ``authoryear`` (``bibtex_default_style`` in _config.yml): labels as the text cites them (one author "Young",
two "Dean and Barroso", more "Dubey et al.", then ", year"), entries sorted by first author, year and title, and
titles as the .bib writes them.
"""

from __future__ import annotations

from pybtex.plugin import register_plugin
from pybtex.richtext import Text
from pybtex.style.formatting.unsrt import Style as UnsrtStyle
from pybtex.style.labels import BaseLabelStyle
from pybtex.style.sorting import BaseSortingStyle
from pybtex.style.template import field, sentence

NAME = "authoryear"


def _last(person) -> str:
    """A person's last name as the text prints it: prefix ("von") and last names, braces and LaTeX resolved."""
    parts = [*person.rich_prelast_names, *person.rich_last_names]
    return " ".join(p.render_as("text") for p in parts)


def authors_text(entry) -> str:
    """The author part of a citation: "Young", "Dean and Barroso", "Dubey et al." (editors if no author)."""
    persons = entry.persons.get("author") or entry.persons.get("editor") or []
    if not persons:
        return Text.from_latex(entry.fields.get("title", entry.key)).render_as("text")
    names = [_last(p) for p in persons]
    if len(names) == 1:
        return names[0]
    if len(names) == 2 and str(persons[1]) != "others":
        return f"{names[0]} and {names[1]}"
    return f"{names[0]} et al."


def author_year(entry) -> str:
    """An entry's label, as a parenthetical citation prints it: "Dubey et al., 2024"."""
    return f"{authors_text(entry)}, {entry.fields.get('year', 'n.d.')}"


class AuthorYearLabels(BaseLabelStyle):
    """Labels "Author et al., year", the text's own form."""

    def format_labels(self, sorted_entries):
        for entry in sorted_entries:
            yield author_year(entry)


class AuthorYearSorting(BaseSortingStyle):
    """Entries by their citation's author part, then year and title ("BigScience Workshop" under B)."""

    def sorting_key(self, entry):
        return (authors_text(entry).casefold(), entry.fields.get("year", ""),
                entry.fields.get("title", "").casefold())


class AuthorYearStyle(UnsrtStyle):
    """pybtex's unsrt entries with author-year labels, sorted by first author, year and title, titles kept as
    written (the .bib's capitals: "530B", "GPUs")."""

    default_label_style = NAME
    default_sorting_style = NAME

    def format_title(self, e, which_field, as_sentence=True):
        title = field(which_field)
        return sentence[title] if as_sentence else title


def register() -> None:
    """Make the style known to pybtex (the formatting style, its labels and its order)."""
    for group, klass in (("pybtex.style.labels", AuthorYearLabels), ("pybtex.style.sorting", AuthorYearSorting),
                         ("pybtex.style.formatting", AuthorYearStyle)):
        try:
            register_plugin(group, NAME, klass)
        except Exception:  # registered already (a second build in one process)
            pass


def setup(app):
    register()
    return {"parallel_read_safe": True, "parallel_write_safe": True}
