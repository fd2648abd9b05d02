"""The sharded trainer: rank actors (``ranks``), FSDP2 (``fsdp``), checkpoints, weight export."""
