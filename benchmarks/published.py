"""Simulated beside published step times of open RL frameworks -> docs/validation.md.

    PYTHONPATH=. python benchmarks/published.py [--rows benchmarks/published_rows.yaml]
        [--out docs/validation.md] [--only ID_PREFIX] [--seeds N]

Every row of ``benchmarks/published_rows.yaml`` (a published step time, its source and its
mapping onto the simulator as config overrides) is simulated, one system per run, and set beside
the published figure: the ratio simulated/published, the median |ratio - 1| over all rows, and
every ordering the sources publish (pairs of a group whose published times differ by more than
5%: sync vs async, and along each scaling series) with whether the simulator agrees. Nothing is
fitted: the rows only state what the sources state, plus the assumptions they name. Each row is
simulated with seeds 0..N-1 (``--seeds``, default :data:`SEEDS`) and its step time and stages are
the means over them: a row's few measured steps move a few percent with the seed (the lengths
drawn, the order work finishes in), which moved the median by up to 4 points. The file's
``syncs`` block holds published weight-synchronisation times, set beside the simulated hand-over
in a section of their own (not step times: outside the median).
"""

from __future__ import annotations

import argparse
import fnmatch
import itertools
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from laminar.config import load_config  # noqa: E402
from laminar.errors import ConfigError  # noqa: E402
from laminar.plotting import save_figure  # noqa: E402
from laminar.plotting.validation import validation_figure  # noqa: E402
from laminar.sim import simulate  # noqa: E402

GOAL = 0.20  # median |simulated / published - 1|
ORDER_MARGIN = 0.05  # published times closer than this are not an ordering
STAGES = ("gen_s", "old_logprob_s", "ref_s", "update_s", "weight_sync_s")
SEEDS = 4  # each row's figures are the means over seeds 0..SEEDS-1


@dataclass
class Row:
    """One published figure and its mapping."""

    id: str
    table: str
    source: str
    group: str
    system: str
    gpus: int
    published_s: float
    overrides: dict
    simulated_s: float = float("nan")
    stages: dict = field(default_factory=dict)
    published_stages: dict = field(default_factory=dict)  # the stages the source prints
    error: str = ""

    @property
    def ratio(self) -> float:
        return self.simulated_s / self.published_s


def load_rows(path: Path) -> tuple[list[Row], dict, list[dict], list[dict]]:
    """(rows, sources, tables, skipped) of the rows file."""
    data = load_file(path)
    rows: list[Row] = []
    for t in data["tables"]:
        for r in t["rows"]:
            gpus = int(r.get("gpus", t["base"].get("cluster.gpus", 0)))
            over = {**t["base"], **r.get("set", {}), "cluster.gpus": gpus,
                    "sim.systems": f"[{r['system']}]"}  # fmt: skip
            rows.append(Row(r["id"], t["name"], t["source"], r["group"], r["system"], gpus,
                            float(r["published_s"]), over,
                            published_stages=_stages(path, r)))  # fmt: skip
    return rows, data["sources"], data["tables"], data.get("skipped", [])


def _stages(path: Path, row: dict) -> dict[str, float]:
    """A row's ``stages``: seconds a step the source prints for some of :data:`STAGES` (a
    stage the source leaves out, or prints as not run, is absent)."""
    given = row.get("stages") or {}
    if not isinstance(given, dict):
        raise ValueError(f"{path}: row {row.get('id')}: stages: a mapping of stage to seconds")
    out = {}
    for k, v in given.items():
        if k not in STAGES:
            raise ValueError(f"{path}: row {row.get('id')}: stages.{k}: not a stage "
                             f"(one of {', '.join(STAGES)})")  # fmt: skip
        if isinstance(v, bool) or not isinstance(v, int | float) or not v >= 0:
            raise ValueError(f"{path}: row {row.get('id')}: stages.{k}: {v!r} is not seconds")
        out[k] = float(v)
    return out


@dataclass
class Sync:
    """One published weight-synchronisation time and its mapping (the file's ``syncs``)."""

    id: str
    ranks: str
    bucketed_s: float  # the source's default path: weights packed into buckets
    per_tensor_s: float  # the source's path of one transfer a tensor (nan: not published)
    overrides: dict
    simulated_s: float = float("nan")
    error: str = ""


def load_syncs(path: Path) -> tuple[list[Sync], dict]:
    """(syncs, block) of the rows file's optional ``syncs`` block; a malformed entry is refused
    naming the file, the entry and the key."""
    block = load_file(path).get("syncs") or {}
    out = []
    for r in block.get("rows", []):
        figures = {}
        for key in ("bucketed_s", "per_tensor_s"):
            v = r.get(key, float("nan") if key == "per_tensor_s" else None)
            if isinstance(v, bool) or not isinstance(v, int | float) or v < 0:
                raise ValueError(f"{path}: syncs row {r.get('id')}: {key}: {v!r} is not seconds")
            figures[key] = float(v)
        over = {**block.get("base", {}), **r.get("set", {}), "cluster.gpus": int(r["gpus"]),
                "sim.systems": f"[{block['system']}]"}  # fmt: skip
        out.append(Sync(r["id"], str(r.get("ranks", "")), figures["bucketed_s"],
                        figures["per_tensor_s"], over))  # fmt: skip
    return out, block


def run_sync(sync: Sync) -> None:
    """Simulate ``sync``'s job in place: the mean seconds of its weight syncs, or the error."""
    s, sync.error = _simulated(sync.overrides)
    if s is not None:
        sync.simulated_s = float(s["weight_sync_s_mean"])


def _syncs_section(syncs: list[Sync], block: dict) -> list[str]:
    """Published beside simulated weight-synchronisation seconds."""
    if not syncs:
        return []
    lines = ["", "## Weight syncs the sources print", "",
             f"{' '.join(block.get('about', '').split())} Seconds of one synchronisation; "
             "sim/pub against the source's default (bucketed) path. Not step times: outside "
             "the median above.", "",
             "| id | trainer:rollout ranks | published s, bucketed | published s, a tensor at a "
             "time | simulated s | sim/pub |", "|---|---|---:|---:|---:|---:|"]  # fmt: skip
    for x in syncs:
        tensor = "-" if x.per_tensor_s != x.per_tensor_s else f"{x.per_tensor_s:g}"
        if x.error:
            lines.append(f"| {x.id} | {x.ranks} | {x.bucketed_s:g} | {tensor} | refused: "
                         f"{x.error} | |")  # fmt: skip
            continue
        lines.append(f"| {x.id} | {x.ranks} | {x.bucketed_s:g} | {tensor} | "
                     f"{x.simulated_s:.3g} | {x.simulated_s / x.bucketed_s:.2f} |")  # fmt: skip
    if block.get("assumed"):
        lines += ["", f"Mapping: {' '.join(block['assumed'].split())}"]
    return lines


def load_file(path: Path) -> dict:
    """The rows file as a mapping."""
    return yaml.safe_load(path.read_text())


def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _simulated(overrides: dict):
    """(the summary row of simulating ``overrides``, '') or (None, the simulator's refusal)."""
    try:
        cfg = load_config(overrides=[f"{k}={_value(v)}" for k, v in overrides.items()])
        return simulate(cfg, summary_only=True).summary.iloc[0], ""
    except ConfigError as e:
        return None, str(e)


def run_row(row: Row, seeds: int = SEEDS) -> None:
    """Simulate ``row`` in place with seeds 0..``seeds``-1: its step time and stage means,
    averaged over the seeds, or the error."""
    runs = []
    for seed in range(seeds):
        s, row.error = _simulated({**row.overrides, "seed": seed})
        if s is None:
            return
        runs.append(s)
    row.simulated_s = statistics.fmean(float(s["step_time_s_mean"]) for s in runs)
    row.stages = {k: statistics.fmean(float(s[f"{k}_mean"]) for s in runs) for k in STAGES}


def rows_frame(rows: list[Row]) -> pd.DataFrame:
    """The simulated rows as a table (what :func:`validation_figure` draws)."""
    done = [r for r in rows if not r.error]
    return pd.DataFrame({"id": [r.id for r in done], "table": [r.table for r in done],
                         "system": [r.system for r in done],
                         "published_s": [r.published_s for r in done],
                         "simulated_s": [r.simulated_s for r in done]})  # fmt: skip


def orderings(rows: list[Row], tables: list[dict]) -> list[tuple[Row, Row, bool, str]]:
    """(faster, slower, simulator agrees, kind) for every published ordering."""
    by_id = {r.id: r for r in rows}
    pairs: list[tuple[Row, Row, str]] = []
    groups: dict[str, list[Row]] = {}
    for r in rows:
        groups.setdefault(r.group, []).append(r)
    for members in groups.values():
        for i, a in enumerate(members):
            for b in members[i + 1 :]:
                pairs.append((a, b, "sync vs async" if a.system != b.system else "same GPUs"))
    for t in tables:
        for series in t.get("scaling", []):
            for x, y in itertools.pairwise(series):
                if x in by_id and y in by_id:
                    pairs.append((by_id[x], by_id[y], "scaling"))
    out = []
    for a, b, kind in pairs:
        if abs(a.published_s / b.published_s - 1) <= ORDER_MARGIN:
            continue
        fast, slow = (a, b) if a.published_s < b.published_s else (b, a)
        ok = fast.simulated_s < slow.simulated_s
        out.append((fast, slow, ok, kind))
    return out


def scaling_gains(rows: list[Row], tables: list[dict]) -> list[tuple[Row, Row]]:
    by_id = {r.id: r for r in rows}
    return [
        (by_id[x], by_id[y])
        for t in tables
        for series in t.get("scaling", [])
        for x, y in itertools.pairwise(series)
        if x in by_id and y in by_id
    ]


def attribute(rows: list[Row], findings) -> dict[str, list[int]]:
    """Row id -> the numbers (1-based) of the findings whose ``explains`` patterns (shell-style,
    on the row id) match it: the stated reason a row misses."""
    return {
        r.id: [i for i, f in enumerate(findings, 1)
               if any(fnmatch.fnmatchcase(r.id, p) for p in f.get("explains", ()))]
        for r in rows
    }  # fmt: skip


def unexplained(misses: list[Row], orders, why: dict[str, list[int]]) -> list[str]:
    """The rows outside the goal and the wrong orderings no finding explains."""
    rows = [r.id for r in misses if not why[r.id]]
    pairs = [f"{a.id} vs {b.id}" for a, b, ok, _ in orders
             if not ok and not (why[a.id] or why[b.id])]  # fmt: skip
    return rows + pairs


def _refs(ids: list[int]) -> str:
    return ", ".join(f"F{i}" for i in ids) or "**not explained**"


def _orderings_section(orders, why) -> list[str]:
    lines = ["", "## Orderings", "", "A wrong ordering is explained by the findings of either "
             "of its rows.", "", "| faster (published) | slower | kind | published | simulated "
             "| right | explained by |", "|---|---|---|---:|---:|---|---|"]  # fmt: skip
    for fast, slow, ok, kind in orders:
        expl = "" if ok else _refs(sorted(set(why[fast.id]) | set(why[slow.id])))
        lines.append(
            f"| {fast.id} | {slow.id} | {kind} | {fast.published_s / slow.published_s:.2f}x | "
            f"{fast.simulated_s / slow.simulated_s:.2f}x | {'yes' if ok else '**no**'} | "
            f"{expl} |"
        )
    return lines


STAGE_NAMES = {"gen_s": "generation", "old_logprob_s": "old log-probs", "ref_s": "reference",
               "update_s": "update", "weight_sync_s": "weight sync"}  # fmt: skip


def _stages_section(done: list[Row]) -> list[str]:
    """Published beside simulated stage seconds, for the rows whose source prints stages: where
    a step's miss sits."""
    staged = [r for r in done if r.published_stages]
    if not staged:
        return []
    lines = ["", "## Stages the sources print", "",
             "Seconds a step, published and simulated, for the rows whose source prints its "
             "stages; gap: simulated - published. The stage with the largest gap (bold) is "
             "where most of the row's miss sits.", "",
             "| id | step sim/pub | stage | published s | simulated s | sim/pub | gap s |",
             "|---|---:|---|---:|---:|---:|---:|"]  # fmt: skip
    for r in staged:
        gaps = {k: r.stages[k] - pub for k, pub in r.published_stages.items()}
        worst = max(gaps, key=lambda k: abs(gaps[k]))
        for k, pub in r.published_stages.items():
            sim = r.stages[k]
            ratio = f"{sim / pub:.2f}" if pub > 0 else "-"
            name = f"**{STAGE_NAMES[k]}**" if k == worst else STAGE_NAMES[k]
            lines.append(f"| {r.id} | {r.ratio:.2f} | {name} | {pub:.1f} | {sim:.1f} | "
                         f"{ratio} | {gaps[k]:+.1f} |")  # fmt: skip
    over = [
        f"{r.id} ({sum(r.published_stages.values()):.1f} s of stages, a {r.published_s:g} s step)"
        for r in staged
        if sum(r.published_stages.values()) > r.published_s
    ]
    if over:
        lines += ["", "Printed stages that add up to more than the printed step (the source's "
                  "own figures, as printed): " + "; ".join(over) + "."]  # fmt: skip
    return lines


def _misses_section(done: list[Row], misses: list[Row], why) -> list[str]:
    lines = ["", f"## Rows outside {GOAL:.0%}", ""]
    if not misses:
        return [*lines, "- none"]
    blind = [r.id for r in misses if not why[r.id]]
    lines += [f"{len(misses)} of {len(done)} rows; "
              + (f"{len(blind)} not explained by a finding below: {', '.join(blind)}."
                 if blind else "every one is explained by a finding below (F1, F2, ...).")
              + " Over: simulated slower than published; under: faster.", "",
              "| id | sim/pub | side | explained by |", "|---|---:|---|---|"]  # fmt: skip
    for r in misses:
        side = "over" if r.ratio > 1 else "under"
        lines.append(f"| {r.id} | {r.ratio:.2f} | {side} | {_refs(why[r.id])} |")
    return lines


def render(rows, sources, tables, skipped, took_s: float, findings=(), syncs=(), sync_block=None,
           seeds: int = SEEDS, figure: str = "") -> str:  # fmt: skip
    done = [r for r in rows if not r.error]
    errs = [abs(r.ratio - 1) for r in done]
    median = statistics.median(errs) if errs else float("nan")
    orders = orderings(done, tables)
    right = sum(ok for *_, ok, _ in orders)
    why = attribute(done, findings)
    misses = [r for r in done if abs(r.ratio - 1) > GOAL]
    blind = unexplained(misses, orders, why)
    alt = "Simulated against published step times, row by row"
    picture = ["", f"![{alt}]({figure})"] if figure else []
    lines = [
        "# Validation against published step times",
        "",
        "Generated by `python benchmarks/published.py` from `benchmarks/published_rows.yaml` "
        "(every row's source, mapping and assumptions are there); do not edit by hand.",
        "",
        f"- rows simulated: {len(done)} of {len(rows)}"
        + (f" ({len(rows) - len(done)} refused, listed below)" if len(done) < len(rows) else ""),
        f"- median |simulated/published - 1|: **{median:.1%}** (goal <= {GOAL:.0%}: "
        f"{'met' if median <= GOAL else 'not met'})",
        f"- published orderings right: **{right} of {len(orders)}** (pairs of a group more "
        f"than {ORDER_MARGIN:.0%} apart, and scaling series)",
        f"- rows outside {GOAL:.0%} and wrong orderings that no finding (F1, F2, ... under *Why "
        f"rows miss*) explains: **{len(blind)}**" + (f" ({', '.join(blind)})" if blind else ""),
        *picture,
        "",
        "## Rows",
        "",
        f"Step time in seconds, the mean over the measured steps and over {seeds} seed(s); "
        "stages are the simulated means (generation wait, old log-probs, reference, update, "
        "weight sync).",
        "",
        "| id | system | GPUs | published s | simulated s | sim/pub | gen | old lp | ref | "
        "update | sync |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    table = None
    for r in rows:
        if r.table != table:
            table = r.table
            lines.append(f"| **{table}** | | | | | | | | | | |")
        if r.error:
            lines.append(f"| {r.id} | {r.system} | {r.gpus} | {r.published_s:g} | refused | "
                         "| | | | | |")  # fmt: skip
            continue
        st = " | ".join(f"{r.stages[k]:.1f}" for k in STAGES)
        lines.append(f"| {r.id} | {r.system} | {r.gpus} | {r.published_s:g} | "
                     f"{r.simulated_s:.1f} | {r.ratio:.2f} | {st} |")  # fmt: skip
    lines += _orderings_section(orders, why)
    gains = scaling_gains(done, tables)
    if gains:
        lines += ["", "## Scaling", "", "Step-time gain from doubling the GPUs "
                  "(time at the smaller count / time at the larger, -1).", "",
                  "| from | to | published gain | simulated gain |",
                  "|---|---|---:|---:|"]  # fmt: skip
        for a, b in gains:
            lines.append(f"| {a.id} | {b.id} | {a.published_s / b.published_s - 1:+.1%} | "
                         f"{a.simulated_s / b.simulated_s - 1:+.1%} |")  # fmt: skip
    lines += _stages_section(done)
    lines += _syncs_section(list(syncs), sync_block or {})
    lines += _misses_section(done, misses, why)
    if findings:
        lines += ["", "## Why rows miss", ""]
        for i, f in enumerate(findings, 1):
            lines += [f"**F{i}. {f['title']}.** {' '.join(f['text'].split())}", ""]
        lines.pop()
    refused = [r for r in rows if r.error]
    if refused:
        lines += ["", "## Refused by the simulator", ""]
        lines += [f"- {r.id}: {r.error}" for r in refused]
    lines += ["", "## Mapping assumptions, by table", ""]
    for t in tables:
        lines.append(f"- **{t['name']}** ({t['source']}): {' '.join(t['assumed'].split())}")
    lines += ["", "## Sources", ""]
    lines += [f"- `{k}`: {' '.join(v.split())}" for k, v in sources.items()]
    lines += ["", "## Published tables not mapped", ""]
    lines += [f"- {s['what']}: {' '.join(s['why'].split())}" for s in skipped]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", default=str(ROOT / "benchmarks" / "published_rows.yaml"))
    ap.add_argument("--out", default=str(ROOT / "docs" / "validation.md"))
    ap.add_argument("--only", default="", help="simulate only rows whose id starts so")
    ap.add_argument(
        "--seeds",
        type=int,
        default=SEEDS,
        help=f"seeds a row is simulated with; its figures are their means ({SEEDS})",
    )
    args = ap.parse_args(argv)
    if args.seeds < 1:
        ap.error(f"--seeds: {args.seeds}: give 1 or more")
    rows, sources, tables, skipped = load_rows(Path(args.rows))
    if args.only:
        rows = [r for r in rows if r.id.startswith(args.only)]
    t0 = time.perf_counter()
    for r in rows:
        t = time.perf_counter()
        run_row(r, args.seeds)
        shown = f"{r.simulated_s:.1f} s ({r.ratio:.2f}x)" if not r.error else r.error[:200]
        print(f"{r.id:24s} published {r.published_s:7.1f} s  simulated {shown}  "
              f"[{time.perf_counter() - t:.0f} s]", flush=True)  # fmt: skip
    syncs, sync_block = load_syncs(Path(args.rows))
    if args.only:
        syncs = [x for x in syncs if x.id.startswith(args.only)]
    for x in syncs:
        run_sync(x)
        shown = f"{x.simulated_s:.3g} s" if not x.error else x.error[:200]
        print(f"{x.id:24s} weight sync published {x.bucketed_s:g} s  simulated {shown}", flush=True)
    findings = load_file(Path(args.rows)).get("findings", [])
    picture = Path(args.out).with_suffix(".png")
    save_figure(validation_figure(rows_frame(rows)), picture)
    text = render(rows, sources, tables, skipped, time.perf_counter() - t0, findings, syncs,
                  sync_block, args.seeds, picture.name)  # fmt: skip
    Path(args.out).write_text(text)
    print(f"wrote {args.out} ({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
