"""Fit the cost model's coefficients (``laminar.sim.cost``) to what runs measured.

Terms, each fitted by ``scipy.optimize.least_squares`` with coefficients >= 0:

- **engine step**: an engine step's wall seconds are 1 + alpha x D + alpha_batch x W +
  alpha_spin x S times (D, S: core-mates decoding, spinning during the step, each counted by
  the share of the step it spent so; W: D weighted by the mate's sequences / max_batch, as a
  mate's CPU demand grows with its batch; ``mate_load``; a mate decodes while it holds
  requests and spins for ``ENGINE_SPIN_S`` after it empties: vLLM's worker polls for work
  that long; the simulator's ``CoreSharing``; alpha = 1 would be perfect processor sharing),
  times 1 + beta x R per runtime mode where the steps can tell it apart from sharing
  (``separable_modes``; beta = 0 for sync): R is the number of the mode's rollouts pinned to
  the step's cores, itself included (``machine.json``'s ``rollout_cpus``). A laminar rollout's
  control loop runs on its engine's cores whether or not it decodes (``rollout.py:
  _laminar_loop`` polls the weight store every 10 ms and asks the prompt pool for work,
  ``asking.py``), so each costs its cores' engines the same beta; sync rollouts have no
  such loop. One such load per rollout
  is what lets a two-rollout calibration predict a one-rollout job. Then times 1 + gamma x O
  for an engine alone on its cores, O the share of the step another core set had work (an
  engine there stepping, the trainer updating: ``other_core_share``): on this 2-core machine
  such an engine measured ~1.01x its fit while the other core idled and 1.11-1.20x while it
  worked (eighth campaign); engines that share their cores show no such effect. Timed
  directly the cores do not slow each other (eleventh campaign), and the runs may support
  gamma only as a difference between runs (one setting's engines slower than another's);
  ``within_run_gamma`` gives what each run's own steps support, which the cost file records
  beside it. Then times
  ``decode_base_s + decode_per_seq_s x sequences decoded + decode_per_kv_token_s x KV
  tokens + prefill_per_token_s x prompt tokens prefilled in the step``. vLLM prefills inside a
  decode step, so prefill has no base of its own (``prefill_base_s`` = 0) and prompts this
  short cannot separate a squared term (``prefill_per_token_sq_s`` = 0). Plain least squares,
  not a robust loss: steps that another process interrupted are part of what a run costs
  here, and throughput is a sum of step times, so the fit must match their mean.
- **trainer**: a step's wall seconds = base + (``train_flop_per_token`` x tokens +
  ``train_flop_per_token_sq`` x squared lengths) / rate, the tokens padded to their
  micro-batch's longest as the trainer computes them (``padded_tokens``), with the FLOP
  counts of the model (8 x params, 8 x layers x hidden, as ``laminar.sim.costdata`` counts
  them); base and rate
  are fitted per trainer thread count (``runtime.trainer_step_base_s_by_threads``,
  ``runtime.trainer_flop_per_s_by_threads``); step 0 is left out (a fresh trainer's first
  step pays torch's warm-up). Where the steps cannot tell base from rate (FLOPs that vary
  by under 20%, or a slope within two standard errors of zero: a short, noisy run), the whole
  step is charged per FLOP, which keeps the mean step, and ``laminar calibrate`` says so.
- **weights**: ``rdma_bytes_per_s`` = weight bytes / median publish seconds (the actor stall:
  one copy into ``/dev/shm``); ``pcie_bytes_per_s`` = weight bytes / median load seconds.

- **refill latency**: from a rollout's weight load to the start of its first engine step
  after it: the control plane (take prompts from the pool, register them in the partial pool,
  submit them to the engine; Ray calls), median over loads; waits longer than
  ``MAX_REFILL_S`` are the prompt budget's (the simulator models those) and are left out.

Runs made while the machine ran at different speeds: when every run has its speed probe,
``laminar.calibrate`` passes each run's speed over the runs' geometric mean
(``speed.factors``); the engine and trainer terms divide that run's seconds by it, so the
coefficients hold at the mean speed (the cost file's ``runtime.speed_reference``).

Fit quality per term: R², the median and 90th percentile of |residual| / measured.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from laminar.calibrate.rundir import RunData, step_timeline
from laminar.config.runtime import VLLM_ENGINE_SPIN_S
from laminar.policy.microbatch import padded_lengths

DECODE_TERMS = ("decode_base_s", "decode_per_seq_s", "decode_per_kv_token_s", "prefill_per_token_s")
TRAIN_FLOP_PER_PARAM_TOKEN = 8  # as laminar.sim.costdata counts trainer FLOPs
MAX_REFILL_S = 0.5  # longer gaps after a load are waits for the prompt budget
# vLLM's multiprocess worker keeps polling for its next step with sched_yield() for this long
# after its last one before it sleeps (``shm_broadcast.SpinCondition(busy_loop_s=1)``): an
# idle engine still takes its share of cores it shares with another engine. A run that sets
# ``runtime.engine_spin_s`` spins that long instead (``laminar.runtime.rollout.vllm_spin``).
ENGINE_SPIN_S = VLLM_ENGINE_SPIN_S
MIN_MODE_SPLIT = 0.05  # share of a mode's steps alone (and shared) to fit its own factor
MIN_CROSS_SPREAD = 0.01  # mean squared other-core share about its run's mean, to read gamma


def replica_index(replica_id: object) -> int:
    """``"r3"`` -> 3 (the runtime's replica names); -1 for any other name."""
    text = str(replica_id)
    return int(text[1:]) if text[:1] == "r" and text[1:].isdigit() else -1


@dataclass
class Fit:
    """One fitted term: its coefficients and how well they explain the measurements."""

    name: str
    values: dict[str, float]
    samples: int
    r2: float
    rel_err_median: float
    rel_err_p90: float
    note: str = ""
    caveat: str = ""  # what the fit could not tell from the runs (``laminar calibrate`` says)


def quality(measured: np.ndarray, predicted: np.ndarray) -> tuple[float, float, float]:
    """(R², median |rel. residual|, p90 |rel. residual|)."""
    resid = measured - predicted
    total = float(np.sum((measured - measured.mean()) ** 2))
    r2 = 1.0 - float(np.sum(resid**2)) / total if total > 0 else float("nan")
    rel = np.abs(resid) / np.maximum(np.abs(measured), 1e-12)
    return r2, float(np.median(rel)), float(np.percentile(rel, 90))


def sharing(run: RunData, spin_s: float = ENGINE_SPIN_S) -> np.ndarray:
    """For every engine-step row: replicas occupying its cores then (itself included). A
    core-mate occupies them while it steps and for ``spin_s`` after its last step (vLLM's
    worker spins on ``sched_yield()`` that long before it sleeps: ``ENGINE_SPIN_S``)."""
    eng = run.engine
    cpus = run.machine["rollout_cpus"]
    group = {f"r{i}": tuple(c) or (f"r{i}",) for i, c in enumerate(cpus)}
    k = np.ones(len(eng))
    at = eng["at_s"].to_numpy(float)
    step = eng["step_s"].to_numpy(float)
    ids = eng["replica_id"].astype(str).to_numpy()
    for rid in np.unique(ids):
        mates = [m for m in np.unique(ids) if m != rid and group.get(m) == group.get(rid)]
        mine = ids == rid
        for m in mates:
            order = np.argsort(at[ids == m])
            ends = at[ids == m][order]
            starts = ends - step[ids == m][order]
            # The mate's first step ending after this step began (less its spin): it occupied
            # the cores during this step if that step had started by the time this one ended.
            nxt = np.searchsorted(ends, at[mine] - step[mine] - spin_s)
            ok = nxt < len(ends)
            hit = np.zeros(int(mine.sum()), dtype=bool)
            hit[ok] = starts[nxt[ok]] <= at[mine][ok]
            k[mine] += hit
    return k


def _covered(intervals: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(starts, ends, cumulative length before each) of sorted, disjoint [start, end] rows."""
    if len(intervals) == 0:
        return np.zeros(0), np.zeros(0), np.zeros(1)
    iv = intervals[np.argsort(intervals[:, 0])]
    starts, ends = [iv[0, 0]], [iv[0, 1]]
    for a, b in iv[1:]:
        if a <= ends[-1]:
            ends[-1] = max(ends[-1], b)
        else:
            starts.append(a)
            ends.append(b)
    st, en = np.asarray(starts), np.asarray(ends)
    return st, en, np.concatenate([[0.0], np.cumsum(en - st)])


def _weighted(intervals: np.ndarray, weights: np.ndarray) -> tuple:
    """Like ``_covered`` for disjoint intervals that each carry a weight: (starts, ends,
    cumulative weight x length before each) — ``_length_before`` then sums weight x time."""
    if len(intervals) == 0:
        return np.zeros(0), np.zeros(0), np.zeros(1)
    order = np.argsort(intervals[:, 0])
    st, en, w = intervals[order, 0], intervals[order, 1], weights[order]
    en = np.maximum(np.minimum(en, np.append(st[1:], np.inf)), st)  # clip any overlap
    return st, en, np.concatenate([[0.0], np.cumsum((en - st) * w)]), w


def _length_before(x: np.ndarray, cover: tuple[np.ndarray, np.ndarray, np.ndarray]) -> np.ndarray:
    """Length of the covered intervals left of each ``x``."""
    st, en, cum = cover[:3]
    w = cover[3] if len(cover) > 3 else np.ones(len(st))
    if len(st) == 0:
        return np.zeros(len(x))
    i = np.searchsorted(st, x, side="right")  # intervals starting at or before x
    last = np.maximum(i - 1, 0)
    inside = np.where(i > 0, np.clip(x - st[last], 0.0, en[last] - st[last]) * w[last], 0.0)
    return cum[last] * (i > 0) + inside


def mate_load(run, spin_s: float = ENGINE_SPIN_S) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For every engine-step row: (decoding, spinning) core-mates during the step, each the
    share of the step a mate spent so (summed over mates on the same cores), and the decoding
    mates' batch: the same share weighted by the mate's sequences / ``runtime.max_batch``.

    A mate is *decoding* from the start of a step to the start of its next one while it still
    holds requests after the step (``running`` > 0: the engine loops straight into the next
    step; the simulator's busy replica), and *spinning* for ``spin_s`` after a step that left
    it empty (vLLM's worker polls for work that long: ``ENGINE_SPIN_S``). A decoding mate takes
    a share of the cores for its own steps; a spinning one mostly yields them, so the two cost
    a step differently (``fit_engine``). Without a ``running`` column every gap counts as spin.
    """
    eng = run.engine
    cpus = run.machine["rollout_cpus"]
    group = {f"r{i}": tuple(c) or (f"r{i}",) for i, c in enumerate(cpus)}
    at = eng["at_s"].to_numpy(float)
    step = eng["step_s"].to_numpy(float)
    start = at - step
    held = eng["running"].to_numpy(float) if "running" in eng else np.zeros(len(eng))
    ids = eng["replica_id"].astype(str).to_numpy()
    max_batch = run.machine.get("max_batch") or run.config.runtime.max_batch
    seqs = eng["decode_seqs"].to_numpy(float) / max(float(max_batch), 1.0)
    busy, spin, batch = np.zeros(len(eng)), np.zeros(len(eng)), np.zeros(len(eng))
    covers = {}
    for rid in np.unique(ids):
        rows = np.flatnonzero(ids == rid)
        rows = rows[np.argsort(at[rows])]
        s, e, h = start[rows], at[rows], held[rows]
        nxt = np.append(s[1:], np.inf)
        loops = h > 0  # straight into the next step
        dec = np.column_stack([s, np.where(loops, np.maximum(nxt, e), e)])
        idle = ~loops
        spn = np.column_stack([e[idle], np.minimum(e[idle] + spin_s, nxt[idle])])
        covers[rid] = (_covered(dec), _covered(spn[spn[:, 1] > spn[:, 0]]),
                       _weighted(dec, seqs[rows]))
    length = np.maximum(step, 1e-12)
    for rid in np.unique(ids):
        mine = ids == rid
        for m, (dec, spn, weighted) in covers.items():
            if m == rid or group.get(m) != group.get(rid):
                continue
            a, b = start[mine], at[mine]
            d = (_length_before(b, dec) - _length_before(a, dec)) / length[mine]
            sp = (_length_before(b, spn) - _length_before(a, spn)) / length[mine]
            busy[mine] += np.clip(d, 0.0, 1.0)
            wb = (_length_before(b, weighted) - _length_before(a, weighted)) / length[mine]
            batch[mine] += np.clip(wb, 0.0, 1.0)
            spin[mine] += np.clip(np.minimum(sp, 1.0 - np.clip(d, 0.0, 1.0)), 0.0, 1.0)
    return busy, spin, batch


def share_covered(cover: tuple, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The share of each [start, end] window that ``cover`` (``_covered``) covers."""
    length = np.maximum(end - start, 1e-12)
    busy = _length_before(end, cover) - _length_before(start, cover)
    return np.clip(busy / length, 0.0, 1.0)


def update_intervals(run: RunData) -> np.ndarray:
    """[start, end] of each trainer update on the job clock (``steps.csv``,
    ``step_timeline``); no rows without a steps table."""
    steps = step_timeline(run.path, float(run.summary.get("setup_s", 0.0)))
    if steps is None:
        return np.zeros((0, 2))
    return np.column_stack([steps["train_start_s"], steps["train_start_s"] + steps["train_s"]])


def other_core_share(run: RunData, *, with_mates: bool = False) -> np.ndarray:
    """For every engine-step row: the share of the step during which a core outside the
    engine's own set had work (another engine's steps on other cores, or the trainer's updates
    when its cores are not all the engine's), for engines alone on their cores; 0 for engines
    with core-mates unless ``with_mates``. The trainer's updates come from ``steps.csv``
    (``step_timeline``)."""
    eng = run.engine
    cpus = [frozenset(c) for c in run.machine["rollout_cpus"]]
    trainer = frozenset(run.machine.get("trainer_cpus") or [])
    start = (eng["at_s"] - eng["step_s"]).to_numpy(float)
    end = eng["at_s"].to_numpy(float)
    ids = eng["replica_id"].astype(str).to_numpy()
    index = {rid: replica_index(rid) for rid in np.unique(ids)}
    train = update_intervals(run)
    out = np.zeros(len(eng))
    for rid, i in index.items():
        if not 0 <= i < len(cpus) or not cpus[i] or (cpus.count(cpus[i]) > 1 and not with_mates):
            continue  # unplaced, or sharing its cores: core sharing's to explain
        mine = ids == rid
        parts = [np.column_stack([start[ids == r], end[ids == r]])
                 for r, j in index.items() if r != rid and 0 <= j < len(cpus)
                 and not cpus[j] & cpus[i]]  # fmt: skip
        if trainer - cpus[i]:
            parts.append(train)
        if parts:
            out[mine] = share_covered(_covered(np.vstack(parts)), start[mine], end[mine])
    return out


def engine_frame(runs: list[RunData], speed: Sequence[float] | None = None) -> pd.DataFrame:
    """Every run's sampled engine steps with what the engine term reads: ``k`` (the run's
    machine speed over the reference), the core-mate loads (``busy``, ``spin``, ``batch``),
    ``cross`` (``other_core_share``), ``mode``, ``rollouts_here`` and ``run`` (its index)."""
    frames = []
    for i, run in enumerate(runs):
        df = run.engine[["replica_id", "step_s", "decode_seqs", "kv_tokens", "prefill_tokens"]]
        df = df.copy()
        df["k"] = 1.0 if speed is None else float(speed[i])
        spin_s = run.config.runtime.engine_spin_effective_s
        df["share"] = sharing(run, spin_s)
        df["busy"], df["spin"], df["batch"] = mate_load(run, spin_s)
        df["cross"] = other_core_share(run)
        df["mode"] = str(run.machine["mode"])
        cores = [tuple(c) for c in run.machine.get("rollout_cpus", [])]
        here = [cores.count(c) if c else 1 for c in cores]  # unpinned: devices of its own
        index = df["replica_id"].map(replica_index)
        df["rollouts_here"] = [here[i] if 0 <= i < len(here) else 1 for i in index]
        df["run"] = i
        frames.append(df)
    df = pd.concat(frames, ignore_index=True)
    return df[(df["decode_seqs"] > 0) & (df["step_s"] > 0)]


def _mates(busy, spin, batch, alpha: float, alpha_spin: float, alpha_batch: float):
    """The core-mate factor of an engine step (module docstring): 1 + alpha x decoding mates
    + alpha_spin x spinning ones + alpha_batch x the decoding mates' batch."""
    return 1.0 + (alpha * busy + alpha_spin * spin + alpha_batch * batch)


def engine_seconds(values: dict, df: pd.DataFrame) -> np.ndarray:
    """The engine term's seconds for each row of ``engine_frame`` at the reference speed
    (times ``k`` at the run's own), with ``values`` as ``fit_engine`` returns them."""
    solo = float(values["decode_base_s"])
    for term, column in zip(DECODE_TERMS[1:], ("decode_seqs", "kv_tokens", "prefill_tokens"),
                            strict=True):
        solo = solo + float(values[term]) * df[column].to_numpy(float)
    loads = values.get("mode_load_per_rollout") or {}
    beta = df["mode"].map(lambda m: float(loads.get(m, 0.0))).to_numpy(float)
    factor = 1.0 + float(values["cross_core_gamma"]) * df["cross"].to_numpy(float)
    factor *= 1.0 + beta * df["rollouts_here"].to_numpy(float)
    mates = _mates(df["busy"].to_numpy(float), df["spin"].to_numpy(float),
                   df["batch"].to_numpy(float), float(values["core_sharing_alpha"]),
                   float(values["core_sharing_alpha_spin"]),
                   float(values["core_sharing_alpha_batch"]))
    return factor * mates * solo


def fit_engine(runs: list[RunData], speed: Sequence[float] | None = None) -> Fit:
    """The engine-step term over every run's sampled steps (module docstring). ``speed``: each
    run's machine speed over the reference (``laminar.calibrate.speed.factors``); its step
    times are divided by it, so the coefficients hold at the reference speed. The core-mate
    shares come from the steps as timed."""
    df = engine_frame(runs, speed)
    if len(df) < len(DECODE_TERMS) + 1:
        need = len(DECODE_TERMS) + 1
        raise ValueError(f"only {len(df)} engine steps recorded; need at least {need}")
    modes = sorted(df["mode"].unique())
    ref = "sync" if "sync" in modes else modes[0]  # the mode whose factor is 1
    others = separable_modes(df, [m for m in modes if m != ref])
    y = (df["step_s"] / df["k"]).to_numpy(float)
    busy, spin = df["busy"].to_numpy(float), df["spin"].to_numpy(float)
    batch, cross = df["batch"].to_numpy(float), df["cross"].to_numpy(float)
    which = [(df["mode"] == m).to_numpy() for m in others]
    here = df["rollouts_here"].to_numpy(float)
    x = np.column_stack(
        [np.ones(len(df)), df["decode_seqs"], df["kv_tokens"], df["prefill_tokens"]]
    ).astype(float)
    scale = np.maximum(x.mean(axis=0), 1e-9)  # columns of comparable size for the solver
    z = x / scale
    n = x.shape[1]

    def resid(p: np.ndarray) -> np.ndarray:
        # In step seconds: (1 + beta x the mode's rollouts on the cores) x (1 + alpha
        # decoding mates + alpha_spin spinning mates) x the solo cost, so each step weighs
        # what it cost the run.
        factor = 1.0 + p[n + 3] * cross  # an engine alone on its cores, the others working
        for beta, rows in zip(p[n + 4 :], which, strict=True):
            factor[rows] *= 1.0 + beta * here[rows]
        return factor * _mates(busy, spin, batch, p[n], p[n + 1], p[n + 2]) * (z @ p[:n]) - y

    start = [*np.full(n, float(np.median(y)) / n), 1.0, 1.0, 0.0, 0.0, *[0.0] * len(others)]
    upper = [*[np.inf] * n, 4.0, 4.0, 8.0, 4.0, *[10.0] * len(others)]
    res = least_squares(resid, start, bounds=(0.0, upper))
    coef = res.x[:n] / scale
    alpha, alpha_spin, alpha_batch = float(res.x[n]), float(res.x[n + 1]), float(res.x[n + 2])
    gamma = float(res.x[n + 3]) if cross.any() else 0.0  # no step saw the others work
    if not spin.any():  # no step ever saw a spinning mate: spin costs what sharing does
        alpha_spin = alpha
    r2, med, p90 = quality(y, resid(res.x) + y)
    no_cross = res.x.copy()
    no_cross[n + 3] = 0.0
    within = within_run_gamma(y / (resid(no_cross) + y), cross, df["run"].to_numpy())
    values = dict(zip(DECODE_TERMS, coef.tolist(), strict=True))
    values["core_sharing_alpha"] = alpha
    values["core_sharing_alpha_spin"] = alpha_spin
    values["core_sharing_alpha_batch"] = alpha_batch
    values["engine_spin_s"] = ENGINE_SPIN_S
    values["cross_core_gamma"] = gamma
    values["cross_core_gamma_within_runs"] = within
    loads = {m: 0.0 for m in modes}  # a mode not separable from sharing keeps 0
    loads.update({m: float(b) for m, b in zip(others, res.x[n + 4 :], strict=True)})
    values["mode_load_per_rollout"] = loads
    shown = ", ".join(f"{m} +{b:.2f}" for m, b in loads.items())
    note = (f"a step costs 1 + ({alpha:.2f} + {alpha_batch:.2f} x batch / B) x decoding "
            f"core-mates + {alpha_spin:.2f} x spinning ones (mean {busy.mean():.2f}, "
            f"{spin.mean():.2f}) times alone, x 1 + {gamma:.2f} x other cores working for an "
            f"engine alone on its cores (mean {cross.mean():.2f}"
            + (f"; within runs {within:.2f}" if within is not None else "") + "); "
            f"per rollout on the cores, by mode: {shown}")  # fmt: skip
    return Fit("engine step", values, len(df), r2, med, p90, note)


def within_run_gamma(ratio: np.ndarray, cross: np.ndarray, run: np.ndarray) -> float | None:
    """``cross_core_gamma`` as each run's own steps support it: log(step seconds / the fitted
    term without the cross-core factor) against the step's other-core share, both taken
    about their run's mean, so that what differs only between runs (one setting's engines
    faster than another's) sets nothing. None where no run's share varies. The fit's own
    gamma also uses the differences between runs (a job with one engine against one with two);
    the two disagree when the runs' engines differ in speed for a reason the term does not
    see (docs/fidelity.md, *Issue 31*): ``laminar simulate --cost`` then warns."""
    ok = (ratio > 0) & np.isfinite(ratio)
    lr, x, run = np.log(ratio[ok]), cross[ok], run[ok]
    frame = pd.DataFrame({"lr": lr, "x": x, "run": run})
    centred = frame[["lr", "x"]] - frame.groupby("run")[["lr", "x"]].transform("mean")
    spread = float((centred["x"] ** 2).sum())
    if spread < MIN_CROSS_SPREAD * max(len(frame), 1):
        return None
    slope = float((centred["x"] * centred["lr"]).sum()) / spread
    return max(0.0, float(np.expm1(slope)))


def separable_modes(df: pd.DataFrame, modes: list[str]) -> list[str]:
    """The modes whose own load the steps can tell apart from core sharing: those with at
    least ``MIN_MODE_SPLIT`` of their steps alone on their cores and as much shared. A mode
    whose every step shared its cores (laminar's two engines on one core, each spinning for
    vLLM's 1 s after its last step) would trade its load against alpha freely; it keeps 0,
    and sharing explains its steps."""
    out = []
    for m in modes:
        alone = float((df.loc[df["mode"] == m, "share"] == 1).mean())
        if MIN_MODE_SPLIT <= alone <= 1 - MIN_MODE_SPLIT:
            out.append(m)
    return out


def train_flops(run: RunData) -> tuple[float, float]:
    """FLOPs per token and per squared length of the run's model (``costdata`` counting)."""
    params = float(run.machine["params"])
    model = run.config.runtime.model
    layers = getattr(model, "layers", None) or run.machine.get("layers")
    hidden = getattr(model, "hidden", None) or run.machine.get("hidden")
    per_sq = TRAIN_FLOP_PER_PARAM_TOKEN * float(layers) * float(hidden) if layers and hidden else 0
    return TRAIN_FLOP_PER_PARAM_TOKEN * params, per_sq


def fit_trainer(runs: list[RunData], column: str = "train_s",
                speed: Sequence[float] | None = None) -> list[Fit]:  # fmt: skip
    """One rate per trainer thread count (module docstring); ``column="train_cpu_s"`` fits
    the trainer's CPU seconds instead of its wall seconds (what it costs on cores of its own).
    ``speed``: as :func:`fit_engine`'s, each run's seconds divided by it."""
    by_threads: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
    for i, run in enumerate(runs):
        k = 1.0 if speed is None else float(speed[i])
        if column not in run.trainer:
            continue
        f1, f2 = train_flops(run)
        # The first step of a fresh trainer pays torch's warm-up (allocations, first backward).
        tr = run.trainer[(run.trainer[column] > 0) & (run.trainer["step"] > 0)]
        tokens, tokens_sq = padded_tokens(run, tr)
        flop = f1 * tokens + f2 * tokens_sq
        by_threads.setdefault(int(run.machine["trainer_threads"]), []).append(
            (flop, tr[column].to_numpy(float) / k)
        )
    fits = []
    for threads, parts in sorted(by_threads.items()):
        flop = np.concatenate([f for f, _ in parts])
        secs = np.concatenate([s for _, s in parts])
        if len(flop) == 0:
            continue
        base_s, sec_per_gflop, why = _line(flop / 1e9, secs)
        r2, med, p90 = quality(secs, base_s + sec_per_gflop * flop / 1e9)
        rate = 1e9 / max(sec_per_gflop, 1e-12)
        what = "trainer CPU" if column == "train_cpu_s" else "trainer"
        fits.append(Fit(f"{what} ({threads} thread{'s' * (threads > 1)})",
                        {"train_flop_per_s": rate, "train_step_base_s": base_s}, len(secs),
                        r2, med, p90, f"{threads}",
                        why and f"no base: all its seconds per FLOP ({why})"))  # fmt: skip
    return fits


def padded_tokens(run: RunData, trainer: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(tokens, sum of squared lengths) each trainer step computed: its trajectories padded to
    their micro-batch's longest (``laminar.policy.microbatch``, as the trainer splits them),
    from the run's trace; a step the trace does not cover exactly keeps the unpadded counts."""
    tokens = trainer["tokens"].to_numpy(float).copy()
    sq = trainer["tokens_sq"].to_numpy(float).copy()
    if run.lengths is None:
        return tokens, sq
    max_tokens = run.config.runtime.grpo.micro_batch_tokens
    by_step = {s: g.tolist() for s, g in run.lengths.groupby("step")["length"]}
    for i, step in enumerate(trainer["step"].to_numpy()):
        lengths = by_step.get(step)
        if lengths is None or sum(lengths) != tokens[i]:
            continue
        padded = np.asarray(padded_lengths(lengths, max_tokens), dtype=float)
        tokens[i], sq[i] = padded.sum(), (padded**2).sum()
    return tokens, sq


def _line(x: np.ndarray, y: np.ndarray) -> tuple[float, float, str]:
    """(a, b, why) with a, b >= 0 of y = a + b x by least squares; b alone (through the origin,
    which keeps the mean of y) when the x do not vary enough to separate them or the steps do
    not resolve b (its least-squares t-value below ``SLOPE_T_MIN``: noise can pull a line's
    slope to nothing, a rate no machine has); ``why`` says which, "" for a line. A tiny
    model's step is mostly fixed cost (Python and kernel launches per micro-batch, the
    optimizer), so the intercept matters."""
    if len(x) < 3 or np.ptp(x) <= 0.2 * np.mean(x):
        why = f"{len(x)} step(s) of {np.ptp(x) / max(np.mean(x), 1e-30):.0%} spread in FLOPs"
        return 0.0, _through_origin(x, y), why
    res = least_squares(lambda c: c[0] + c[1] * x - y, [float(np.median(y)) / 2,
                        float(np.median(y / np.maximum(x, 1e-12))) / 2],
                        bounds=(0.0, np.inf))  # fmt: skip
    t = slope_t(x, y)
    if not t >= SLOPE_T_MIN or res.x[1] <= 0:
        return 0.0, _through_origin(x, y), f"slope not resolved (t = {t:.1f})"
    return float(res.x[0]), float(res.x[1]), ""


SLOPE_T_MIN = 2.0  # a slope within two standard errors of zero is not told from none


def slope_t(x: np.ndarray, y: np.ndarray) -> float:
    """The ordinary least-squares slope of y on x over its standard error (inf for a line
    the points lie on exactly, nan for fewer than three points or x all alike)."""
    n = len(x)
    sxx = float(np.sum((x - x.mean()) ** 2)) if n else 0.0
    if n < 3 or sxx <= 0:
        return float("nan")
    b = float(np.sum((x - x.mean()) * (y - y.mean()))) / sxx
    resid = y - y.mean() - b * (x - x.mean())
    se = math.sqrt(float(np.sum(resid**2)) / (n - 2) / sxx)
    if se == 0:
        return math.copysign(math.inf, b) if b else float("nan")
    return b / se


def _through_origin(x: np.ndarray, y: np.ndarray) -> float:
    return float(np.sum(y) / max(np.sum(x), 1e-30))


def fit_transfer(runs: list[RunData]) -> list[Fit]:
    """Publish (stall) and load bandwidths from their median durations."""
    nbytes = float(runs[0].machine["weight_bytes"])
    out = []
    for name, key, column, frames in (
        ("publish", "rdma_bytes_per_s", "publish_s", [r.trainer for r in runs]),
        ("weight load", "pcie_bytes_per_s", "load_s", [r.loads for r in runs]),
    ):
        secs = pd.concat([f[column] for f in frames]).to_numpy(float)
        secs = secs[secs > 0]
        if len(secs) == 0:
            raise ValueError(f"no {name} was recorded in any run")
        med_s = float(np.median(secs))
        r2, med, p90 = quality(secs, np.full(len(secs), med_s))
        out.append(Fit(name, {key: nbytes / med_s}, len(secs), r2, med, p90,
                       f"median {med_s * 1e3:.1f} ms for {nbytes / 1e6:.2f} MB"))  # fmt: skip
    return out


def fit_refill(runs: list[RunData]) -> Fit:
    """The refill latency (module docstring); 0 with no load followed by a step."""
    gaps = []
    for run in runs:
        eng = run.engine
        for rid, loads in run.loads.groupby(run.loads["replica_id"].astype(str)):
            mine = eng[eng["replica_id"].astype(str) == rid]
            starts = (mine["at_s"] - mine["step_s"]).to_numpy(float)
            if "at_s" not in loads or len(starts) == 0:
                continue
            ends = loads["at_s"].to_numpy(float)
            nxt = np.searchsorted(starts, ends)
            ok = nxt < len(starts)
            gaps += [g for g in starts[nxt[ok]] - ends[ok] if 0 <= g < MAX_REFILL_S]
    if not gaps:
        return Fit("refill latency", {"refill_latency_s": 0.0}, 0, float("nan"), 0.0, 0.0,
                   "no load followed by a step")  # fmt: skip
    arr = np.asarray(gaps)
    med = float(np.median(arr))
    r2, rel_med, p90 = quality(arr, np.full(len(arr), med))
    return Fit("refill latency", {"refill_latency_s": med}, len(arr), r2, rel_med, p90,
               f"median {med * 1e3:.0f} ms from load to first step")  # fmt: skip
