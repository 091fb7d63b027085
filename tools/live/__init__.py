"""The live part of the book: a torch-free wheel of ``lib``, JupyterLite with Pyodide served from the site,
and a "Run it live" button on the chapters that have a widget. See README ("Live in the browser")."""
