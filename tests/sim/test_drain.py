"""A drain planned ahead (``laminar.sim.replica_drain``) gives the tables of one segment at a time.

Each config runs twice, with ``Replica.plan_drains`` on and off, and every table must match bit
for bit: the chain is carried out lazily (repack checks, syncs before moves, faults, rounds
dealt out to busy replicas, split groups), so any read that missed a catch-up shows here.
"""

from __future__ import annotations

import pandas as pd
import pytest

from laminar.config import load_config
from laminar.sim import simulate
from laminar.sim.replica import Replica

from .conftest import small_config, write_cost_file

# 32 GPUs (24 rollout replicas): enough replicas for repack moves and split groups.
MID = ["cluster.gpus=32", "workload.prompts_per_step=12", "workload.steps=6",
       "sim.warmup_steps=2", "sim.replica_series=false", "repack.interval_s=2.0"]  # fmt: skip
FAULT = {
    "rollout_machine": "{type: rollout_machine, at_s: 12.0, machine: 1, recover_s: 20.0}",
    "trainer": "{type: trainer, at_s: 12.0, recover_s: 20.0}",
}
CASES = {
    **{s: [f"sim.systems=[{s}]"] for s in ("laminar", "verl", "one-step", "stream", "partial")},
    **{f"laminar, {k} fault": [f"faults.events=[{v}]"] for k, v in FAULT.items()},
    "verl, rollout_machine fault": [
        "sim.systems=[verl]",
        f"faults.events=[{FAULT['rollout_machine']}]",
    ],
    "laminar, KV-bound": None,  # preemptions end chains early (a tight cost file, below)
}


STEP = Replica.step


def _run(config, monkeypatch, drains: bool, counter: list[int]):
    monkeypatch.setattr(Replica, "plan_drains", drains)

    def counted(self, now, woken):
        counter[0] += 1
        return STEP(self, now, woken)

    monkeypatch.setattr(Replica, "step", counted)
    return simulate(config)


@pytest.mark.parametrize("name", list(CASES))
def test_planned_drains_give_the_same_tables(name, monkeypatch, tmp_path):
    if CASES[name] is None:  # replicas holding ~6 trajectories' KV: preemption and repack
        path = write_cost_file(tmp_path / "tight.json", kv_capacity_tokens=6000)
        tight = [f"sim.cost_file={path}", "sim.max_batch=8", "sim.rollout_batch_prompts=3"]
        config = small_config(*tight, "sim.replica_series=false")
        steps = config.workload.steps
    else:
        config = load_config(preset="paper-math-7b", overrides=[*MID, *CASES[name]])
        steps = 6
    on, off = [0], [0]
    planned = _run(config, monkeypatch, True, on)
    stepped = _run(config, monkeypatch, False, off)
    for table in ("summary", "steps", "trajectories", "faults"):
        pd.testing.assert_frame_equal(
            getattr(planned, table), getattr(stepped, table), check_exact=True, obj=table
        )
    assert planned.summary.iloc[0]["steps"] == steps  # the run finished (no lost group)
    if name == "laminar, KV-bound":
        assert planned.summary.iloc[0]["preemptions"] > 0
    assert on[0] < off[0]  # and the decoder really stepped replicas less often
