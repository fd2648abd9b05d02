"""``laminar trace``: show, synthesize and fit trajectory-length traces."""

from __future__ import annotations

import argparse

from laminar.cli.common import int_in
from laminar.errors import LaminarError

# Same bounds as the workload config section (laminar/config/workload.py).
SHAPE_BOUNDS = {
    "steps": (1, 1_000_000),
    "prompts_per_step": (1, 1_000_000),
    "samples_per_prompt": (1, 1024),
    "max_prompt_len": (1, 1_048_576),
    "max_response_len": (1, 1_048_576),
}

# Defaults follow the paper's setup (§8, App. A.2), as in the workload config section.
_SHAPE_DEFAULTS = {
    "steps": 20,
    "prompts_per_step": 512,
    "samples_per_prompt": 16,
    "max_prompt_len": 2048,
    "max_response_len": 16384,
}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("trace", help="show, synthesize and fit trajectory-length traces")
    cmds = p.add_subparsers(dest="trace_command", metavar="ACTION", required=True)
    show = cmds.add_parser("show", help="percentiles of a trace, and a histogram with --plot")
    show.add_argument("file", help="trace file (.csv, .parquet, .jsonl; Azure/Vidur layouts too)")
    show.add_argument("--plot", metavar="OUT.png", help="write the length histogram per step")
    _add_max_response(show)
    show.set_defaults(func=_show)
    synth = cmds.add_parser("synth", help="write a seeded synthetic trace from a preset")
    synth.add_argument("preset", nargs="?", help="preset name (see --list)")
    synth.add_argument("-o", "--output", metavar="FILE", help="output trace file")
    synth.add_argument("--list", action="store_true", help="list presets and their parameters")
    for name, default in _SHAPE_DEFAULTS.items():
        flag = "--" + name.replace("_", "-")
        low, high = SHAPE_BOUNDS[name]
        synth.add_argument(
            flag, type=int_in(low, high), default=default, help=f"(default {default})"
        )
    synth.add_argument(
        "--seed", type=int_in(0, 2**32 - 1), default=0, help="random seed (default 0)"
    )
    synth.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a generator parameter, e.g. --param response_median_tokens=2000",
    )
    synth.set_defaults(func=_synth)
    fit = cmds.add_parser("fit", help="fit the generator's parameters to a trace")
    fit.add_argument("file", help="trace file")
    fit.add_argument("--preset", help="preset to compare with (default: by the trace's columns)")
    _add_max_response(fit)
    fit.set_defaults(func=_fit)


def _add_max_response(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-response-len",
        type=int_in(1, 1 << 24),
        metavar="TOKENS",
        help="declared response cap: longer responses are errors, responses at it are "
        "truncated (default: none / the longest 'length' response)",
    )


PLOT_SUFFIXES = (".png", ".pdf", ".svg")
"""Formats --plot writes (matplotlib's, by the name's suffix)."""


def _show(args: argparse.Namespace) -> int:
    from laminar.traces import read_trace
    from laminar.traces.report import format_per_step, format_stats
    from laminar.traces.stats import trace_stats

    if args.plot:
        from laminar.rundir import prepare_file_out

        prepare_file_out(args.plot, inputs=[args.file], outside_run_dirs=True,
                         suffixes=PLOT_SUFFIXES)  # fmt: skip
    df = read_trace(args.file, max_response_len=args.max_response_len)
    print(f"trace: {args.file}")
    print(format_stats(trace_stats(df)))
    print(format_per_step(df), end="")
    if args.plot:
        from laminar.traces.plot import plot_length_histogram

        plot_length_histogram(df, args.plot, title=f"{args.file}: response lengths")
        print(f"wrote {args.plot}")
    return 0


def _synth(args: argparse.Namespace) -> int:
    from laminar.traces import synthesize, write_trace

    if args.list:
        _print_presets()
        return 0
    if not args.preset or not args.output:
        raise LaminarError("trace synth needs PRESET and -o FILE (or --list)")
    from laminar.rundir import prepare_file_out

    prepare_file_out(args.output, outside_run_dirs=True, suffixes=(".csv", ".parquet", ".jsonl"))
    df = synthesize(
        args.preset,
        steps=args.steps,
        prompts_per_step=args.prompts_per_step,
        samples_per_prompt=args.samples_per_prompt,
        max_prompt_len=args.max_prompt_len,
        max_response_len=args.max_response_len,
        seed=args.seed,
        overrides=_parse_params(args.param),
    )
    write_trace(df, args.output)
    print(f"wrote {args.output}: {len(df):,} trajectories ({args.preset}, seed {args.seed})")
    return 0


def _parse_params(items: list[str]) -> dict[str, float]:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep:
            raise LaminarError(f"--param {item}: expected NAME=NUMBER")
    return out


def _print_presets() -> None:
    import dataclasses

    from laminar.traces.presets import all_presets

    for preset in all_presets().values():
        print(f"{preset.name}: {preset.description}")
        for name, value in dataclasses.asdict(preset.params).items():
            if name.startswith(("tool_", "max_turns")) and preset.params.tool_calls_mean == 0:
                continue  # a single-turn preset: the tool parameters are unused
            print(f"  {name:28s} {value:.6g}")
    print("sources of every value: laminar/traces/presets.py")


def _fit(args: argparse.Namespace) -> int:
    from laminar.traces import read_trace
    from laminar.traces.fit import fit_trace
    from laminar.traces.presets import all_presets
    from laminar.traces.report import format_fit, format_overrides, format_stats
    from laminar.traces.stats import trace_stats

    df = read_trace(args.file, max_response_len=args.max_response_len)
    name = args.preset or ("tool-calling" if "turns" in df.columns else "dapo-math")
    presets = all_presets()
    if name not in presets:
        raise LaminarError(f"unknown preset {name!r}; available: {', '.join(presets)}")
    result = fit_trace(df, max_response_len=args.max_response_len, source=args.file)
    print(f"trace: {args.file}")
    print(format_stats(trace_stats(df)))
    print(format_fit(result, presets[name]))
    print("replay the fitted generator with this config section:")
    print(format_overrides(result, name), end="")
    return 0
