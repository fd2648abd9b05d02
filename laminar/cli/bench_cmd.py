"""``laminar bench``: measure components on this machine against their models."""

from __future__ import annotations

import argparse
import json

from laminar.cli.common import float_in, int_in


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="measure components on this machine")
    cmds = p.add_subparsers(dest="bench_command", metavar="COMPONENT", required=True)
    r = cmds.add_parser(
        "relay",
        help="chain broadcast of the relay tier vs its App. D model and vs naive sends",
        description="Start RELAYS relay processes, measure the link's alpha and beta, broadcast "
        "MBYTES MiB down the chain (k* chunks) and from the trainer to each relay in turn; print "
        "JSON (p, nbytes, chunks, measured_s, model_s, actor_stall_s, naive_s, ...).",
    )
    r.add_argument(
        "--relays", type=int_in(2, 1024), default=4, help="relays, master included (>= 2)"
    )
    r.add_argument(
        "--mbytes", type=int_in(1, 1 << 20), default=64, help="weights to broadcast (MiB)"
    )
    r.add_argument("--transport", choices=("ucx", "tcp"), default="ucx")
    r.add_argument("--ucx-tls", default="tcp,self", help="UCX transports (UCX_TLS)")
    r.add_argument(
        "--repeats", type=int_in(1, 1000), default=3, help="measured broadcasts (median)"
    )
    r.add_argument(
        "--link-gbps",
        type=float_in(0.0, 1.0e4),
        default=0.0,
        help="pace every link to this many Gbit/s, so that relay processes sharing this "
        "machine's cores behave like machines with a NIC each (default 0: unpaced)",
    )
    r.add_argument(
        "--kill",
        action="store_true",
        help="then kill the middle relay during one more broadcast and time the repair",
    )
    r.add_argument("--out", help="also write the JSON to this file")
    r.set_defaults(func=_relay)


def _relay(args: argparse.Namespace) -> int:
    from laminar.errors import LaminarError
    from laminar.rundir import prepare_file_out, staged_file
    from laminar.runtime.relay.bench import RelayBench

    if args.repeats < 1:
        raise LaminarError("--repeats must be at least 1")
    if args.out:
        prepare_file_out(args.out, outside_run_dirs=True)  # before minutes of work, not after
    bench = RelayBench(
        args.relays,
        args.mbytes << 20,
        args.transport,
        ucx_tls=args.ucx_tls,
        repeats=args.repeats,
        kill=args.kill,
        link_gbps=args.link_gbps,
    )
    text = json.dumps(bench.run(), indent=2)
    print(text)
    if args.out:
        with staged_file(args.out) as tmp:
            tmp.write_text(text + "\n")
    return 0
