"""One simulation of a plan point (what a worker runs), and what limits it.

:func:`evaluate` is what a worker runs (a local process or a Ray task): it takes a config as a
plain mapping, simulates it in summary-only mode and returns plain figures, so nothing but
JSON crosses a process boundary. A config error (a point the simulator refuses) is a result
too: the point is rejected with the message as its reason. A simulator failure (a bug) is one
as well, marked ``failed``, so one bad point does not stop a plan of hundreds. Results are
cached by ``laminar.plan.cache``.
"""

from __future__ import annotations

from typing import Any

FIGURES = (
    "train_tokens_per_s",
    "gen_tokens_per_s",
    "staleness_mean",
    "staleness_max",
    "mean_kv_util",
    "rollout_idle_frac",
    "actor_stall_s_mean",
    "weight_wait_s_mean",
    "step_time_s_mean",
)
COUNTS = ("trainer_gpus", "replicas", "steps")
SHARES = ("wait_frac", "train_frac", "stall_frac")
"""Shares of the trainer's step time: waiting for data, training, handing weights over."""


def evaluate(config: dict[str, Any]) -> dict[str, Any]:
    """Simulate ``config`` (a ``LaminarConfig.model_dump``): the system and GPU count it ran
    (from the summary), summary figures, :data:`SHARES`; or ``{"ok": False, "reason": ...}``
    when the simulator refuses the config (``"failed": True`` too when it broke)."""
    from laminar.config import LaminarConfig
    from laminar.errors import LaminarError
    from laminar.sim import simulate

    try:
        cfg = LaminarConfig.model_validate(config)
        result = simulate(cfg, summary_only=True)
        return _figures(result)
    except LaminarError as e:
        return {"ok": False, "reason": str(e)}
    except Exception as e:  # a simulator bug: the point says what broke, the plan goes on
        why = f"{type(e).__name__}: {e}"[:2000]
        return {"ok": False, "failed": True, "reason": f"the simulator failed ({why}); "
                "this is a bug in laminar, please report it"}  # fmt: skip


def _figures(result) -> dict[str, Any]:
    row = result.summary.iloc[0]
    out: dict[str, Any] = {"ok": True, "system": str(row["system"]), "gpus": int(row["gpus"])}
    for name in FIGURES:
        v = row[name]
        out[name] = None if v != v else float(v)  # NaN (a run cut short) -> None
    for name in COUNTS:
        out[name] = int(row[name])
    out["steady_state"] = str(row.get("steady_state", ""))
    steps = result.steps
    win = steps[steps["step"] >= int(row["warmup_steps"])]  # ``auto`` resolved by the run
    total = float((win["end_s"] - win["start_s"] + win["data_wait_s"]).sum())
    for key, col in zip(SHARES, ("data_wait_s", "train_s", "actor_stall_s"), strict=True):
        out[key] = float(win[col].sum()) / total if total > 0 else None
    return out


def bottleneck(result: dict[str, Any]) -> str:
    """What limits a simulated point: the largest share of the trainer's step time.

    Waiting for data means generation is too slow; training time means the trainer is; the
    weight hand-over (actor stall, or a baseline's global sync) means weight sync."""
    parts = {
        "generation": result.get("wait_frac"),
        "training": result.get("train_frac"),
        "weight sync": result.get("stall_frac"),
    }
    parts = {k: v for k, v in parts.items() if v is not None}
    return max(parts, key=parts.get) if parts else ""
