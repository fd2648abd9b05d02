"""User errors survive being rebuilt from their args (SimPy's re-raise, pickling)."""

import pickle

import pytest
import simpy

from laminar.errors import ConfigError, TraceError


@pytest.mark.parametrize("err", [ConfigError("cfg.yaml", "sim.x", "must be > 0"),
                                 ConfigError("cfg.yaml", "", "empty"),
                                 TraceError("t.parquet", "bad", row=3, column="len"),
                                 TraceError("t.parquet", "bad")])  # fmt: skip
def test_rebuilt_from_args_and_pickled_it_is_the_same_error(err):
    for copy in (type(err)(*err.args), pickle.loads(pickle.dumps(err))):
        assert type(copy) is type(err) and str(copy) == str(err)
        assert vars(copy) == vars(err)


def test_a_config_error_inside_a_simpy_process_reaches_the_caller_as_itself():
    env = simpy.Environment()

    def proc(env):
        yield env.timeout(1)
        raise ConfigError("config", "model.name", "not in the catalog")

    env.process(proc(env))
    with pytest.raises(ConfigError, match=r"config: model\.name: not in the catalog"):
        env.run()
