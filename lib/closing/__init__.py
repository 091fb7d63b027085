"""One run, all three problems: a searched hybrid plan, its stragglers and its failures on one cluster.

Used in: book/closing/01_one_run.
"""
