"""``--fault KIND@WHEN`` parsing, the seeded chaos plan, and what a resumed run re-places."""

from __future__ import annotations

import pytest

from laminar.cli import main
from laminar.config.runtime_faults import KINDS, FaultSpec, chaos_plan, parse_fault
from laminar.runtime.records import PromptGroup, Traj
from laminar.runtime.run.resume import ResumeState, orphans_to_resume


@pytest.mark.parametrize(
    ("text", "spec"),
    [
        ("kill-rollout@5", FaultSpec("kill-rollout", step=5)),
        ("kill-machine@90s", FaultSpec("kill-machine", at_s=90.0)),
        ("kill-engine:r1@0", FaultSpec("kill-engine", step=0, target="r1")),
        ("kill-relay@2.5s", FaultSpec("kill-relay", at_s=2.5)),
    ],
)
def test_fault_specs_parse(text, spec):
    assert parse_fault(text) == spec
    assert parse_fault(spec.text()) == spec  # round trip


@pytest.mark.parametrize(
    "bad", ["kill-foo@3", "kill-rollout", "kill-rollout@", "kill-rollout@1.5", "kill-relay@40"]
)
def test_bad_fault_spec_exits_2_and_writes_nothing(bad, tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["train", "--steps", "40", "--fault", bad, "--out", str(out), "--no-progress"]
    assert main(argv) == 2
    assert "--fault" in capsys.readouterr().err
    assert not out.exists()


def test_chaos_plan_is_seeded_and_covers_every_kind():
    plan = chaos_plan(7, steps=8)
    assert plan == chaos_plan(7, steps=8) and plan != chaos_plan(8, steps=8)
    specs = [parse_fault(t) for t in plan]
    assert sorted(s.kind for s in specs) == sorted(KINDS)
    assert all(1 <= s.step <= 6 for s in specs)


def test_resume_places_pending_trajectories_and_restarts_unaccounted_samples():
    def traj(pid, i):
        return Traj(f"p{pid}-s{i}", pid, i, (1, 2), 3, 8, tokens=[5])

    state = ResumeState(
        step=2,
        trainer_checkpoint="",
        pools={
            "prompts": {"issued": 2, "consumed_steps": 3},
            # p0-s0 finished; p0-s1 finished too but was still in the partial pool (the copy
            # from before its removal); p1-s0 in progress; p1-s1 held by neither
            "buffer": {"rows": [{"traj": traj(0, 0)}, {"traj": traj(0, 1)}]},
            "partial": [traj(0, 1), traj(1, 0)],
        },
        meta={},
    )

    def group_of(pid):
        return PromptGroup(pid, (1, 2), 2)

    out = {t.traj_id: t for t in orphans_to_resume(state, group_of, n=2, max_tokens=8)}
    assert set(out) == {"p1-s0", "p1-s1"}
    assert out["p1-s0"].tokens == [5] and out["p1-s0"].version == 3  # continues
    assert out["p1-s1"].tokens == [] and out["p1-s1"].version == -1  # restarts from the prompt
