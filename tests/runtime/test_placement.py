"""CPU placement: disaggregated in laminar mode, colocated in sync mode, same cores."""

from __future__ import annotations

import pytest

from laminar.config.runtime import RuntimeConfig
from laminar.runtime.placement import cpu_text, parse_cpus, place


def test_parse_and_print_cpu_lists():
    assert parse_cpus("0-2,5") == [0, 1, 2, 5] and parse_cpus("") == []
    assert cpu_text([0, 1, 2, 5]) == "0,1,2,5"
    with pytest.raises(ValueError, match="bad CPU"):
        parse_cpus("3-1")


def test_laminar_keeps_trainer_and_rollouts_apart():
    rt = RuntimeConfig(mode="laminar", rollouts=2, cpu_binds=["1"], trainer_cpus="0")
    p = place(rt)
    assert p.rollout_cpus == ((1,), (1,)) and p.trainer_cpus == (0,)
    assert p.trainer_threads(7) == 1


def test_sync_shares_every_core_between_phases():
    rt = RuntimeConfig(mode="sync", rollouts=2, cpu_binds=["1"], trainer_cpus="0")
    p = place(rt)
    assert p.rollout_cpus == ((0,), (1,)) and p.trainer_cpus == (0, 1)
    assert p.trainer_threads(1) == 2


def test_nothing_pinned_on_gpu_or_without_lists():
    assert place(RuntimeConfig(device="cuda", rollouts=3)).rollout_cpus == ((), (), ())
    p = place(RuntimeConfig(cpu_binds=[], trainer_cpus="", trainer_threads=3))
    assert p.trainer_cpus == () and p.trainer_threads(3) == 3
