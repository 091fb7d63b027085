"""Part III, the one slow GPU: ``model`` (the step, backup, failure and checkpoint model, exact), ``simulate`` (the
event simulation of a run), ``figures``, and ``cli`` (``python -m lib.straggler``). numpy only.
Used in: book/stragglers/."""
