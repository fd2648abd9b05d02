"""Fixtures for the relay tier: a private shared-memory directory, removed after each test."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from pathlib import Path

import pytest

CONFIG_JSON = '{"model_type": "llama"}'


@pytest.fixture
def shm_base():
    """A fresh directory under /dev/shm (the temp dir where there is none), removed afterwards."""
    parent = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())
    base = parent / f"laminar-test-relay-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    yield base
    shutil.rmtree(base, ignore_errors=True)


def blob_for(version: int, nbytes: int) -> bytes:
    """Distinct, seeded bytes for each version (a stand-in for safetensors bytes)."""
    import numpy as np

    return np.random.default_rng(version).integers(0, 256, nbytes, dtype=np.uint8).tobytes()
