"""Environments of your own (``runtime.task.type: python``): loaded, called off-loop, checked."""
