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
# The run finished and its directory is whole, but it is not what was asked: its ledger does
# not balance, or a scheduled fault never happened. Not 2: that is for input refused before
# anything ran (nothing written).
EXIT_LEDGER = 3
EXIT_TERMINATED = 143  # SIGTERM (128 + 15), like a process killed by it


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train",
        help="train for real on Ray: vLLM rollouts, GRPO trainer, repack (tiny model on CPU)",
        description="Run RL training end to end. Without CONFIG or --preset, runs the "
        f"'{DEFAULT_PRESET}' preset (a tiny model on CPU, nothing downloaded). The run directory "
        "grows as the run goes (steps, faults, checkpoints): an interrupted run goes on with "
        "--resume.",
    )
    add_config_args(p)
    p.add_argument("--mode", choices=("laminar", "sync"), help="laminar (default) or sync")
    p.add_argument(
        "--steps", type=int_in(1, 1_000_000), help="trainer steps (overrides workload.steps)"
    )
    add_out_args(p, "runs/train-<mode>-<time>")
    p.add_argument("--address", help="join this Ray cluster (default: start Ray locally)")
    p.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="KIND@WHEN",
        help="inject a fault (repeatable): KIND one of kill-rollout, kill-engine, kill-machine, "
        "kill-relay, kill-trainer (KIND:TARGET picks e.g. rollout r1); WHEN a trainer step "
        "(@5: right after step 5) or seconds into training (@90s)",
    )
    p.add_argument(
        "--resume",
        metavar="RUN_DIR",
        help="continue an interrupted run from its newest checkpoint, to --steps (default: the "
        "run's own workload.steps); its config is reused, --set/--fault add to it",
    )
    p.add_argument("--verbose", action="store_true", help="show Ray and vLLM logs")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=_train)


class Terminated(BaseException):
    """SIGTERM reached the driver: stop like Ctrl-C (engines stopped, run directory kept)."""


def _stop_signal(e: BaseException | None) -> BaseException | None:
    """The SIGTERM (:class:`Terminated`) or Ctrl-C behind ``e``, if any: one that reached the
    driver inside Ray's C code comes back wrapped (Ray's signal check raises ``SystemError``
    from it), so the exception's cause and context chain is searched."""
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, (Terminated, KeyboardInterrupt)):
            return e
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return None


def _config(args: argparse.Namespace):
    """The run's config and, with --resume, the state it continues from."""
    from laminar.config import load_config
    from laminar.errors import ConfigError

    _flags_to_overrides(args)
    state = None
    if args.resume is not None:
        from pathlib import Path

        if not args.resume.strip():  # an empty path would start a new run instead
            raise ConfigError("--resume", "", "is empty: give the run directory to go on from")

        from laminar.runtime.run.resume import load_resume

        if args.config or args.preset or args.out:
            raise ConfigError(
                "--resume", "", "takes its config and directory from the run (no CONFIG, "
                "--preset or --out)"
            )
        from laminar.runtime.cluster.sessions import check_not_running

        _fixed_on_resume(args.overrides)
        _, state = load_resume(args.resume)
        check_not_running(args.resume)  # two drivers must not write one directory
        _not_empty(Path(args.resume) / "config.yaml")
        _marker_is_a_file(Path(args.resume))
        cfg = load_config(Path(args.resume) / "config.yaml", overrides=args.overrides)
        if cfg.workload.steps < state.step + 1:
            raise ConfigError(
                "--steps", str(cfg.workload.steps), f"the run's checkpoint already holds "
                f"{state.step + 1} steps; --resume goes on to more, not fewer"
            )
    else:
        if args.config is None and args.preset is None:
            args.preset = DEFAULT_PRESET
        cfg = config_from_args(args)
    _add_faults(cfg, args.fault)
    return cfg, state


def _not_empty(path) -> None:
    """A run's config.yaml holds its whole resolved config: an empty one (a crash, a user) would
    resume the checkpoint under the built-in defaults, another job."""
    from laminar.inputfile import InputFileError, MiB, read_text

    if not read_text(path, kind="run config (config.yaml)", max_bytes=16 * MiB).strip():
        raise InputFileError(path, "is empty; a `laminar train` run's config.yaml holds its "
                             "resolved config, which --resume continues under")  # fmt: skip


FIXED_ON_RESUME = ("model.", "runtime.model.", "runtime.task.", "runtime.mode")
"""Keys a resumed run cannot change: the checkpoint's weights and pools were made for them."""


def _fixed_on_resume(overrides: list[str]) -> None:
    from laminar.errors import ConfigError

    for text in overrides:
        key = text.partition("=")[0].strip()
        if key.startswith(FIXED_ON_RESUME[:3]) or key == FIXED_ON_RESUME[3]:
            flag = "--mode" if key == "runtime.mode" else f"--set {text[:80]}"
            raise ConfigError(flag, "", f"{key} cannot change on --resume: the checkpoint's "
                              "model and pools were made for the run's own value")  # fmt: skip


def _marker_is_a_file(run) -> None:
    """The run's marker is rewritten when the resumed run starts: a directory or FIFO in its
    place would fail only then, after the engines started."""
    import os

    from laminar.inputfile import check_regular
    from laminar.staging import MARKER

    if os.path.lexists(run / MARKER):
        check_regular(run / MARKER, kind="run marker (JSON)", max_bytes=1 << 20)


def _flags_to_overrides(args: argparse.Namespace) -> None:
    """--mode, --steps and --address as --set overrides; --address's form is checked here so
    that the error names the flag the user typed."""
    import json

    from laminar.config.runtime import check_address_form
    from laminar.errors import ConfigError

    for flag, key in (("mode", "runtime.mode"), ("steps", "workload.steps")):
        if getattr(args, flag) is not None:
            args.overrides.append(f"{key}={getattr(args, flag)}")
    if args.address is not None:
        try:
            check_address_form(args.address)
        except ValueError as e:
            raise ConfigError("--address", "", str(e)) from None
        # quoted: YAML would read a bare 1:30 as a number
        args.overrides.append(f"runtime.address={json.dumps(args.address)}")


def _add_faults(cfg, texts: list[str]) -> None:
    """--fault KIND@WHEN, each checked against the run's config (``laminar.config.fault_checks``)
    before anything starts or is written; then added to ``runtime.faults.inject``."""
    from laminar.config.fault_checks import why_impossible
    from laminar.config.runtime_faults import parse_fault
    from laminar.errors import ConfigError

    have = {spec.text() for _, spec in cfg.runtime.scheduled_faults()}
    for text in texts:
        shown = text[:80] if text[:80].isprintable() else repr(text[:80])  # one line
        try:
            spec = parse_fault(text)
        except ValueError as e:
            raise ConfigError("--fault", shown, str(e)) from None
        why = why_impossible(spec, cfg)
        if why is None and spec.text() in have:
            why = "is given twice (one fault per KIND[:TARGET]@WHEN)"
        if why is not None:
            raise ConfigError("--fault", shown, why)
        have.add(spec.text())
    cfg.runtime.faults.inject = [*cfg.runtime.faults.inject, *texts]


def _train(args: argparse.Namespace) -> int:
    import json
    import signal
    import sys

    from laminar.runtime.run.resume import RunLog

    cfg, state = _config(args)
    from laminar.runtime.run.inputs import check_cluster, check_inputs

    check_inputs(cfg)  # a bad model directory or task file: before any output exists
    check_cluster(cfg)  # no Ray at --address: a clear line within seconds, nothing written
    # --out's rules (a foreign directory, an input inside it are refused) before any work
    target = out_target(args, f"train-{cfg.runtime.mode}", cfg) if state is None else None
    from laminar.runtime.run.driver import train  # Ray, torch: only once the output is sure
    from laminar.runtime.run.outputs import ledger_problems, skipped_faults, write_run_dir
    log = RunLog.create(target, cfg) if state is None else RunLog.reopen(args.resume, cfg)
    out = str(log.out)
    done = len(state.steps) if state is not None else 0
    bar = _progress(cfg.workload.steps, done, disabled=args.no_progress)
    from laminar.runtime.tracking.loggers import Trackers  # runtime.loggers: steps.csv's rows

    trackers = Trackers(cfg.runtime.loggers, log.out, cfg.model_dump(mode="json"))

    def on_step(row: dict) -> None:
        bar.update_step(row)
        trackers.log(row)

    def on_term(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # one is enough; teardown must finish
        raise Terminated

    old = signal.signal(signal.SIGTERM, on_term)
    try:
        result = train(
            cfg,
            on_step=on_step,
            verbose=args.verbose,
            model_out=str(log.out / "model"),
            log=log,
            resume=state,
        )
    except (Terminated, KeyboardInterrupt, Exception) as e:
        # before its first step: the previous run of --out comes back, untouched
        restored = log.give_back()
        stop = _stop_signal(e)
        if stop is None:
            raise
        bar.close()
        why = "terminated" if isinstance(stop, Terminated) else "interrupted"
        then = f"{out} holds the previous run again" if restored else ""
        print(f"laminar train: {why}; {then or f'go on with: laminar train --resume {out}'}",
              file=sys.stderr)  # fmt: skip
        return EXIT_TERMINATED if isinstance(stop, Terminated) else 130
    except BaseException:  # SystemExit: Ray's own SIGTERM handler, set while it connects
        log.give_back()
        raise
    finally:
        bar.close()
        trackers.close()
        signal.signal(signal.SIGTERM, old)
    summary = write_run_dir(cfg, result, log.out)
    log.mark()
    keys = ("mode", "steps", "wall_s", "train_tokens_per_s", "gen_tokens_per_s", "reward_first")
    keys += ("reward_last", "staleness_mean", "staleness_max", "trajectories_lost")
    keys += ("trajectories_duplicated",)
    print(json.dumps({k: summary[k] for k in keys}, indent=2))
    print(f"run directory: {out}")
    problems = ledger_problems(summary)
    if problems:
        print(f"laminar train: error: the ledger does not balance: {problems}", file=sys.stderr)
    skipped = skipped_faults(summary)
    if skipped:
        print(f"laminar train: error: scheduled faults did not happen: {skipped}",
              file=sys.stderr)  # fmt: skip
    return EXIT_LEDGER if problems or skipped else 0


class _Bar:
    """Trainer steps; created at the first step so its rate excludes start-up and warm-up."""

    def __init__(self, total: int, done: int, disabled: bool):
        import sys

        self.total, self.done, self.disabled, self.tqdm = total, done, disabled, None
        if not disabled:
            print("laminar train: starting Ray, engines and warm-up ...", file=sys.stderr)

    def update_step(self, m: dict) -> None:
        if self.tqdm is None:
            from tqdm import tqdm

            self.tqdm = tqdm(
                total=self.total, initial=self.done, unit="step", disable=self.disabled
            )
            self.tqdm.set_description("train")
        self.tqdm.set_postfix(
            reward=f"{m['reward_mean']:.3f}", stale=f"{m['staleness_mean']:.2f}", refresh=False
        )
        self.tqdm.update(1)

    def close(self) -> None:
        if self.tqdm is not None:
            self.tqdm.close()
            self.tqdm = None


def _progress(total: int, done: int, disabled: bool) -> _Bar:
    return _Bar(total, done, disabled)
