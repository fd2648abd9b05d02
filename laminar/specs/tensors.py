"""How a model's parameters split into tensors: what a weight hand-over that moves one tensor at a
time pays a start-up for.

:func:`tensor_groups` gives (parameters of one tensor, how many such tensors) for a
:class:`~laminar.specs.modelspec.ModelSpec`, in the Hugging Face layout the rollout engines load:

- the input embedding, and the output head when it is not tied to it: one tensor each;
- every routed expert of every MoE layer: three tensors (gate, up and down projections) of
  ``expert_params / 3`` each;
- the rest of a layer (attention's q, k, v and o projections, and the dense MLP's or shared
  expert's gate, up and down): seven tensors of equal size, the layer's share of the parameters
  outside the embeddings and the routed experts. Norms, routers and biases (a few thousand
  parameters each) are folded into them rather than counted.

Equal sizes within a layer are a simplification: for a fixed number of parameters, a split into
equal tensors costs a pipelined hand-over the most start-up (the square-root term of App. D's
chain time is concave), so it bounds the per-tensor cost from above. The parameters of all
groups add up to ``total_params``.
"""

from __future__ import annotations

from laminar.specs.modelspec import ModelSpec

LAYER_TENSORS = 7  # q, k, v, o; gate, up, down
EXPERT_TENSORS = 3  # gate, up, down


def tensor_groups(spec: ModelSpec) -> tuple[tuple[float, int], ...]:
    """(parameters a tensor, number of tensors) for every group of ``spec`` (module doc)."""
    groups: list[tuple[float, int]] = []
    if spec.embedding_params:
        groups.append((float(spec.embedding_params), 1))
    if spec.head_params:
        groups.append((float(spec.head_params), 1))
    if spec.routed_params:
        n = spec.moe_layers * spec.experts * EXPERT_TENSORS
        groups.append((spec.routed_params / n, n))
    body = spec.total_params - spec.embedding_params - spec.head_params - spec.routed_params
    if body > 0 and spec.layers > 0:
        n = spec.layers * LAYER_TENSORS
        groups.append((body / n, n))
    return tuple(groups)


def tensor_count(spec: ModelSpec) -> int:
    """How many tensors :func:`tensor_groups` splits ``spec`` into."""
    return sum(n for _, n in tensor_groups(spec))
