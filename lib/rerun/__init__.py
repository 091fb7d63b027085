"""Batch reruns of the book's chapters with a named parameter set, and building the book from such a rerun.

- :mod:`lib.rerun.params`: parameter sets (``params/*.yaml``) checked against what each chapter declares.
- :mod:`lib.rerun.execute`: run chapters with papermill into ``runs/<set>-<UTC stamp>/``, resumable, with a
  summary of what ran where.
- :mod:`lib.rerun.replay`: stage the book with a rerun's executed notebooks and build it without executing.

Command line: ``python -m lib.rerun --help`` (``make rerun PARAMS=cpu``, ``make book-from RUN=runs/...``).
"""
