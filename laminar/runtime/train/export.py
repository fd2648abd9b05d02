"""Weight export without gathering the model: each rank writes its own rows into one
safetensors file, at the byte offsets that file will have (paper §4: the trainer's stall).

The result is byte-identical to ``safetensors.torch.save(full_state_dict, metadata={"format":
"pt"})`` as Hugging Face's ``save_pretrained`` writes it: tied weights (``lm_head`` when the
embeddings are tied) are left out, tensors are ordered as safetensors orders them, the header
is padded to 8 bytes with spaces. FSDP2 shards each tensor on dim 0, so a rank's rows are one
contiguous byte range of the file: every rank copies its shards straight into a shared mapping
(no rank ever holds the whole model, nothing is hashed here — the weight path checks the file
once, when it commits the version). A rank on another machine than the file sends its rows
to rank 0 in buckets (:func:`shard_buckets`), which writes them at their offsets.
"""

from __future__ import annotations

import json
import mmap
import os
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

# torch dtype name -> safetensors dtype tag (the ones a causal LM's state dict holds)
DTYPE_TAGS = {
    "float64": "F64",
    "float32": "F32",
    "float16": "F16",
    "bfloat16": "BF16",
    "int64": "I64",
    "int32": "I32",
    "int16": "I16",
    "int8": "I8",
    "uint8": "U8",
    "bool": "BOOL",
    "float8_e4m3fn": "F8_E4M3",
    "float8_e5m2": "F8_E5M2",
}
METADATA = {"format": "pt"}  # what save_pretrained writes


@dataclass(frozen=True)
class Entry:
    """One tensor of the file: name, torch dtype name, full shape, element size in bytes."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    itemsize: int

    @property
    def nbytes(self) -> int:
        n = self.itemsize
        for d in self.shape:
            n *= d
        return n


@dataclass(frozen=True)
class Layout:
    """Where every tensor lives in the file: ``offsets[name]`` is the absolute byte offset."""

    header: bytes  # the 8-byte length + JSON header, padded
    offsets: dict[str, int]
    nbytes: int  # the whole file


def _order(entries: list[Entry]) -> list[str]:
    """safetensors' own tensor order (by dtype, then name), asked of the library with one-element
    stand-ins, so the layout follows whatever the installed version does."""
    import torch
    from safetensors.torch import save

    probe = {e.name: torch.zeros(1, dtype=getattr(torch, e.dtype)) for e in entries}
    blob = save(probe, metadata=METADATA)
    (n,) = struct.unpack("<Q", blob[:8])
    return [k for k in json.loads(blob[8 : 8 + n]) if k != "__metadata__"]


def plan_layout(entries: list[Entry]) -> Layout:
    """The header and every tensor's offset of the file holding ``entries``."""
    by_name = {e.name: e for e in entries}
    if len(by_name) != len(entries):
        raise ValueError("duplicate tensor names")
    header: dict[str, Any] = {"__metadata__": METADATA}
    start, rel = 0, {}
    for name in _order(entries):
        e = by_name[name]
        tag = DTYPE_TAGS.get(e.dtype)
        if tag is None:
            raise ValueError(f"{name}: dtype {e.dtype} has no safetensors tag here")
        span = [start, start + e.nbytes]
        header[name] = {"dtype": tag, "shape": list(e.shape), "data_offsets": span}
        rel[name] = start
        start += e.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    head = struct.pack("<Q", len(text)) + text
    return Layout(head, {k: len(head) + v for k, v in rel.items()}, len(head) + start)


def tied_names(model: Any) -> set[str]:
    """State-dict keys Hugging Face leaves out when saving (they alias another tensor)."""
    if not getattr(model.config, "tie_word_embeddings", False):
        return set()
    tied = getattr(model, "_tied_weights_keys", None) or {}
    return set(tied) if isinstance(tied, (dict, list, tuple, set)) else set()


def export_entries(model: Any, dtype: str | None = None) -> list[Entry]:
    """The tensors of the exported file (full shapes; cast to ``dtype`` when given)."""
    import torch

    skip = tied_names(model)
    out = []
    for name, t in model.state_dict().items():
        if name in skip:
            continue
        dt = getattr(torch, dtype) if dtype else t.dtype
        itemsize = torch.empty((), dtype=dt).element_size()
        out.append(Entry(name, str(dt).removeprefix("torch."), tuple(t.shape), itemsize))
    return out


def shard_rows(model: Any, layout: Layout, *, dtype: str | None, lead: bool) -> Iterator:
    """(file offset, bytes as a uint8 array) of this rank's rows of every tensor, one tensor at
    a time (a host copy of one shard, never the whole model); ``lead`` adds the header and the
    tensors no rank shards."""
    import numpy as np

    for at, data in row_tensors(model, layout, dtype=dtype, lead=lead):
        yield at, data if isinstance(data, np.ndarray) else data.cpu().numpy()


def row_tensors(model: Any, layout: Layout, *, dtype: str | None, lead: bool) -> Iterator:
    """:func:`shard_rows` with each rank's rows as a flat uint8 tensor on the device that holds
    them (what a process-group transfer sends without a host copy); the header, which only the
    lead writes, as a host array."""
    import numpy as np
    import torch

    from laminar.runtime.train.fsdp import local_rows

    if lead:
        yield 0, np.frombuffer(layout.header, np.uint8)
    for name, t in model.state_dict().items():
        if name not in layout.offsets:
            continue
        rows, first = local_rows(t)
        if rows is t and not lead:
            continue  # not sharded: the lead writes it
        rows = rows.detach()
        if dtype:
            rows = rows.to(getattr(torch, dtype))
        data = rows.contiguous().reshape(-1).view(torch.uint8)
        if data.numel():
            row_bytes = data.numel() // rows.shape[0] if rows.dim() else data.numel()
            yield layout.offsets[name] + first * row_bytes, data


def _mapped(path: str, nbytes: int) -> mmap.mmap:
    fd = os.open(path, os.O_RDWR)
    try:
        return mmap.mmap(fd, nbytes, flags=mmap.MAP_SHARED)
    finally:
        os.close(fd)


def write_pieces(path: str, nbytes: int, pieces: Iterable[tuple[int, Any]]) -> int:
    """Write (offset, bytes) pieces into the ``nbytes`` file at ``path``; returns bytes written."""
    import numpy as np

    mm = _mapped(path, nbytes)
    written = 0
    try:
        buf = np.frombuffer(mm, dtype=np.uint8)
        for at, data in pieces:
            data = np.frombuffer(data, np.uint8) if isinstance(data, bytes) else data
            buf[at : at + data.nbytes] = data
            written += data.nbytes
        del buf
    finally:
        mm.close()
    return written


def write_shards(model: Any, layout: Layout, path: str, *, dtype: str | None, lead: bool) -> int:
    """Copy this rank's rows into the version file at ``path`` (already ``layout.nbytes`` long,
    on this machine); returns bytes written."""
    return write_pieces(path, layout.nbytes, shard_rows(model, layout, dtype=dtype, lead=lead))


def send_rows(
    model: Any, layout: Layout, *, dtype: str | None, dst: int = 0, bucket_bytes: int = 256 << 20
) -> int:
    """Send this rank's rows to rank ``dst`` over the trainer's process group (gloo on CPU,
    NCCL on cuda: device to device, no host copy here and no object store), in buckets of about
    ``bucket_bytes``; returns the buckets sent. Rank ``dst`` runs :func:`receive_rows`.

    Per bucket: a head ``[pieces, bytes]``, the pieces' ``[offset, length]`` pairs, the bytes;
    a head ``[0, 0]`` ends. Memory held here: one bucket (or one tensor's rows, if larger)."""
    device = _group_device()
    sent, pieces, size = 0, [], 0
    for at, data in row_tensors(model, layout, dtype=dtype, lead=False):
        pieces.append((at, data.to(device)))
        size += data.numel()
        if size >= bucket_bytes:
            _send_bucket(pieces, dst, device)
            sent, pieces, size = sent + 1, [], 0
    if pieces:
        _send_bucket(pieces, dst, device)
        sent += 1
    _send_head(0, 0, dst, device)
    return sent


def _group_device() -> Any:
    """The device the process group's tensors live on (NCCL: the current GPU)."""
    import torch
    import torch.distributed as dist

    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _send_head(pieces: int, nbytes: int, dst: int, device: Any) -> None:
    import torch
    import torch.distributed as dist

    dist.send(torch.tensor([pieces, nbytes], dtype=torch.int64, device=device), dst)


def _send_bucket(pieces: list, dst: int, device: Any) -> None:
    import torch
    import torch.distributed as dist

    total = sum(d.numel() for _, d in pieces)
    _send_head(len(pieces), total, dst, device)
    spans = [v for at, d in pieces for v in (at, d.numel())]
    dist.send(torch.tensor(spans, dtype=torch.int64, device=device), dst)
    dist.send(torch.cat([d for _, d in pieces]) if len(pieces) > 1 else pieces[0][1], dst)


def receive_rows(path: str, nbytes: int, sources: list[int]) -> int:
    """Rank 0: receive the rows :func:`send_rows` sends from each rank in ``sources`` (in turn)
    and write them into the ``nbytes`` version file at ``path``; returns bytes written. On cuda
    each bucket lands on the GPU and is copied to a pinned host buffer, reused across buckets."""
    import torch
    import torch.distributed as dist

    device = _group_device()
    pinned: Any = None
    written = 0
    for src in sources:
        while True:
            head = torch.empty(2, dtype=torch.int64, device=device)
            dist.recv(head, src)
            count, total = (int(v) for v in head.tolist())
            if count == 0:
                break
            spans = torch.empty(2 * count, dtype=torch.int64, device=device)
            dist.recv(spans, src)
            data = torch.empty(total, dtype=torch.uint8, device=device)
            dist.recv(data, src)
            if device.type == "cuda":
                if pinned is None or pinned.numel() < total:
                    pinned = torch.empty(total, dtype=torch.uint8, pin_memory=True)
                host = pinned[:total]
                host.copy_(data)
            else:
                host = data
            flat, pos, pieces = host.numpy(), 0, []
            pairs = spans.tolist()
            for at, length in zip(pairs[0::2], pairs[1::2], strict=True):
                pieces.append((at, flat[pos : pos + length]))
                pos += length
            written += write_pieces(path, nbytes, pieces)
    return written
