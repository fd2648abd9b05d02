"""Experiment tracking: the step metrics of steps.csv sent to TensorBoard, W&B (offline), MLflow."""
