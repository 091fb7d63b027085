"""Galvatron, rebuilt: layer-wise hybrid parallelism (DP, SDP, TP, PP) chosen by a dynamic program.

Search side (numpy only): ``strategies`` (decision trees), ``profiles`` (published layer profiles),
``analytic`` (profiles from a model's shape and a hardware profile), ``cost`` (memory and time),
``dynamic_program`` (the inner DP and its brute-force oracle), ``plan`` (the Plan and its JSON form),
``search`` (outer loops, stage partitioning, baselines).
Run side (torch): ``grid`` (one rank grid, every group), ``tp`` (collectives as autograd functions),
``rt_model``, ``rt_plan``, ``pipeline``, ``runtime``, ``profiler``, ``launch``, ``rt_jobs``, ``rt_eval``.
Used in: book/galvatron/.
"""

from .strategies import Strategy, generate, restrict  # noqa: F401
from .profiles import (ClusterProfile, LayerProfile, ModelProfile, load_cluster, load_model,  # noqa: F401
                       model_names, published_cluster)
from .search import Plan, SearchResult, evaluate_plan, search  # noqa: F401
