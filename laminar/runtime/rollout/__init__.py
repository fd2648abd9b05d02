"""A rollout replica: its Ray worker, its engine (vLLM), its machine side, its streams."""
