"""Sharded loading: a model built on the meta device, each rank reading only its own rows.

A trainer rank never materialises the whole model. :func:`empty_model` builds the Hugging Face
model with every parameter on the meta device (buffers, such as rotary frequencies, are real:
they are computed at construction and hold no weights); the caller shards it with FSDP2
(``fully_shard`` works on meta parameters); :func:`materialize` gives each rank's shards real,
uninitialised storage; :func:`load_shards` fills them from the ``*.safetensors`` files one
tensor at a time.

Each rank reads its own rows rather than one rank per machine reading and scattering: FSDP2
shards every parameter on dim 0, so a rank's rows are one contiguous byte range of the file,
read with one ``pread`` (no mmap: touched file pages would count in the rank's memory until the
mapping closes). No collective is needed, ranks on different machines read their local copy of
the model directory (which the runtime requires anyway: engines start from it), and no rank
ever holds more than its shard plus the rows of the tensor being converted. The cost is that
n ranks on a machine read the file once between them, in n pieces, instead of once each.

Tied parameters (``lm_head`` sharing the input embedding) are one parameter, filled once. The
file's dtype (bf16 for Qwen2.5) is converted to the shard's (the fp32 master weights) rows by
rows. A resume from a DCP checkpoint takes the same empty, sharded model and lets DCP fill it
instead of the safetensors files.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# safetensors dtype codes -> torch dtype names
_ST_DTYPES = {
    "F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
    "I64": "int64", "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8", "BOOL": "bool",
}  # fmt: skip


@contextmanager
def params_on_meta() -> Iterator[None]:
    """Within the block, every parameter a module registers is moved to the meta device as
    it is registered (buffers stay where they were made): constructing a model allocates
    one parameter's storage at a time, transiently, and keeps none."""
    import torch

    register = torch.nn.Module.register_parameter

    def on_meta(module: Any, name: str, param: Any) -> None:
        register(module, name, param)
        p = module._parameters.get(name)
        if p is not None and p.device.type != "meta":
            module._parameters[name] = type(p)(p.to("meta"), requires_grad=p.requires_grad)

    torch.nn.Module.register_parameter = on_meta  # type: ignore[method-assign]
    try:
        yield
    finally:
        torch.nn.Module.register_parameter = register  # type: ignore[method-assign]


def empty_model(path: str | Path, dtype: str = "float32") -> Any:
    """The causal LM of the model directory ``path`` with its parameters on the meta device
    (in ``dtype``) and its buffers real; no weight is read."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(str(path))
    with params_on_meta():
        model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))
    model.tie_weights()
    return model


def materialize(model: Any, device: str) -> Any:
    """Real (uninitialised) storage on ``device`` for every (sharded) parameter of ``model``;
    buffers keep their values (``to_empty`` alone would leave them uninitialised)."""
    buffers = {name: b.detach().clone() for name, b in model.named_buffers()}
    model.to_empty(device=device)
    with _no_grad():
        for name, b in model.named_buffers():
            b.copy_(buffers[name])
    return model


@contextmanager
def _no_grad() -> Iterator[None]:
    import torch

    with torch.no_grad():
        yield


class Header:
    """One ``.safetensors`` file's tensors: name -> (dtype, shape, byte offset in the file)."""

    def __init__(self, path: Path):
        self.path = path
        with open(path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            meta = json.loads(f.read(n))
        meta.pop("__metadata__", None)
        self.tensors = {
            k: (_ST_DTYPES[v["dtype"]], tuple(v["shape"]), 8 + n + v["data_offsets"][0])
            for k, v in meta.items()
        }


def weight_files(path: str | Path) -> dict[str, Header]:
    """Tensor name -> the header of the file holding it, over every ``*.safetensors`` file of
    the model directory (headers only: a few kilobytes each)."""
    out: dict[str, Header] = {}
    for f in sorted(Path(path).glob("*.safetensors")):
        h = Header(f)
        out.update(dict.fromkeys(h.tensors, h))
    return out


def read_rows(header: Header, name: str, start: int, stop: int) -> Any:
    """Rows ``[start, stop)`` (dim 0) of tensor ``name``, in the file's dtype: one read."""
    import torch

    dtype_name, shape, offset = header.tensors[name]
    dtype = getattr(torch, dtype_name)
    shape = shape or (1,)  # a scalar: one row
    row = dtype.itemsize
    for d in shape[1:]:
        row *= d
    buf = bytearray((stop - start) * row)
    if buf:
        fd = os.open(header.path, os.O_RDONLY)
        try:
            got = os.preadv(fd, [buf], offset + start * row)
        finally:
            os.close(fd)
        if got != len(buf):
            raise OSError(f"{header.path}: short read of {name} ({got} of {len(buf)} bytes)")
        out = torch.frombuffer(buf, dtype=dtype)
    else:
        out = torch.empty(0, dtype=dtype)
    return out.reshape(stop - start, *shape[1:])


def _file_name(name: str, files: dict[str, Header], prefix: str) -> str | None:
    """The file's name for the model's tensor ``name`` (with or without the base-model prefix)."""
    if name in files:
        return name
    if prefix and name.startswith(prefix + ".") and name[len(prefix) + 1 :] in files:
        return name[len(prefix) + 1 :]
    if prefix and f"{prefix}.{name}" in files:
        return f"{prefix}.{name}"
    return None


def load_shards(model: Any, path: str | Path) -> dict:
    """Fill every parameter and persistent buffer of ``model`` (sharded by FSDP2 on dim 0, or
    plain) from the model directory's safetensors files, each rank its own rows; returns
    ``{"tensors": n, "bytes_read": b, "largest_rows_bytes": m}``. Raises ``KeyError`` naming
    the tensors the files lack."""
    import torch

    from laminar.runtime.train.fsdp import local_rows

    files = weight_files(path)
    prefix = getattr(model, "base_model_prefix", "") or ""
    seen: set[int] = set()
    missing: list[str] = []
    tensors = nbytes = largest = 0
    state = dict(model.named_parameters())
    persistent = model.state_dict(keep_vars=True)
    state.update({k: v for k, v in model.named_buffers() if k in persistent})
    with torch.no_grad():
        for name, param in state.items():
            if id(param) in seen:  # tied: one parameter under two names
                continue
            seen.add(id(param))
            key = _file_name(name, files, prefix)
            if key is None:
                missing.append(name)
                continue
            local, first = local_rows(param)
            full_rows = (files[key].tensors[key][1] or (1,))[0]
            if tuple(param.shape) != (files[key].tensors[key][1] or tuple(param.shape)):
                raise ValueError(
                    f"{files[key].path}: {key} has shape {files[key].tensors[key][1]}, "
                    f"the model expects {tuple(param.shape)}"
                )
            stop = min(full_rows, first + local.shape[0]) if local.dim() else 1
            rows = read_rows(files[key], key, first, stop)
            local.copy_(rows.reshape(local.shape).to(local.dtype))
            tensors += 1
            nbytes += rows.numel() * rows.element_size()
            largest = max(largest, rows.numel() * rows.element_size())
            del rows
    if missing:
        raise KeyError(f"{path}: no weights for {', '.join(missing[:5])}"
                       + (f" and {len(missing) - 5} more" if len(missing) > 5 else ""))
    return {"tensors": tensors, "bytes_read": nbytes, "largest_rows_bytes": largest}
