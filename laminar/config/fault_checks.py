"""Whether a scheduled fault (``runtime.faults.inject``, ``laminar train --fault``) can happen.

A fault that cannot happen used to pass the config and be skipped at run time, the run ending
with exit 0 as if it had been survived (issue 32: ``kill-rollout:r99`` of 2 rollouts, a fault at
1e11 s). Each check here knows only the config; what only the running cluster knows (which
machines exist under ``runtime.address``) is checked before the run starts, and a fault that
still does not happen fails the run (``laminar train`` exits 3).
"""

from __future__ import annotations

import re
from typing import Any

from laminar.config.runtime_faults import FaultSpec

# ``cfg`` below is a ``laminar.config.LaminarConfig`` (the root calls these from its validator;
# importing it here would be a circle)
LaminarConfig = Any

_ROLLOUT = re.compile(r"r([0-9]{1,7})")
_RELAY = re.compile(r"(?:relay-)?([0-9]{1,7})")
_MACHINE = re.compile(r"m([0-9]{1,7})")


def why_impossible(spec: FaultSpec, cfg: LaminarConfig) -> str | None:
    """Why ``spec`` can never happen in a run of ``cfg`` (settings named by their dotted
    path, and what would be valid); None when it can."""
    checks = {
        "kill-rollout": _rollout,
        "kill-engine": _rollout,
        "kill-trainer": _trainer,
        "kill-relay": _relay,
        "kill-machine": _machine,
    }
    return _when(spec, cfg) or checks[spec.kind](spec, cfg)


def _when(spec: FaultSpec, cfg: LaminarConfig) -> str | None:
    steps = cfg.workload.steps
    if spec.step is not None and spec.step >= steps:
        return f"never happens: the run has workload.steps {steps} (steps 0..{steps - 1})"
    # Every step ends within runtime.step_timeout_s or fails the run: the training loop cannot
    # outlast steps x step_timeout_s.
    longest_s = steps * cfg.runtime.step_timeout_s
    if spec.at_s is not None and spec.at_s > longest_s:
        return (
            f"never happens: {spec.at_s:g} s is past the longest the training loop can last, "
            f"workload.steps {steps} x runtime.step_timeout_s {cfg.runtime.step_timeout_s:g} = "
            f"{longest_s:g} s (a fault in seconds is 0s..{longest_s:g}s)"
        )
    return None


def _rollout(spec: FaultSpec, cfg: LaminarConfig) -> str | None:
    n, replace = cfg.runtime.rollouts, cfg.runtime.faults.replace_dead
    if spec.target is not None:
        m = _ROLLOUT.fullmatch(spec.target)
        if m is None or int(m[1]) >= n:
            return (
                f"no rollout {spec.target!r}: runtime.rollouts is {n}, named r0..r{n - 1} "
                "(a replacement's id is not known before it starts)"
            )
    # Untargeted, the last healthy rollout is spared; targeted, it dies and the run waits for
    # its replacement, which never comes without replace_dead.
    if n < 2 and (spec.target is None or not replace):
        return (
            f"needs at least 2 rollouts (one must survive to take over the dead one's work); "
            f"runtime.rollouts is {n}"
            + ("" if spec.target is None else " and runtime.faults.replace_dead is false")
        )
    return None


def _trainer(spec: FaultSpec, cfg: LaminarConfig) -> str | None:
    if spec.target is not None:
        return f"takes no target (the run has one trainer), got {spec.target!r}"
    every = cfg.runtime.checkpoint_every
    first = every - 1  # the step after which the first checkpoint is written
    if spec.step is not None and (every == 0 or spec.step < first):
        return (
            f"restarts the trainer from a checkpoint, but none exists by step {spec.step}: "
            f"set runtime.checkpoint_every to 1..{spec.step + 1} (now {every})"
        )
    return None


def _relay(spec: FaultSpec, cfg: LaminarConfig) -> str | None:
    if not cfg.relay.enabled:
        return "needs the relay tier: set relay.enabled=true"
    one_machine = not cfg.runtime.address  # a local Ray: one machine, one relay (relay-0)
    if spec.target is not None:
        m = _RELAY.fullmatch(spec.target)
        if m is None:
            return f"no relay {spec.target!r}: a relay is named by its index, 0 or relay-0"
        if one_machine and int(m[1]) > 0:
            return (
                f"no relay {spec.target!r}: a local Ray is one machine with one relay, "
                "relay-0 (more need runtime.address, a cluster of several machines)"
            )
    elif one_machine:
        return (
            "hits a relay on another machine than the trainer, and a local Ray is one "
            "machine: name the trainer's own relay (kill-relay:0) or join a cluster "
            "(runtime.address)"
        )
    return None


def _machine(spec: FaultSpec, cfg: LaminarConfig) -> str | None:
    if not cfg.runtime.address:
        return (
            "needs several machines: a local Ray is one; join an emulated cluster registered "
            "in this process (runtime.address, laminar.runtime.faults.machines.register)"
        )
    if spec.target is not None:
        m = _MACHINE.fullmatch(spec.target)
        if m is None:
            return f"no machine {spec.target!r}: machines are named m1, m2, ..."
        if int(m[1]) == 0:
            return "m0 holds Ray's head, which the run cannot lose: name m1, m2, ..."
    return None


def first_problem(cfg: LaminarConfig) -> str | None:
    """The first scheduled fault of ``cfg`` that cannot happen, with why; None when all can."""
    seen: set[str] = set()
    for name, spec in cfg.runtime.scheduled_faults():
        why = why_impossible(spec, cfg)
        if why is None and spec.text() in seen:
            why = "is given twice (one fault per KIND[:TARGET]@WHEN)"
        if why is not None:
            return f"runtime.{name} {why}"
        seen.add(spec.text())
    return None
