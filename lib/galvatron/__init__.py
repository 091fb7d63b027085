"""Galvatron, rebuilt: layer-wise hybrid parallelism (DP, SDP, TP, PP) chosen by a dynamic program.

``strategies`` (decision trees), ``profiles`` (layer profiles: published, analytic), ``cost`` (memory and
time), ``search`` (DP, outer loops, baselines, Plan). Numpy only; ``runtime`` (torch) is separate.
Used in: book/galvatron/.
"""

from .strategies import Strategy, generate, restrict  # noqa: F401
from .profiles import (ClusterProfile, LayerProfile, ModelProfile, load_cluster, load_model,  # noqa: F401
                       model_names, published_cluster)
from .search import Plan, SearchResult, evaluate_plan, search  # noqa: F401
