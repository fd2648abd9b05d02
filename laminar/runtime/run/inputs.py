"""A run's input files, checked before anything starts or is written: the model directory
(``runtime.model.type = pretrained``) and the task file (``runtime.task.type = jsonl``).
A bad one is a ``LaminarError`` naming the file (and line): exit code 2."""

from __future__ import annotations

from typing import Any


def check_inputs(cfg: Any) -> None:
    """Raise ``ModelDirError`` / ``TaskFileError`` for a bad model directory or task file."""
    rt = cfg.runtime
    if rt.model.type == "pretrained":
        from laminar.runtime.models.pretrained import check_model_dir

        check_model_dir(rt.model.path)
    if rt.task.type == "jsonl":
        from laminar.runtime.tasks.jsonl import load_rows

        load_rows(rt.task.path)
