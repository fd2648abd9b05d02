"""FSDP2 over a Hugging Face causal LM: one ``fully_shard`` group per decoder layer, then the root.

Parameters stay fp32 (the master weights the optimizer updates); on cuda the forward and
backward compute in bf16 and gradients are reduced in fp32 (``MixedPrecisionPolicy``). On CPU
everything stays fp32, so one rank and several ranks compute the same step up to float
reduction order (a test checks it).
"""

from __future__ import annotations

from typing import Any


def decoder_layers(model: Any) -> list[Any]:
    """The model's repeated blocks: modules of a class named in ``_no_split_modules`` (what HF
    itself keeps whole when it splits a model), else the usual ``model.layers``."""
    names = set(getattr(model, "_no_split_modules", None) or ())
    found = [m for m in model.modules() if type(m).__name__ in names]
    if found:
        return found
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    if layers is None:
        raise ValueError(f"cannot find the decoder layers of {type(model).__name__}")
    return list(layers)


def shard(model: Any, device: str, *, frozen: bool = False, checkpointing: bool = False) -> Any:
    """Shard ``model`` over the default process group onto ``device`` (in place).

    ``frozen``: a reference model (no gradients, eval mode) — sharded the same way, so its
    memory per rank falls with the rank count too. ``checkpointing``: activation checkpointing
    of every decoder layer (Hugging Face's, non-reentrant: the layer's forward is recomputed in
    its backward; FSDP2's hooks skip the recompute, the layer's pre-backward has unsharded it).
    """
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    # fp32 master weights; fully_shard moves each group's shards to the mesh's device as it
    # shards it, so a GPU never holds the whole model (a meta-device model stays on meta until
    # ``shardload.materialize``)
    model.to(dtype=torch.float32)
    if frozen:
        model.requires_grad_(False)
        model.eval()
    elif checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    mesh = init_device_mesh(device, (dist.get_world_size(),))
    kwargs: dict[str, Any] = {"mesh": mesh}
    if device == "cuda":
        kwargs["mp_policy"] = MixedPrecisionPolicy(
            param_dtype=torch.bfloat16, reduce_dtype=torch.float32
        )
    for layer in decoder_layers(model):
        fully_shard(layer, **kwargs)
    for group in own_groups(model):
        fully_shard(group, **kwargs)
    fully_shard(model, **kwargs)
    return model


def own_groups(model: Any) -> list[Any]:
    """The input embedding and the output head as FSDP groups of their own when they are
    separate tables (as torchtitan wraps them): only one is unsharded at a time, not both for
    the whole step (``laminar.specs.trainmemory`` counts it so). A tied table stays in the
    root group: the head uses it after the embedding's group would have resharded it."""
    emb, head = model.get_input_embeddings(), model.get_output_embeddings()
    if emb is None or head is None or head.weight is emb.weight:
        return []
    return [emb, head]


def local_rows(param: Any) -> tuple[Any, int]:
    """(this rank's rows of a parameter or buffer, index of its first row in the full tensor).

    FSDP2 shards every parameter on dim 0 like ``torch.chunk``: rank r holds rows
    ``[r * ceil(n / world), ...)``; a plain tensor (not sharded) is held whole by every rank.
    """
    from torch.distributed.tensor import DTensor, Shard

    if not isinstance(param, DTensor):
        return param, 0
    placements = param.placements
    if len(placements) != 1 or not isinstance(placements[0], Shard) or placements[0].dim != 0:
        raise ValueError(f"expected a dim-0 shard, got {placements}")
    n = param.shape[0]
    world = param.device_mesh.size()
    rank = param.device_mesh.get_local_rank()
    per = -(-n // world)
    return param.to_local(), min(n, rank * per)
