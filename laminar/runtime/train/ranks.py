"""One trainer rank (a Ray actor per device): its shard of the policy, of the KL reference and
of the optimizer state, and its share of every GRPO step.

Ranks join one torch.distributed group (gloo on CPU, NCCL on cuda) and shard the model with
FSDP2 (``laminar.runtime.train.fsdp``). A step's trajectories are cut into length-grouped
micro-batches dealt round-robin over the ranks (:func:`rank_plan`); FSDP averages gradients
over ranks, so each rank scales its loss by the rank count and the update is the one a single
process would make on the whole batch. Everything heavy is imported inside methods: the class
is built inside its Ray actor process.
"""

from __future__ import annotations

import copy
import os
import socket
import time
from pathlib import Path
from typing import Any

from laminar.config import LaminarConfig
from laminar.runtime.cluster.nodes import local_path


def rank_plan(lengths: list[int], ranks: int, max_tokens: int) -> list[list[list[int]]]:
    """Micro-batches (trajectory indices) per rank: length-sorted micro-batches
    (``laminar.policy.microbatch``) dealt round-robin, longest first, so ranks get similar work;
    every rank gets the same count (an empty one is a no-op step that still joins FSDP's
    collectives)."""
    from laminar.policy.microbatch import micro_batches

    batches = sorted(micro_batches(lengths, max_tokens), key=lambda b: -max(lengths[i] for i in b))
    plan: list[list[list[int]]] = [[] for _ in range(ranks)]
    for j, b in enumerate(batches):
        plan[j % ranks].append(b)
    depth = max(1, -(-len(batches) // ranks))
    for p in plan:
        p.extend([] for _ in range(depth - len(p)))
    return plan


def _local(t: Any) -> Any:
    """This rank's part of a (sharded) tensor."""
    return t.to_local() if hasattr(t, "to_local") else t


def _no_grad() -> Any:
    import torch

    return torch.no_grad()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


class TrainerRank:
    """Rank ``rank`` of ``world``: built, then joined, then it trains and exports its shard."""

    def __init__(self, cfg_data: dict, work_dir: Any, rank: int, world: int):
        self.cfg = LaminarConfig.model_validate(cfg_data)
        self.work_dir = local_path(work_dir)  # a NodePath: on this rank's machine
        self.rank, self.world = rank, world
        self.device = "cuda" if self.cfg.runtime.device == "cuda" else "cpu"
        self.model: Any = None
        self.ref_model: Any = None
        self.opt: Any = None
        self.codec: Any = None
        self.export_dtype: str | None = None
        self._layout: Any = None
        self.publisher: Any = None
        self._begun: dict[str, Any] = {}  # version file -> the publisher that lent it

    def rendezvous(self) -> str:
        """Rank 0: the ``tcp://host:port`` the group meets at (this node, a free port)."""
        import ray

        return f"tcp://{ray.util.get_node_ip_address()}:{free_port()}"

    def join(self, init_method: str, cpus: tuple[int, ...] = (), threads: int = 1) -> None:
        """Pin (CPU), join the process group, pick the device."""
        import torch
        import torch.distributed as dist

        if cpus:
            os.sched_setaffinity(0, cpus)
        torch.set_num_threads(len(cpus) or threads)
        if self.device == "cuda":
            torch.cuda.set_device(0)  # Ray shows each rank only its own GPU
        backend = "nccl" if self.device == "cuda" else "gloo"
        dist.init_process_group(
            backend, init_method=init_method, rank=self.rank, world_size=self.world
        )

    def build(self) -> dict:
        """Create (tiny) or load (pretrained) the full model on the host; rank 0 saves the base
        directory engines start from. Returns what the driver needs (from rank 0)."""
        import torch

        from laminar.runtime.models import tinymodel
        from laminar.runtime.models.codec import make_codec
        from laminar.runtime.train.export import export_entries

        rt = self.cfg.runtime
        torch.manual_seed(self.cfg.seed)
        if rt.model.type == "tiny":
            kw = tinymodel.llama_config(
                layers=rt.model.layers,
                hidden=rt.model.hidden,
                max_positions=self.cfg.workload.max_prompt_len + self.cfg.workload.max_response_len,
            )
            self.model = tinymodel.build_model(kw, self.cfg.seed)
            base = self.work_dir / "base"
            if self.rank == 0:
                tinymodel.save_model_dir(self.model, tinymodel.build_tokenizer(), base)
        else:
            from laminar.runtime.models.pretrained import check_model_dir, saved_dtype
            from laminar.runtime.train.shardload import empty_model

            base = Path(rt.model.path).expanduser()
            self.export_dtype = saved_dtype(check_model_dir(base))
            self.model = empty_model(base)  # on the meta device: prepare() loads each shard
        self.base = base
        self.codec = make_codec(rt.model.type, str(base))
        return {
            "model_dir": str(base),
            "config_json": (base / "config.json").read_text() if self.rank == 0 else "",
            "eos_id": self.codec.eos_id,
            "stop_ids": list(self.codec.stop_ids),
            "dtype": self.export_dtype or "float32",
            "params": sum(p.numel() for p in self.model.parameters()),
            "weight_bytes": sum(e.nbytes for e in export_entries(self.model, self.export_dtype)),
        }

    def prepare(self, resume: bool = False) -> dict:
        """Shard the policy and the KL reference and build the optimizer over the shards.

        The tiny model (built whole from a seed, tiny): rank 0 warms it up or reads its cache
        and broadcasts the weights (no rank reads a file of another machine), then every rank
        shards it. A pretrained model is sharded on the meta device and each rank reads its own
        rows from the safetensors files (``train.shardload``): no rank holds the whole model;
        its warm-up, when asked for, then runs sharded on every rank. ``resume``: a DCP
        checkpoint will fill the shards, so the files are not read (unless a warm-up runs)."""
        import torch

        from laminar.runtime.train.fsdp import shard
        from laminar.runtime.train.warmup import share_warm_model, warm_model

        g = self.cfg.runtime.grpo
        if self.cfg.runtime.model.type != "tiny":
            info = self._load_sharded(resume)
        else:
            info = {}
            if self.rank == 0:
                info = warm_model(self.model, self.codec, self.cfg)
            share_warm_model(self.model, info, self.device)
            if g.kl_coef > 0:  # the KL reference is the warm-up model, sharded like the policy
                self.ref_model = shard(copy.deepcopy(self.model), self.device, frozen=True)
            self.model = shard(self.model, self.device, checkpointing=g.activation_checkpointing)
        self.model.eval()
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=g.lr, weight_decay=0.0)
        return info

    def _load_sharded(self, resume: bool) -> dict:
        """The pretrained policy (and KL reference) sharded from the meta device, each rank
        reading its own rows; the warm-up, when asked for, on the shards."""
        from laminar.runtime.train.fsdp import shard
        from laminar.runtime.train.shardload import empty_model, load_shards, materialize
        from laminar.runtime.train.warmup import warm_model

        g = self.cfg.runtime.grpo
        warms = self.cfg.runtime.warmup.steps > 0
        self.model = shard(self.model, self.device, checkpointing=g.activation_checkpointing)
        materialize(self.model, self.device)
        info: dict = {}
        if not resume or warms:
            info["load"] = load_shards(self.model, self.base)
        # every rank the same warm-up batches: FSDP averages equal gradients, the update is
        # the one process's
        info.update(warm_model(self.model, self.codec, self.cfg))
        if g.kl_coef > 0:  # the reference: the model RL starts from, sharded the same way
            self.ref_model = shard(empty_model(self.base), self.device, frozen=True)
            materialize(self.ref_model, self.device)
            if info.get("warmup_s", 0.0) > 0.0:  # same sharding: copy this rank's rows
                with _no_grad():
                    for mine, ref in zip(
                        self.model.parameters(), self.ref_model.parameters(), strict=True
                    ):
                        _local(ref).copy_(_local(mine))
            else:
                load_shards(self.ref_model, self.base)
        return info

    def train_step(self, data: tuple[list, list[float]], plan: list[list[int]]) -> dict:
        """This rank's share of one optimizer step over ``data`` = (trajectories, advantages)
        of the whole step; returns its metrics (summed over ranks by the caller)."""
        import torch

        trajs, advantages = data
        cpu0 = time.process_time()
        g = self.cfg.runtime.grpo
        denom = max(1, sum(t.generated_tokens for t in trajs))  # observations are not trained
        self.model.train()
        self.opt.zero_grad()
        totals: dict[str, float] = {}
        for idx in plan:
            part = self._micro_step([trajs[i] for i in idx], [advantages[i] for i in idx], denom)
            for k, v in part.items():
                totals[k] = totals.get(k, 0.0) + v
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), g.max_grad_norm)
        self.opt.step()
        self.model.eval()
        full = getattr(norm, "full_tensor", None)
        totals["grad_norm"] = float(full() if full else norm)  # global: the same on every rank
        totals["train_cpu_s"] = time.process_time() - cpu0
        return totals

    def _micro_step(self, trajs: list, advantages: list[float], denom: int) -> dict:
        import torch

        from laminar.runtime.train.grpo import build_batch, grpo_loss, token_logprobs

        g = self.cfg.runtime.grpo
        if not trajs:  # keep step with the other ranks' collectives, change nothing
            # the same collectives in the same order as a real micro-batch: policy forward,
            # reference forward, policy backward
            ids = torch.zeros((1, 2), dtype=torch.long, device=self.device)
            logits = self.model(input_ids=ids).logits
            if self.ref_model is not None:
                with torch.no_grad():
                    self.ref_model(input_ids=ids)
            (logits.sum() * 0.0).backward()
            return {}
        batch = build_batch(trajs, advantages, self.codec.pad_id).to(self.device)
        lp = {"mask": batch.loss_mask, "chunk_tokens": g.logprob_chunk_tokens}
        new_lp = token_logprobs(self.model, batch.input_ids, batch.attention_mask, **lp)
        ref_lp = None
        if self.ref_model is not None:
            with torch.no_grad():
                ref_lp = token_logprobs(self.ref_model, batch.input_ids, batch.attention_mask, **lp)
        loss, metrics = grpo_loss(
            new_lp, batch, g.clip_eps, ref_logprobs=ref_lp, kl_coef=g.kl_coef, denom_tokens=denom
        )
        (loss * self.world).backward()  # FSDP averages over ranks; the step wants the sum
        return metrics

    # -- weights out ----------------------------------------------------------------------

    def layout(self) -> Any:
        """The exported file's layout (the same on every rank; computed once)."""
        from laminar.runtime.train.export import export_entries, plan_layout

        if self._layout is None:
            self._layout = plan_layout(export_entries(self.model, self.export_dtype))
        return self._layout

    def send_export(self) -> int:
        """A rank on another machine than rank 0: send its rows to rank 0 over the process
        group (``train.export.send_rows``); returns the buckets sent."""
        from laminar.runtime.train.export import send_rows

        return send_rows(self.model, self.layout(), dtype=self.export_dtype, dst=0)

    def export_and_receive(self, path: str, sources: list[int]) -> int:
        """Rank 0: write its own rows into the version file at ``path``, then the rows the ranks
        ``sources`` (on other machines) send (``train.export.receive_rows``); returns bytes."""
        from laminar.runtime.train.export import receive_rows

        return self.export(path) + receive_rows(path, self.layout().nbytes, sources)

    def attach(self, publisher: Any) -> None:
        """Rank 0: the run's weight path, kept for every publish (a relay path starts its
        publisher, heartbeats included, in this process on first use)."""
        self.publisher = publisher

    def begin_export(self, version: int, publisher: Any = None) -> str:
        """Rank 0: the file of this version on its machine (``StreamPublisher.begin``), from
        ``publisher`` when given (a one-off target), else the attached weight path."""
        pub = publisher if publisher is not None else self.publisher
        path = pub.begin(version, self.layout().nbytes)
        self._begun[path] = pub
        return path

    def commit_export(self, version: int, path: str) -> None:
        """Rank 0: publish the filled file (the weight path verifies it where it must)."""
        self._begun.pop(path).commit(version, path)

    def export(self, path: str) -> int:
        """Write this rank's rows into the version file at ``path`` (see ``train.export``)."""
        from laminar.runtime.train.export import write_shards

        return write_shards(
            self.model, self.layout(), path, dtype=self.export_dtype, lead=self.rank == 0
        )

    # -- checkpoints ------------------------------------------------------------------------

    def save_checkpoint(self, root: str, version: int) -> str:
        from laminar.runtime.train import checkpoint

        return checkpoint.save(self.model, self.opt, version, root)

    def load_checkpoint(self, path: str) -> int:
        from laminar.runtime.train import checkpoint

        return checkpoint.load(self.model, self.opt, path)

    def close(self) -> None:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()

