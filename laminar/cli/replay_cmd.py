"""``laminar replay TRACE``: what would each system have done with these lengths? (DESIGN.md,
use 2)."""

from __future__ import annotations

import argparse

from laminar.cli.common import add_config_args, add_out_args, config_from_args, out_target
from laminar.cli.simulate_cmd import run_and_write, systems_override

# The config bound of workload.max_prompt_len / max_response_len (laminar/config/workload.py).
MAX_LEN_TOKENS = 1_048_576


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "replay",
        help="simulate the systems on the response lengths of a trace file",
        description="Replay a trace: simulate each system on its prompt and response lengths "
        "(any layout `laminar trace show` reads: schema CSV/Parquet/JSONL, Azure, Vidur) and "
        "write the same run directory as `laminar simulate`. The trace is reshaped to the "
        "config's batch shape (workload.prompts_per_step x samples_per_prompt, steps); an "
        "ungrouped serving trace forms groups from consecutive rows. workload.max_prompt_len "
        "and max_response_len come from the trace (its longest prompt and response) unless "
        "the config file or --set gives them. Prompt ids may be text (hashes, UUIDs): the "
        "trace's id is kept in trajectories.parquet as source_prompt_id.",
    )
    p.add_argument("trace", help="trace file (.csv, .parquet, .jsonl)")
    add_config_args(p, positional=False)
    p.add_argument(
        "--systems",
        metavar="NAMES",
        help="comma-separated systems to compare ('all' for every one); default: the config's",
    )
    add_out_args(p, "runs/replay-<time>")
    p.set_defaults(func=_replay)


def _replay(args: argparse.Namespace) -> int:
    extra = [systems_override(args.systems)] if args.systems else []
    # The trace replaces whatever workload source the config names; batch shape stays.
    extra.append(f"workload.source={{type: trace, path: {_quoted(args.trace)}}}")
    extra += _limits_from_trace(args)
    cfg = config_from_args(args, extra)
    return run_and_write(cfg, out_target(args, "replay", cfg))


def _limits_from_trace(args: argparse.Namespace) -> list[str]:
    """``--set`` overrides of the length limits the user left to the trace."""
    from laminar.config.loader import explicit_keys
    from laminar.errors import TraceError
    from laminar.traces import read_trace

    given = explicit_keys(args.config, overrides=args.overrides)
    wanted = [
        k for k in ("max_prompt_len", "max_response_len") if f"workload.{k}" not in given
    ]
    if not wanted:
        return []
    trace = read_trace(args.trace)
    longest = {
        "max_prompt_len": int(trace["prompt_len"].max()),
        # One past the longest response unless it was cut at a cap: a response at the limit
        # counts as truncated (finish_reason 'length').
        "max_response_len": _response_cap(trace),
    }
    out = []
    for key in wanted:
        column = key.removeprefix("max_")
        if longest[key] > MAX_LEN_TOKENS:
            raise TraceError(
                args.trace,
                f"the longest {column.replace('_len', '')} has {longest[key]:,} tokens; at "
                f"most {MAX_LEN_TOKENS:,} can be simulated",
                column=column,
            )
        out.append(f"workload.{key}={max(1, longest[key])}")
    return out


def _response_cap(trace) -> int:
    longest = int(trace["response_len"].max())
    cut = trace.loc[trace["response_len"] == longest, "finish_reason"].eq("length").any()
    if cut or longest >= MAX_LEN_TOKENS:
        return longest
    return longest + 1


def _quoted(path: str) -> str:
    """``path`` as a YAML double-quoted scalar (paths may hold ':' or spaces)."""
    return '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"'
