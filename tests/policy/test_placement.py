"""CPU placement: disaggregated in laminar mode, colocated in sync mode, same cores."""

from __future__ import annotations

import pytest

from laminar.config import load_config
from laminar.config.runtime import RuntimeConfig
from laminar.errors import ConfigError
from laminar.policy.placement import cpu_text, parse_cpus, place


def test_parse_and_print_cpu_lists():
    assert parse_cpus("0-2,5") == [0, 1, 2, 5] and parse_cpus("") == []
    assert cpu_text([0, 1, 2, 5]) == "0,1,2,5"
    with pytest.raises(ValueError, match="bad CPU"):
        parse_cpus("3-1")


def test_laminar_keeps_trainer_and_rollouts_apart():
    rt = RuntimeConfig(mode="laminar", rollouts=2, cpu_binds=["1"], trainer_cpus="0")
    p = rt.placement()
    assert p.rollout_cpus == ((1,), (1,)) and p.trainer_cpus == (0,)
    assert p.trainer_threads(7) == 1


def test_sync_shares_every_core_between_phases():
    rt = RuntimeConfig(mode="sync", rollouts=2, cpu_binds=["1"], trainer_cpus="0")
    p = rt.placement()
    assert p.rollout_cpus == ((0,), (1,)) and p.trainer_cpus == (0, 1)
    assert p.trainer_threads(1) == 2


def test_nothing_pinned_on_gpu_or_without_lists():
    assert RuntimeConfig(device="cuda", rollouts=3).placement().rollout_cpus == ((), (), ())
    p = RuntimeConfig(cpu_binds=[], trainer_cpus="", trainer_threads=3).placement()
    assert p.trainer_cpus == () and p.trainer_threads(3) == 3


def test_policy_takes_plain_values():
    p = place(mode="sync", device="cpu", rollouts=3, cpu_binds=["2-3"], trainer_cpus="0")
    assert p.rollout_cpus == ((0,), (2,), (3,)) and p.trainer_cpus == (0, 2, 3)


@pytest.mark.parametrize(
    "setting",
    ["runtime.trainer_cpus=x", "runtime.trainer_cpus=3-1", "runtime.cpu_binds=[0-99999999999]",
     "runtime.cpu_binds=['1', 'a-b']", "runtime.trainer_cpus=-1"],
)
def test_a_bad_cpu_list_is_refused_when_the_config_loads(setting):
    with pytest.raises(ConfigError, match="cpu"):
        load_config(preset="tiny-cpu", overrides=[setting])
