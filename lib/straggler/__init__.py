"""Part III, the one slow GPU: ``model`` (the step, backup, failure and checkpoint model, exact), ``estimates``
(the three estimates on paper), ``simulate`` (the event simulation of a run), ``figures`` and ``panels`` (the
chapter's linked figures), and ``cli`` (``python -m lib.straggler``). numpy only (plotly for the figures).
Used in: book/stragglers/."""
