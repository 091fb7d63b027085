"""Galvatron, rebuilt: layer-wise hybrid parallelism (DP, SDP, TP, PP) chosen by a dynamic program. One plan,
two judges, two subpackages; ``search`` never imports ``runtime``.

``search/`` (numpy only, the cost model's side): ``strategies`` (decision trees), ``profiles`` (published layer
profiles), ``analytic`` (profiles from a model's shape and a hardware profile), ``cost`` (memory and time),
``dynamic_program`` (the inner DP and its brute-force oracle), ``plan`` (the Plan and its JSON form), ``engine``
(outer loops, stage partitioning, baselines), ``figures``.
``runtime/`` (torch, the measured side): ``grid`` (one rank grid, every group), ``tp`` (collectives as autograd
functions), ``sdp``, ``model``, ``plan`` (the runtime's plan), ``stage`` (``StageRunner``), ``pipeline``,
``processes`` (starting ranks), ``jobs`` (what a rank does), ``launch``, ``profiler``, ``evaluate``
(estimated against measured). ``python -m lib.galvatron run`` runs a plan under ``torchrun``.
Beside them, the practice tools: ``published`` (runs as data), ``fills`` (unstated fields filled by search),
``stacks`` (software stacks as data), ``ranking`` (sweeps), ``validate`` and ``job_plan`` (``plan --model``).
Used in: book/galvatron/.
"""
