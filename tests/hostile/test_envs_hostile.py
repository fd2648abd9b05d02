"""A user's environment module, hostile at start (issue 32's "others you think of"): one that
hangs, exits, kills itself or raises KeyboardInterrupt while importing or building is refused
naming ``runtime.task.entry`` (exit 2, nothing written), never hangs or ends ``laminar train``."""

from __future__ import annotations

import textwrap

import pytest

import laminar.runtime.envs.probe as probe
from laminar.cli import main
from laminar.config.runtime import JsonlTask, PythonTask
from laminar.errors import ConfigError

GOOD = """
class E:
    def prompt(self, i): return {"id": i, "prompt": "1+1"}
    def reward(self, s, m): return 1.0
def make(args, seed): return E()
"""

MODULES = {
    "import_hangs": ("import time\ntime.sleep(600)\n" + GOOD, "importing the module did not end"),
    "factory_hangs": (GOOD + "def slow(a, s):\n    import time; time.sleep(600)\n",
                      "calling the factory did not end"),
    "import_exits": ("import os\nos._exit(0)\n", "ended with exit code 0 while importing"),
    "import_kills": ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
                     "killed by SIGKILL while importing"),
    "factory_exits": (GOOD + "def quit(a, s):\n    raise SystemExit(3)\n", "factory failed"),
    "import_interrupts": ("raise KeyboardInterrupt\n", "KeyboardInterrupt (raised while importing"),
    "forks_a_sleeper": ("import subprocess, sys, time\n"
                        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
                        "time.sleep(600)\n", "did not end"),
}  # fmt: skip
FACTORY = {"factory_hangs": "slow", "factory_exits": "quit"}


@pytest.fixture
def modules(tmp_path, monkeypatch):
    monkeypatch.setattr(probe, "START_BOUND_S", 3.0)
    for name, (text, _) in MODULES.items():
        (tmp_path / f"lam_hostile_{name}.py").write_text(textwrap.dedent(text))
    (tmp_path / "lam_hostile_good.py").write_text(GOOD)
    return tmp_path


@pytest.mark.parametrize("name", sorted(MODULES))
def test_a_module_that_hangs_exits_or_dies_is_refused_by_name(modules, name):
    cfg = PythonTask(entry=f"lam_hostile_{name}:{FACTORY.get(name, 'make')}",
                     module_dir=str(modules), timeout_s=1.0)  # fmt: skip
    with pytest.raises(ConfigError, match=r"runtime\.task\.entry") as e:
        probe.check_in_child(cfg, 0, "entry", cfg.timeout_s)
    assert MODULES[name][1] in str(e.value) and f"lam_hostile_{name}" in str(e.value)


def test_a_good_module_passes_and_the_reward_key_is_checked_too(modules):
    probe.check_in_child(PythonTask(entry="lam_hostile_good:make", module_dir=str(modules)), 0)
    (modules / "q.jsonl").write_text('{"prompt": "1+1=", "answer": 2}\n')
    task = JsonlTask(path=str(modules / "q.jsonl"), reward="lam_hostile_good:make",
                     module_dir=str(modules))  # fmt: skip
    probe.check_in_child(task, 0, "reward", task.reward_timeout_s)
    task = JsonlTask(path=str(modules / "q.jsonl"), reward="lam_hostile_import_exits:f",
                     module_dir=str(modules))  # fmt: skip
    with pytest.raises(ConfigError, match=r"runtime.task.reward: .*exit code 0"):
        probe.check_in_child(task, 0, "reward", task.reward_timeout_s)


def test_train_refuses_a_module_that_exits_at_import_and_writes_nothing(modules, capsys):
    config = modules / "task.yaml"
    config.write_text("runtime:\n  task: {type: python, entry: 'lam_hostile_import_exits:make'}\n")
    out = modules / "run"
    assert main(["train", str(config), "--out", str(out), "--address", "127.0.0.1:1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("laminar: error: runtime.task.entry") and err.count("\n") == 1, err
    assert not out.exists()


def test_a_class_for_an_environment_and_a_missing_module_dir_are_refused(modules, monkeypatch):
    (modules / "lam_hostile_cls.py").write_text(GOOD.replace("return E()", "return E"))
    with pytest.raises(ConfigError, match=r"returned the class E, not an environment"):
        probe.check_in_child(PythonTask(entry="lam_hostile_cls:make", module_dir=str(modules)), 0)
    monkeypatch.chdir(modules)  # the module is in the working directory, which is not looked in
    with pytest.raises(ConfigError, match=r"runtime\.task\.module_dir: 'nowhere' is not a dir"):
        probe.check_in_child(PythonTask(entry="lam_hostile_good:make", module_dir="nowhere"), 0)
