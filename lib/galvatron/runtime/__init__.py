"""Galvatron's second judge: a plan run for real on ``torch.distributed`` (gloo on CPU, NCCL on GPUs), and the
profiler that measures the cost model's constants. Imports the search's profiles and plans, never the reverse.
Used in: book/galvatron/04_from_plan_to_run."""
