"""The trainer: its actor, GRPO, warm-up, and the sharded ranks (FSDP2, checkpoints, export)."""
