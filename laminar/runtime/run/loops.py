"""The two training loops over launched actors, the held-out evaluation, and collection.

- **laminar** (paper §3.2): rollouts run on their own — admit prompt groups, stream tokens,
  drain and pull the newest weights when one is published; the rollout manager repacks long
  tails (§5) and recovers failed rollouts (§3.3); the trainer consumes whole groups as they
  finish and publishes a version per step.
- **sync** (verl-like): every step, all rollouts load the newest weights, generate one global
  batch to the last token, then the trainer trains on it.

Both loops run each trainer step through the supervisor (``laminar.runtime.faults``), which
injects scheduled faults, sees deaths (rollout, engine, trainer, relay, machine) and recovers
(§3.3); a checkpoint of trainer and pools goes into the run directory every
``runtime.checkpoint_every`` steps (``laminar.runtime.run.resume``).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from typing import Any

from laminar.config import LaminarConfig

StepCallback = Callable[[dict], None]


def _after_step(a: Any, cfg: LaminarConfig, step: int, sup: Any, log: Any) -> None:
    """Checkpoint the trainer and the pools when due; inject the faults scheduled now."""
    rt = cfg.runtime
    if log is not None and rt.checkpoint_every and (step + 1) % rt.checkpoint_every == 0:
        sup.call_trainer(step, lambda: log.checkpoint(a, step, sup.checkpoint_meta(step)))
    sup.after_step(step)


def run_laminar(
    a: Any,
    cfg: LaminarConfig,
    on_step: StepCallback,
    sup: Any = None,
    log: Any = None,
    start: int = 0,
) -> list[dict]:
    """Trajectory-level asynchrony: rollouts and manager run free; the trainer paces the run.

    ``sup``: the run's supervisor (default: faults from the config, no replacements); ``log``:
    the live run directory (default: none, no checkpoints); ``start``: the first step."""
    sup = sup or _plain_supervisor(a, cfg)
    sup.loops.update({rid: r.run_laminar.remote() for rid, r in a.live().items()})
    manager_loop = a.manager.run.remote()
    sup.watch("rollout manager", manager_loop)
    rows = []
    sup.start_loop()
    try:
        for step in range(start, cfg.workload.steps):
            m = sup.run_step(step)
            a.prompts.advance.remote(step + 1)
            on_step(m)
            rows.append(m)
            _after_step(a, cfg, step, sup, log)
        sup.drain()  # late faults are seen before the end (not when the loop was interrupted)
    finally:
        sup.settle()
        sup.watched.clear()  # the manager's loop ends now, on purpose
        _stop(a, manager_loop)
        _wait_live(a, sup.loops)
    return rows


def run_sync(
    a: Any,
    cfg: LaminarConfig,
    on_step: StepCallback,
    sup: Any = None,
    log: Any = None,
    start: int = 0,
) -> list[dict]:
    """verl-like: load weights everywhere, generate the whole batch, then train."""
    import ray

    sup = sup or _plain_supervisor(a, cfg)

    manager_loop = a.manager.run.remote()  # repack off: it records KV use, recovers failures
    sup.watch("rollout manager", manager_loop)
    rows = []
    sup.start_loop()
    try:
        for step in range(start, cfg.workload.steps):
            t = time.perf_counter()
            workers = a.live()
            ray.wait([w.load_latest.remote() for w in workers.values()], num_returns=len(workers))
            refs = [w.run_groups.remote(share) for w, share in _hand_out(a, cfg, workers)]
            ray.wait(refs, num_returns=len(refs))  # a failed rollout's share is recovered
            m = sup.run_step(step)  # waits for every group of the batch
            m["gen_s"] = time.perf_counter() - t - m["train_s"] - m["publish_s"]
            on_step(m)
            rows.append(m)
            _after_step(a, cfg, step, sup, log)
        sup.drain()
    finally:
        sup.settle()
        sup.watched.clear()  # the manager's loop ends now, on purpose
        _stop(a, manager_loop)
    return rows


def _hand_out(a: Any, cfg: LaminarConfig, workers: dict[str, Any]) -> list[tuple[Any, Any]]:
    """Each rollout's share of the step's prompt groups, handed out to it by name (the prompt
    pool keeps a share until that rollout asks again: recovery finds it if the rollout dies
    before registering it). A rollout the manager declared dead after ``workers`` was read
    gets nothing from the pool (its holder is closed): its share goes to the others, or the
    step would wait for groups no one generates."""
    import ray

    wl = cfg.workload
    names = list(workers)
    sizes = _split(wl.prompts_per_step, len(names))
    takes = [
        a.prompts.take.remote(k, rid, wl.max_response_len)
        for k, rid in zip(sizes, names, strict=True)
    ]
    shares = dict(zip(names, ray.get(takes), strict=True))
    short = wl.prompts_per_step - sum(len(g) for g in shares.values())
    takers = [rid for rid, k in zip(names, sizes, strict=True) if len(shares[rid]) == k]
    while short > 0 and takers:
        extra = _split(short, len(takers))
        got = ray.get([
            a.prompts.take.remote(k, rid, wl.max_response_len, True)
            for k, rid in zip(extra, takers, strict=True)
        ])  # fmt: skip
        for rid, k, g in zip(list(takers), extra, got, strict=True):
            shares[rid] = [*shares[rid], *g]
            short -= len(g)
            if len(g) < k:  # closed meanwhile: declared dead too
                takers.remove(rid)
    return [(workers[rid], shares[rid]) for rid in names]


def _split(total: int, parts: int) -> list[int]:
    """``total`` dealt over ``parts`` as evenly as possible, the larger shares first."""
    return [len(range(i, total, parts)) for i in range(parts)]


def _plain_supervisor(a: Any, cfg: LaminarConfig) -> Any:
    from laminar.runtime.faults.supervisor import Supervisor

    return Supervisor(a, cfg, spawn=None, checkpoint=lambda: None)


def _stop(a: Any, manager_loop: Any) -> None:
    import ray

    ray.get(a.manager.stop.remote())
    ray.get(manager_loop)
    a.dead.update(ray.get(a.manager.report.remote())["dead"])
    _wait_live(a, {rid: r.stop.remote() for rid, r in a.live().items()})


def _wait_live(a: Any, refs: dict[str, Any]) -> None:
    """Wait for each live rollout's call; one that dies meanwhile is marked dead."""
    import ray

    for rid, ref in refs.items():
        if rid in a.dead:
            continue
        try:
            ray.get(ref)
        except ray.exceptions.RayActorError:
            a.dead.add(rid)


def evaluate(a: Any, cfg: LaminarConfig) -> dict:
    """Mean reward on the held-out prompts with the newest weights (every rollout loads them).

    A rollout that fails here (died since the manager's last check) is marked dead and left out.
    """
    import ray

    rt = cfg.runtime
    versions = _each_live(a, lambda w: w.load_latest.remote())
    if rt.eval_prompts == 0:
        return {"reward": math.nan, "version": min(versions.values()), "samples": 0}
    ids = list(range(rt.eval_prompts))
    for _ in range(3):
        workers = list(a.live().values())
        parts = [
            w.evaluate.remote(ids[i :: len(workers)], rt.eval_samples)
            for i, w in enumerate(workers)
        ]
        try:
            rewards = [r for part in ray.get(parts) for r in part]
            break
        except ray.exceptions.RayError:
            _each_live(a, lambda w: w.snapshot.remote())  # find the dead one, then again
    else:
        raise RuntimeError("held-out evaluation failed three times (rollouts dying?)")
    return {
        "reward": statistics.fmean(rewards),
        "version": min(versions.values()),
        "samples": len(rewards),
    }


def _each_live(a: Any, call: Callable[[Any], Any]) -> dict[str, Any]:
    """``call`` on every live rollout; those that fail are marked dead."""
    import ray

    out = {}
    for rid, ref in [(rid, call(w)) for rid, w in a.live().items()]:
        try:
            out[rid] = ray.get(ref)
        except ray.exceptions.RayError:
            a.dead.add(rid)
    if not out:
        raise RuntimeError("no live rollout left")
    return out


def collect(a: Any) -> dict:
    """Everything the run directory needs, read from the actors after the loop stopped."""
    import ray

    from laminar.runtime.run import ray_run

    live = a.live()
    out = {
        "ledger": ray.get(a.buffer.ledger.remote()),
        "delivery": ray.get(a.buffer.delivery_report.remote()),
        "pending": ray.get(a.partial.pending.remote()),
        "issued_groups": ray.get(a.prompts.issued_groups.remote()),
        "rollout_stats": ray.get([r.stats.remote() for r in live.values()]),
        "manager": ray.get(a.manager.report.remote()),
        "dead_rollouts": sorted(a.dead),
    }
    handles = {"trainer": a.trainer, **live}
    out["peak_rss_bytes"] = {name: ray_run.peak_rss_bytes(h) for name, h in handles.items()}
    return out


def reap_dead(a: Any) -> None:
    """Remove what dead rollouts' engines left on this machine: their processes (ours: the
    engines they started) and the shared-memory files they mapped, which no one unlinks now."""
    from laminar.runtime.faults.inject import reap

    for rid in sorted(a.dead):
        reap(a, rid)
