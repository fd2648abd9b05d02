"""The trainer (paper §3.1): samples whole GRPO groups from the experience buffer, takes one
optimizer step, and publishes the new weight version; checkpoints for recovery (§3.3).

Publishing is one local copy into the weight path (``WeightPublisher.publish``); its duration
is the actor stall the relay tier keeps small (§4). Everything heavy (torch, transformers) is
imported inside methods: the class is built inside its Ray actor process.
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path
from typing import Any

from laminar.config import LaminarConfig
from laminar.policy.staleness import staleness
from laminar.runtime.nodes import local_path
from laminar.runtime.placement import place
from laminar.runtime.weights import WeightPublisher


class Trainer:
    """The policy model, its optimizer, and the GRPO step."""

    def __init__(self, cfg_data: dict, work_dir: Any, buffer: Any):
        self.cfg = LaminarConfig.model_validate(cfg_data)
        self.work_dir = local_path(work_dir)  # a NodePath: on the trainer's machine
        self.buffer = buffer
        self.publisher: WeightPublisher | None = None
        self.version = 0
        self.model: Any = None
        self.ref_model: Any = None
        self.opt: Any = None
        self.codec: Any = None

    def setup(self) -> dict:
        """Build (tiny) or load (pretrained) the model; save a base dir the engines start from."""
        import torch

        from laminar.runtime import tinymodel
        from laminar.runtime.codec import make_codec

        rt = self.cfg.runtime
        where = place(rt)
        if where.trainer_cpus:
            os.sched_setaffinity(0, where.trainer_cpus)
        torch.set_num_threads(where.trainer_threads(rt.trainer_threads))
        torch.manual_seed(self.cfg.seed)
        if rt.model.type == "tiny":
            kw = tinymodel.llama_config(
                layers=rt.model.layers,
                hidden=rt.model.hidden,
                max_positions=self.cfg.workload.max_prompt_len + self.cfg.workload.max_response_len,
            )
            self.model = tinymodel.build_model(kw, self.cfg.seed)
            base = tinymodel.save_model_dir(
                self.model, tinymodel.build_tokenizer(), self.work_dir / "base"
            )
        else:
            from transformers import AutoModelForCausalLM

            self.model = AutoModelForCausalLM.from_pretrained(rt.model.path)
            base = Path(rt.model.path)
        self.codec = make_codec(rt.model.type, str(base))
        params = sum(p.numel() for p in self.model.parameters())
        return {
            "model_dir": str(base),
            "config_json": (base / "config.json").read_text(),
            "eos_id": self.codec.eos_id,
            "params": params,
            "weight_bytes": _state_bytes(self.model),
        }

    def warmup(self, publisher: WeightPublisher) -> dict:
        """Supervised warm-up (or its cache), then publish it as version 0."""
        info = self._prepare(publisher)
        info["publish_s"] = self.publish()
        return info

    def _prepare(self, publisher: WeightPublisher) -> dict:
        import copy

        import torch

        from laminar.runtime.warmup import warm_model

        info = warm_model(self.model, self.codec, self.cfg)
        self.publisher = publisher
        g = self.cfg.runtime.grpo
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=g.lr, weight_decay=0.0)
        if g.kl_coef > 0:  # the KL reference is the warm-up model
            self.ref_model = copy.deepcopy(self.model).eval()
        return info

    def resume(self, publisher: WeightPublisher, checkpoint: str | None) -> int:
        """A restarted trainer (§3.3): load the checkpoint and go on publishing.

        Versions stay increasing: the dead trainer may have published past its checkpoint, so
        the next version follows the newest one published, not the checkpoint's.
        """
        self._prepare(publisher)
        # No checkpoint yet: the warm-up model (every update so far is lost, the run goes on).
        version = self.load_checkpoint(checkpoint) if checkpoint else self.version
        latest = publisher.latest() if hasattr(publisher, "latest") else None
        self.version = max(version, latest[0] if latest else version)
        return self.version

    def save_model(self, out_dir: str) -> str:
        """The current policy as a Hugging Face model directory (weights, config, tokenizer)."""
        from laminar.runtime import tinymodel

        self.model.save_pretrained(out_dir, safe_serialization=True)
        if self.cfg.runtime.model.type == "tiny":
            tinymodel.build_tokenizer().save_pretrained(out_dir)
        return out_dir

    def publish(self) -> float:
        """Hand the current weights to the weight path as ``self.version``; return the stall."""
        from safetensors.torch import save

        t = time.perf_counter()
        state = {k: v.detach().contiguous() for k, v in self.model.state_dict().items()}
        self.publisher.publish(self.version, save(state))
        return time.perf_counter() - t

    def step(self, step_index: int) -> dict:
        """One GRPO step on ``prompts_per_step`` groups from the buffer; publish version+1."""
        import ray

        t0 = time.perf_counter()
        k = self.cfg.workload.prompts_per_step
        groups = ray.get(self.buffer.take.remote(k, self.version, step_index))
        t1, cpu1 = time.perf_counter(), time.process_time()
        metrics = self._update(groups)
        t2, cpu2 = time.perf_counter(), time.process_time()
        self.version += 1
        metrics["publish_s"] = self.publish()
        trajs = [t for g in groups for t in g]
        stale = [staleness(self.version - 1, t.version) for t in trajs]
        metrics.update(
            step=step_index,
            version=self.version,
            wait_s=t1 - t0,
            train_s=t2 - t1,
            train_cpu_s=cpu2 - cpu1,  # wall >> CPU x threads: the trainer was starved of cores
            loadavg_1m=os.getloadavg()[0],
            trajectories=len(trajs),
            reward_mean=statistics.fmean(t.reward for t in trajs),
            response_len_mean=statistics.fmean(len(t.tokens) for t in trajs),
            tokens=sum(len(t.prompt_ids) + len(t.tokens) for t in trajs),
            response_tokens=sum(len(t.tokens) for t in trajs),
            staleness_mean=statistics.fmean(stale),
            staleness_max=max(stale),
        )
        return metrics

    def _update(self, groups: list) -> dict:
        """One optimizer step over length-sorted micro-batches (gradients accumulated)."""
        import torch

        from laminar.runtime.grpo import group_advantages, micro_batches

        adv = group_advantages([[t.reward for t in grp] for grp in groups])
        trajs = [t for grp in groups for t in grp]
        advantages = [a for grp in adv for a in grp]
        denom = max(1, sum(len(t.tokens) for t in trajs))
        lengths = [len(t.prompt_ids) + len(t.tokens) for t in trajs]
        self.model.train()
        self.opt.zero_grad()
        totals: dict[str, float] = {}
        for idx in micro_batches(lengths, self.cfg.runtime.grpo.micro_batch_tokens):
            part = self._micro_step([trajs[i] for i in idx], [advantages[i] for i in idx], denom)
            for k, v in part.items():
                totals[k] = totals.get(k, 0.0) + v
        g = self.cfg.runtime.grpo
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), g.max_grad_norm)
        self.opt.step()
        self.model.eval()
        totals.update(loss=totals.get("pg_loss", 0.0) + g.kl_coef * totals.get("kl", 0.0))
        totals["grad_norm"] = float(grad_norm)
        return totals

    def _micro_step(self, trajs: list, advantages: list[float], denom: int) -> dict:
        import torch

        from laminar.runtime.grpo import build_batch, grpo_loss, token_logprobs

        g = self.cfg.runtime.grpo
        batch = build_batch(trajs, advantages, self.codec.pad_id)
        new_lp = token_logprobs(self.model, batch.input_ids, batch.attention_mask)
        ref_lp = None
        if self.ref_model is not None:
            with torch.no_grad():
                ref_lp = token_logprobs(self.ref_model, batch.input_ids, batch.attention_mask)
        loss, metrics = grpo_loss(
            new_lp, batch, g.clip_eps, ref_logprobs=ref_lp, kl_coef=g.kl_coef, denom_tokens=denom
        )
        loss.backward()
        return metrics

    def save_checkpoint(self, path: str) -> str:
        """Model, optimizer and version, written atomically (§3.3: trainer recovery)."""
        import torch

        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
        state = {"model": self.model.state_dict(), "opt": self.opt.state_dict()}
        torch.save({**state, "version": self.version}, tmp)
        os.replace(tmp, p)
        return str(p)

    def load_checkpoint(self, path: str) -> int:
        """Restore a checkpoint written by :meth:`save_checkpoint`; return its version."""
        import torch

        state = torch.load(path, weights_only=False)
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["opt"])
        self.version = int(state["version"])
        return self.version


def _state_bytes(model) -> int:
    """Bytes of the published state dict (what a weight version weighs)."""
    return sum(v.numel() * v.element_size() for v in model.state_dict().values())
