"""Tasks: prompts, reference answers and rewards (repeat, JSONL math, verifier)."""
