"""The largest model and job sizes any reader accepts: one set of bounds for the published runs' schema
(``published.py``) and a Hugging Face ``config.json`` read by ``job_plan`` (the command line and chapter 9's
"plan your own job" widget). Far beyond any published run, so a larger value is a typo. Dependency-free, so the
browser's live build can check a model without pydantic."""

#: Upper bound of each size (every size is at least 1).
LIMITS = {"layers": 4096, "hidden": 1 << 19, "heads": 1 << 12, "kv_heads": 1 << 12, "ffn": 1 << 21,
          "vocab": 1 << 23, "seq_len": 1 << 22, "gpus": 1 << 20, "gpus_per_node": 1 << 10,
          "global_batch": 1 << 24}

#: A Hugging Face ``config.json``'s names for those sizes.
HF_FIELDS = {"num_hidden_layers": "layers", "hidden_size": "hidden", "num_attention_heads": "heads",
             "num_key_value_heads": "kv_heads", "intermediate_size": "ffn", "vocab_size": "vocab"}
