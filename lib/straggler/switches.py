"""The model's switches: where the production data asks the page's model to grow, each a named choice whose
default is the page's own, so the page's figures stay exact (the page's code paths are not touched).

=============== ============ ================================================================================
switch          page default production choice
=============== ============ ================================================================================
``rates``       ``page``     ``generation``: one per-GPU failure rate per hardware generation (H100: Llama 3,
                             A100: Kokolis et al.'s RSC-1 rate); the page uses Llama 3's H100 rate everywhere
``size_law``    ``inverse``  ``power``: a job of N GPUs fails at a rate proportional to N^alpha, alpha fitted
                             to Kokolis et al.'s measured MTTFs (the page: alpha = 1, MTTF = per-GPU MTBF / N)
``restart``     ``fixed``    ``growing``: the restart takes 5 min on one node and grows with log N to 20 min
                             at 16,000 GPUs (Kokolis et al.'s stated range of 5-20 min; assumed, not fitted)
``causes``      ``none``     ``llama3``: failure rates split by root cause as Llama 3's Table 5 counts them
``stragglers``  ``page``     ``fitted``: each job slowed by a persistent factor 1 + X, X log-normal, fitted to
                             Lin et al.'s share of slowed jobs and wasted GPU-hours
=============== ============ ================================================================================

The constants behind each choice, and the observations they were fitted to, are in
:mod:`lib.straggler.calibration`. Used in: ``python -m lib.straggler production`` and
book/stragglers/01_the_one_slow_gpu (section "The page against production clusters").
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace

CHOICES = {"rates": ("page", "generation"), "size_law": ("inverse", "power"), "restart": ("fixed", "growing"),
           "causes": ("none", "llama3"), "stragglers": ("page", "fitted")}


@dataclass(frozen=True)
class Switches:
    """One choice per switch (see the module table); the defaults are the page's model."""

    rates: str = "page"
    size_law: str = "inverse"
    restart: str = "fixed"
    causes: str = "none"
    stragglers: str = "page"

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if value not in CHOICES[f.name]:
                raise ValueError(f"switch {f.name}: {value!r} is not one of {', '.join(CHOICES[f.name])}")

    def to_dict(self) -> dict:
        return asdict(self)

    def with_(self, **changes) -> "Switches":
        return replace(self, **changes)


#: The page's model: every switch at its default.
PAGE = Switches()
#: The production-calibrated model: every switch the data supports (the growing restart is not among them: it
#: makes the published ETTRs worse, see the chapter).
PRODUCTION = Switches(rates="generation", size_law="power", causes="llama3", stragglers="fitted")
PROFILES = {"page": PAGE, "production": PRODUCTION}


def parse_switch(text: str, base: Switches) -> Switches:
    """``"name=value"`` applied to ``base``; ValueError naming the switch and the allowed values."""
    name, sep, value = text.partition("=")
    if not sep or name not in CHOICES:
        raise ValueError(f"--switch {text!r}: expected NAME=VALUE with NAME one of {', '.join(CHOICES)}")
    return base.with_(**{name: value})
