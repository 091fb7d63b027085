"""Sphinx extension: drop repeated inline <script> blocks from each page.

With jupyter-book 1.0.4 + sphinx-thebe 0.3.1 the thebe configuration script (``const THEBE_JS_URL = ...``)
is added twice to every page, and a browser then throws "Identifier 'THEBE_JS_URL' has already been declared"
on every page. The browser check (tools/browser_check.py) fails on any JavaScript error, so we deduplicate.
"""


def _dedupe(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, kept = set(), []
    for s in scripts:
        key = (getattr(s, "filename", None) or "", getattr(s, "attributes", {}).get("body", ""))
        if key in seen:
            continue
        seen.add(key)
        kept.append(s)
    context["script_files"] = kept


def setup(app):
    app.connect("html-page-context", _dedupe, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
