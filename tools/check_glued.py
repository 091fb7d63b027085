"""The built book's glued numbers: none may show as a tuple or a list.

myst-nb's ``{glue:text}`` role reads the glued text back with ``ast.literal_eval``: a bare ``32,768`` became
the tuple ``(32, 768)`` on chapter 9's page. ``lib.book.glue`` now quotes such text; this check reads every
pasted value in the built HTML (``<span class="pasted-text">`` and ``pasted-inline``) and fails on one that
looks like a tuple or a list of numbers, e.g. ``(2, 667)`` or ``[65, 536]``.

    python tools/check_glued.py _build/html

Prints one line per offending value (page: value) and exits 1 on any; exits 2 on a missing folder.
"""

from __future__ import annotations

import argparse
import glob
import html
import os
import re
import sys

#: A pasted value (the text inside myst-nb's glue spans; nested tags dropped).
_PASTED = re.compile(r'<span class="[^"]*\bpasted-(?:text|inline)\b[^"]*"[^>]*>(.*?)</span>', re.S)
_TAGS = re.compile(r"<[^>]+>")
#: A sequence of numbers in brackets: what a glued "32,768" or "2,667" turns into.
_SEQUENCE = re.compile(r"^\s*[(\[]\s*-?[\d.]+(?:\s*,\s*-?[\d.]+)+\s*,?\s*[)\]]\s*$")


def glued_sequences(page_html: str) -> list[str]:
    """The pasted values of one page that show as a tuple or list of numbers."""
    values = (html.unescape(_TAGS.sub("", m.group(1))) for m in _PASTED.finditer(page_html))
    return [v for v in values if _SEQUENCE.match(v)]


def check(html_root: str) -> dict[str, list[str]]:
    """Map each page (relative to ``html_root``) with glued tuples to them."""
    bad = {}
    for path in sorted(glob.glob(os.path.join(html_root, "**", "*.html"), recursive=True)):
        with open(path, encoding="utf-8") as f:
            found = glued_sequences(f.read())
        if found:
            bad[os.path.relpath(path, html_root)] = found
    return bad


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("html_root", help="the built book, e.g. _build/html")
    args = ap.parse_args(argv)
    if not os.path.isdir(args.html_root):
        print(f"html_root {args.html_root!r}: no such folder (build the book first: make book)", file=sys.stderr)
        return 2
    bad = check(args.html_root)
    for page, values in bad.items():
        for v in values:
            print(f"{page}: glued value shown as a tuple: {v}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
