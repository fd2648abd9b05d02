"""The trainer (paper §3.1): samples whole GRPO groups from the experience buffer, has its
ranks take one optimizer step, and publishes the new weight version; checkpoints for recovery
(§3.3).

This actor is the trainer's face to the run; the work happens in ``runtime.trainer_ranks``
rank actors (``laminar.runtime.train``): FSDP2-sharded policy and optimizer, a streamed weight
export in which each rank writes its own rows of the version file, DCP checkpoints. Publishing
is that export plus the weight path's commit; its duration is the actor stall (§4).
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path
from typing import Any

from laminar.config import LaminarConfig
from laminar.policy.staleness import staleness
from laminar.runtime.cluster.nodes import local_path
from laminar.runtime.weights import WeightPublisher

# token-weighted parts add up over ranks; so does the ranks' CPU time (``train_cpu_s``: wall
# >> CPU x threads means the trainer was starved of cores)
SUMMED = ("pg_loss", "kl", "clip_frac", "ratio_mean", "train_cpu_s")


class Trainer:
    """The policy's ranks, the GRPO step, publishing and checkpoints.

    ``placement_group``: the ranks' Ray placement group (one bundle per device), created by
    the driver so that a restarted trainer lands on the same devices.
    """

    def __init__(self, cfg_data: dict, work_dir: Any, buffer: Any, placement_group: Any = None):
        self.cfg = LaminarConfig.model_validate(cfg_data)
        self.work_spec = work_dir  # a NodePath: each rank resolves it on its own machine
        self.work_dir = local_path(work_dir)
        self.buffer = buffer
        self.pg = placement_group
        self.publisher: WeightPublisher | None = None
        self.version = 0
        self.group: Any = None
        self._info: dict = {}
        self._prepared: dict | None = None  # the ranks' warm-up and sharding, done once

    def setup(self) -> dict:
        """Start the ranks and build (tiny) or load (pretrained) the model on each; return
        the base directory engines start from and the model's facts."""
        from laminar.runtime.train.group import RankGroup, placement_group_for

        if self.pg is None:
            self.pg = placement_group_for(self.cfg)
        self.group = RankGroup(self.cfg, self.work_spec, self.pg)
        self._info = {**self.group.all("build")[0], "trainer_ranks": self.group.world}
        return dict(self._info)

    def warmup(self, publisher: WeightPublisher) -> dict:
        """Supervised warm-up (or its cache), then publish it as version 0."""
        info = self._prepare(publisher)
        info["publish_s"] = self.publish()
        return info

    def _prepare(self, publisher: WeightPublisher, resume: bool = False) -> dict:
        """``resume``: a checkpoint fills the shards next (a pretrained model's files are
        then not read)."""
        import ray

        self.publisher = publisher
        ray.get(self.group.lead.attach.remote(publisher))
        if self._prepared is None:  # `--resume` resumes a trainer that has warmed up already
            self._prepared = self.group.all("prepare", resume)[0]
        return dict(self._prepared)

    def resume(self, publisher: WeightPublisher, checkpoint: str | None) -> int:
        """A restarted trainer (§3.3): load the checkpoint and go on publishing.

        Versions stay increasing: the dead trainer may have published past its checkpoint, so
        the next version follows the newest one published, not the checkpoint's.
        """
        self._prepare(publisher, resume=bool(checkpoint))
        # No checkpoint yet: the warm-up model (every update so far is lost, the run goes on).
        version = self.load_checkpoint(checkpoint) if checkpoint else self.version
        latest = publisher.latest() if hasattr(publisher, "latest") else None
        self.version = max(version, latest[0] if latest else version)
        return self.version

    def rank_nodes(self) -> list[str]:
        """Each rank's machine (Ray node id), by rank: where its checkpoint shards are."""
        return list(self.group.nodes)

    def save_model(self, out_dir: Any) -> str:
        """The current policy as a Hugging Face model directory (weights, config, tokenizer),
        written by the ranks like a published version (no rank gathers the model).
        ``out_dir``: a path on rank 0's machine (a ``NodePath`` is resolved there)."""
        import shutil

        from laminar.runtime.weights import ShmWeightStore, list_versions

        out = local_path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        base = Path(self._info["model_dir"])
        store = ShmWeightStore(out / ".export", (base / "config.json").read_text(), keep=1)
        self._export(store, self.version)
        _, vdir = list_versions(store.root)[-1]
        shutil.move(str(vdir / "model.safetensors"), out / "model.safetensors")
        store.close()
        for f in base.iterdir():  # config, tokenizer, generation config: as the base has them
            if f.is_file() and not f.name.startswith("model.safetensors"):
                shutil.copy2(f, out / f.name)
        return str(out)

    def publish(self) -> float:
        """Hand the current weights to the weight path as ``self.version``; return the stall."""
        t = time.perf_counter()
        self._export(None, self.version)
        return time.perf_counter() - t

    def _export(self, publisher: Any, version: int) -> None:
        """Rank 0 takes a file (from ``publisher``, else the run's weight path), every rank
        writes its rows, rank 0 commits."""
        import ray

        path = ray.get(self.group.lead.begin_export.remote(version, publisher))
        self.group.export(path)
        ray.get(self.group.lead.commit_export.remote(version, path))

    def step(self, step_index: int) -> dict:
        """One GRPO step on ``prompts_per_step`` groups from the buffer; publish version+1."""
        import ray

        t0 = time.perf_counter()
        k = self.cfg.workload.prompts_per_step
        groups = ray.get(self.buffer.take.remote(k, self.version, step_index))
        t1 = time.perf_counter()
        metrics = self._update(groups)
        t2 = time.perf_counter()
        self.version += 1
        metrics["publish_s"] = self.publish()
        trajs = [t for g in groups for t in g]
        stale = [staleness(self.version - 1, t.version) for t in trajs]
        metrics.update(
            step=step_index,
            version=self.version,
            wait_s=t1 - t0,
            train_s=t2 - t1,
            loadavg_1m=os.getloadavg()[0],
            trajectories=len(trajs),
            reward_mean=statistics.fmean(t.reward for t in trajs),
            response_len_mean=statistics.fmean(t.generated_tokens for t in trajs),
            tokens=sum(len(t.prompt_ids) + len(t.tokens) for t in trajs),
            response_tokens=sum(t.generated_tokens for t in trajs),  # observations aside
            staleness_mean=statistics.fmean(stale),
            staleness_max=max(stale),
        )
        return metrics

    def _update(self, groups: list) -> dict:
        """One optimizer step: length-grouped micro-batches dealt over the ranks."""
        import ray

        from laminar.runtime.train.grpo import group_advantages
        from laminar.runtime.train.ranks import rank_plan

        adv = group_advantages([[t.reward for t in grp] for grp in groups])
        trajs = [t for grp in groups for t in grp]
        advantages = [a for grp in adv for a in grp]
        lengths = [len(t.prompt_ids) + len(t.tokens) for t in trajs]
        g = self.cfg.runtime.grpo
        plan = rank_plan(lengths, self.group.world, g.micro_batch_tokens)
        data = ray.put((trajs, advantages))
        parts = self.group.all("train_step", data, per_rank=lambda r: (plan[r],))
        return combine_metrics(parts, g.kl_coef)

    def save_checkpoint(self, path: Any) -> str:
        """Model, optimizer and version under the checkpoint root ``path`` (one directory per
        version, atomic; ``laminar.runtime.train.checkpoint``; a ``NodePath``: each machine's
        own, collected by the driver). Returns the checkpoint's path."""
        return self.group.all("save_checkpoint", path, self.version)[0]

    def load_checkpoint(self, path: Any) -> int:
        """Restore a checkpoint (or the newest under a root); return its version."""
        self.version = self.group.all("load_checkpoint", path)[0]
        return self.version


def combine_metrics(parts: list[dict], kl_coef: float) -> dict:
    """The step's metrics from each rank's: token-weighted parts add up; the gradient norm is
    global already."""
    out = {k: sum(p.get(k, 0.0) for p in parts) for k in SUMMED if any(k in p for p in parts)}
    out["grad_norm"] = parts[0]["grad_norm"]
    out["loss"] = out.get("pg_loss", 0.0) + kl_coef * out.get("kl", 0.0)
    return out
