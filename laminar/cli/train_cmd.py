"""``laminar train``: real RL training on Ray (vLLM rollouts, torch GRPO trainer)."""

from __future__ import annotations

import argparse

from laminar.cli.common import (
    add_config_args,
    add_out_args,
    config_from_args,
    int_in,
    out_target,
)

DEFAULT_PRESET = "tiny-cpu"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train",
        help="train for real on Ray: vLLM rollouts, GRPO trainer, repack (tiny model on CPU)",
        description="Run RL training end to end. Without CONFIG or --preset, runs the "
        f"'{DEFAULT_PRESET}' preset (a tiny model on CPU, nothing downloaded).",
    )
    add_config_args(p)
    p.add_argument("--mode", choices=("laminar", "sync"), help="laminar (default) or sync")
    p.add_argument(
        "--steps", type=int_in(1, 1_000_000), help="trainer steps (overrides workload.steps)"
    )
    add_out_args(p, "runs/train-<mode>-<time>")
    p.add_argument("--address", help="join this Ray cluster (default: start Ray locally)")
    p.add_argument("--verbose", action="store_true", help="show Ray and vLLM logs")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=_train)


def _train(args: argparse.Namespace) -> int:
    import json

    from laminar.rundir import staged_output

    if args.config is None and args.preset is None:
        args.preset = DEFAULT_PRESET
    for flag, key in (("mode", "runtime.mode"), ("steps", "workload.steps")):
        if getattr(args, flag) is not None:
            args.overrides.append(f"{key}={getattr(args, flag)}")
    if args.address:
        args.overrides.append(f"runtime.address={args.address}")
    cfg = config_from_args(args)
    target = out_target(args, f"train-{cfg.runtime.mode}")  # before Ray, engines, torch
    from laminar.runtime.driver import train
    from laminar.runtime.outputs import write_run_dir

    bar = _progress(cfg.workload.steps, disabled=args.no_progress)
    with staged_output(target) as stage:
        try:
            result = train(
                cfg, on_step=bar.update_step, verbose=args.verbose, model_out=str(stage / "model")
            )
        finally:
            bar.close()
        summary = write_run_dir(cfg, result, stage)
    keys = ("mode", "steps", "wall_s", "train_tokens_per_s", "gen_tokens_per_s", "reward_first")
    keys += ("reward_last", "staleness_mean", "staleness_max", "trajectories_lost")
    print(json.dumps({k: summary[k] for k in keys}, indent=2))
    print(f"run directory: {target.path}")
    return 0


class _Bar:
    """Trainer steps; created at the first step so its rate excludes start-up and warm-up."""

    def __init__(self, total: int, disabled: bool):
        import sys

        self.total, self.disabled, self.tqdm = total, disabled, None
        if not disabled:
            print("laminar train: starting Ray, engines and warm-up ...", file=sys.stderr)

    def update_step(self, m: dict) -> None:
        if self.tqdm is None:
            from tqdm import tqdm

            self.tqdm = tqdm(total=self.total, unit="step", disable=self.disabled, desc="train")
        self.tqdm.set_postfix(
            reward=f"{m['reward_mean']:.3f}", stale=f"{m['staleness_mean']:.2f}", refresh=False
        )
        self.tqdm.update(1)

    def close(self) -> None:
        if self.tqdm is not None:
            self.tqdm.close()


def _progress(total: int, disabled: bool) -> _Bar:
    return _Bar(total, disabled)
