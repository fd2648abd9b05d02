"""``runtime.storage`` (issue 28, item 1): the shared path's probe names the machine that cannot
see it, what travels through Ray arrives byte for byte in bounded chunks, checkpoints are pruned
to ``runtime.keep_checkpoints``, and an emulated machine's processes cannot touch another's
files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from laminar.config import load_config
from laminar.errors import ConfigError, LaminarError
from laminar.runtime.cluster import fsguard
from laminar.runtime.run import storage
from laminar.runtime.run.ckptfiles import trainer_state
from laminar.runtime.run.storage import Storage, StorageError, check_shared, prune_steps


class Remote:
    """``submit``/``get`` that run the call where the "machine" is (this process, with the
    machine's own working root), counting chunk sizes and calls in flight."""

    def __init__(self) -> None:
        self.pending = 0
        self.most_pending = 0
        self.sizes: list[int] = []

    def submit(self, fn, *args):
        self.pending += 1
        self.most_pending = max(self.most_pending, self.pending)
        if fn is storage.read_chunk:
            assert args[3] <= self.chunk
        return (fn, args)

    def get(self, handle):
        fn, args = handle
        self.pending -= 1
        out = fn(*args)
        if fn is storage.read_chunk:
            self.sizes.append(len(out))
        if fn is storage.write_chunk:
            self.sizes.append(len(args[3]))
        return out


def _tree(root: Path, chunk: int) -> dict[str, bytes]:
    files = {
        "empty": b"",
        "one": b"x",
        ".metadata": os.urandom(chunk - 1),
        "v0000000003/__0_0.distcp": os.urandom(chunk),
        "v0000000003/__1_0.distcp": os.urandom(3 * chunk + chunk // 2),
        "v0000000003/deep/er/file": os.urandom(chunk + 1),
    }
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return files


@pytest.mark.parametrize("window", [1, 3])
def test_pull_and_push_reassemble_every_file_byte_for_byte_in_bounded_chunks(tmp_path, window):
    chunk = 4096
    src = tmp_path / "machine" / "ckpt"
    files = _tree(src, chunk)
    remote = Remote()
    remote.chunk = chunk
    got = storage.pull_tree(
        remote.submit, remote.get, str(src), tmp_path / "driver", chunk_bytes=chunk, window=window
    )
    assert got == {rel: len(data) for rel, data in files.items()}
    for rel, data in files.items():
        assert (tmp_path / "driver" / rel).read_bytes() == data, rel
    assert max(remote.sizes) == chunk and remote.most_pending <= window
    assert sum(remote.sizes) == sum(len(d) for d in files.values())

    remote = Remote()
    remote.chunk = chunk
    back = tmp_path / "machine2" / "in"
    storage.push_tree(
        remote.submit, remote.get, tmp_path / "driver", str(back), chunk_bytes=chunk, window=window
    )
    for rel, data in files.items():
        assert (back / rel).read_bytes() == data, rel
    assert max(remote.sizes) == chunk and remote.most_pending <= window


def test_pull_refuses_the_same_file_from_two_machines_and_paths_out_of_the_tree(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        d.mkdir()
        (d / "same").write_bytes(b"1")
    remote = Remote()
    remote.chunk = storage.CHUNK_BYTES
    taken: set[str] = set()
    storage.pull_tree(remote.submit, remote.get, str(a), tmp_path / "d", taken=taken)
    with pytest.raises(StorageError, match="same is on two"):
        storage.pull_tree(remote.submit, remote.get, str(b), tmp_path / "d", taken=taken)
    with pytest.raises(StorageError, match="not a path inside"):
        storage.write_chunk(str(tmp_path / "d"), "../escape", 0, b"x")


def test_probe_names_the_machine_that_cannot_see_the_shared_path(tmp_path):
    shared = tmp_path / "shared"
    elsewhere = tmp_path / "m2-own-disk"  # what m2 sees at that path: another filesystem

    def submit_on(node):
        def submit(fn, directory, name, text):
            if node == "m2":
                directory = str(elsewhere / Path(directory).name)
            if node == "m3":
                return "PermissionError: [Errno 13] Permission denied"
            return fn(directory, name, text)

        return submit, lambda x: x

    def describe(node):
        return f"machine {node}-name"

    check_shared(shared, ["m0", "m1"], submit_on, describe)  # both see it
    assert not any(shared.iterdir())  # the probe files are gone
    with pytest.raises(StorageError, match=r"machine m2-name does not see .*shared"):
        check_shared(shared, ["m0", "m2", "m1"], submit_on, describe)
    with pytest.raises(StorageError, match=r"machine m3-name cannot write to .*Permission"):
        check_shared(shared, ["m0", "m3"], submit_on, describe)
    assert not any(shared.iterdir())


def test_probe_fails_on_the_drivers_machine_first(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(StorageError, match="the driver's machine cannot create"):
        check_shared(tmp_path / "file" / "sub", ["m0"], lambda n: (None, None), str)


def test_pruning_keeps_the_newest_n(tmp_path):
    for s in (0, 1, 2, 3, 10):
        (tmp_path / f"step-{s:06d}").mkdir()
    (tmp_path / "LATEST").write_text("step-000010\n")
    (tmp_path / ".step-000011.99.tmp").mkdir()
    gone = prune_steps(tmp_path, 2)
    assert [p.name for p in gone] == [f"step-{s:06d}" for s in (0, 1, 2)]
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == [".step-000011.99.tmp", "LATEST", "step-000003", "step-000010"]
    shared = Storage("shared", root=tmp_path / "shared")
    for s in (3, 9, 10):
        (tmp_path / "shared" / f"step-{s:06d}").mkdir(parents=True)
    shared.prune(["step-000003", "step-000010"])
    assert sorted(p.name for p in (tmp_path / "shared").iterdir()) == [
        "step-000003",
        "step-000010",
    ]


def test_a_shared_checkpoint_records_where_its_trainer_state_is(tmp_path):
    d = tmp_path / "step-000004"
    d.mkdir()
    assert trainer_state(d, {"step": 4}) == str(d / "trainer")
    assert trainer_state(d, {"trainer_dir": "/nfs/x/step-000004"}) == "/nfs/x/step-000004"
    with pytest.raises(LaminarError, match="trainer_dir: expected an absolute path"):
        trainer_state(d, {"trainer_dir": "relative"})
    shared = Storage("shared", root=Path("/nfs/run-abc"))
    target = shared.trainer_target(4, d)
    assert target == "/nfs/run-abc/step-000004"
    assert shared.collect(None, target, d) == {"trainer_dir": target}
    assert Storage("local").trainer_target(4, d) == str(d / "trainer")


def test_config_storage_and_keep_checkpoints():
    cfg = load_config(preset="tiny-cpu")
    assert cfg.runtime.storage is None and cfg.runtime.keep_checkpoints == 2
    with pytest.raises(ConfigError, match=r"runtime\.storage.*absolute path"):
        load_config(preset="tiny-cpu", overrides=["runtime.storage=rel/dir"])
    with pytest.raises(ConfigError, match=r"runtime\.keep_checkpoints"):
        load_config(preset="tiny-cpu", overrides=["runtime.keep_checkpoints=0"])
    local = Storage.for_run(cfg, None, None)  # a local Ray: one machine
    assert local.kind == "local"


def test_guard_tells_foreign_paths():
    root = "/tmp/lam-emu-x"
    assert fsguard.foreign(f"{root}/m1/shm/a", root, "m0")
    assert fsguard.foreign(f"{root}/driver/run/checkpoints", root, "m0")
    assert fsguard.foreign(Path(f"{root}/m0/../m1/tmp"), root, "m0")
    assert not fsguard.foreign(f"{root}/m0/tmp/x", root, "m0")
    assert not fsguard.foreign(f"{root}/ray/session/logs", root, "m0")
    assert not fsguard.foreign("/tmp/elsewhere", root, "m0")
    assert not fsguard.foreign(root, root, "m0") and not fsguard.foreign(3, root, "m0")


def test_guarded_process_cannot_touch_another_machines_files(tmp_path):
    (tmp_path / "m1").mkdir()
    (tmp_path / "m1" / "f").write_text("m1's")
    (tmp_path / "m0").mkdir()
    code = (
        "import json, os, shutil, sys\n"
        "from laminar.runtime.cluster import fsguard\n"
        "assert fsguard.install_from_env()\n"
        "out = {}\n"
        f"root = {str(tmp_path)!r}\n"
        "for name, call in [('read', lambda: open(root + '/m1/f').read()),\n"
        "                   ('list', lambda: os.listdir(root + '/m1')),\n"
        "                   ('mkdir', lambda: os.mkdir(root + '/driver')),\n"
        "                   ('rename', lambda: os.rename(root + '/m0/a', root + '/m1/a')),\n"
        "                   ('rmtree', lambda: shutil.rmtree(root + '/m1')),\n"
        "                   ('own', lambda: open(root + '/m0/a', 'w').write('x'))]:\n"
        "    try:\n"
        "        call(); out[name] = 'ok'\n"
        "    except PermissionError as e:\n"
        "        out[name] = str(e)\n"
        "print(json.dumps(out))\n"
    )
    env = {**os.environ, fsguard.ROOT_ENV: str(tmp_path), fsguard.MACHINE_ENV: "m0"}
    out = json.loads(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                                    text=True, check=True).stdout)  # fmt: skip
    assert out["own"] == "ok"
    for name in ("read", "list", "mkdir", "rename", "rmtree"):
        assert out[name].startswith("emulated machine m0: ") and "another machine" in out[name]
    assert (tmp_path / "m1" / "f").read_text() == "m1's"


def _on_machine(rank: int, machines: str) -> None:
    """This rank process is "machine" m<rank>: its NodePaths resolve under its own root."""
    os.environ["LAMINAR_SCRATCH_ROOT"] = f"{machines}/m{rank}"


def _save_per_machine(rank, world, init, cfg, work, machines, stage):
    import torch

    from laminar.runtime.train.ranks import TrainerRank
    from tests.runtime.test_trainer import _full

    _on_machine(rank, machines)
    r = TrainerRank(cfg, work, rank, world)
    r.join(init)
    r.build()
    r.prepare()
    with torch.no_grad():
        for p in r.model.parameters():
            p.add_(0.01)
    r.save_checkpoint(stage, 5)
    return _full(r.model)


def _load_per_machine(rank, world, init, cfg, work, machines, stage):
    from laminar.runtime.train.ranks import TrainerRank
    from tests.runtime.test_trainer import _full

    _on_machine(rank, machines)
    r = TrainerRank(cfg, work, rank, world)
    r.join(init)
    r.build()
    r.prepare()
    return r.load_checkpoint(stage), _full(r.model)


@pytest.mark.slow  # spawns torch.distributed processes (~30 s)
def test_shards_saved_on_two_machines_travel_to_the_driver_and_back_to_a_restarted_trainer(
    tmp_path,
):
    """Each rank writes its shards on its own machine (no shared directory), the driver pulls
    both machines' files into one checkpoint, pushes it to the machine of a 1-rank trainer,
    which restores the same weights (resharded 2 -> 1)."""
    import numpy as np

    from laminar.runtime.cluster.nodes import NodePath
    from tests.runtime.test_trainer import _cfg
    from tests.train.dist import run_ranks

    cfg = _cfg(tmp_path)
    cfg["runtime"]["warmup"]["steps"] = 0  # the weights need not be good, only restored
    machines = tmp_path / "machines"
    stage = NodePath("run", "scratch", "storage/out-000001")
    saved = run_ranks(2, _save_per_machine, cfg, str(tmp_path / "w"), str(machines), stage)
    for rank in (0, 1):  # each machine holds only its own rank's shards
        mine = {rel for rel, _ in storage.list_files(str(machines / f"m{rank}" / "laminar-run"))}
        assert any(f"__{rank}_0.distcp" in rel for rel in mine), mine
        assert not any(f"__{1 - rank}_0.distcp" in rel for rel in mine), mine
    remote = Remote()
    remote.chunk = 1024
    driver = tmp_path / "driver" / "trainer"
    taken: set[str] = set()
    for rank in (0, 1):
        src = str(machines / f"m{rank}" / "laminar-run" / "storage" / "out-000001")
        storage.pull_tree(remote.submit, remote.get, src, driver, chunk_bytes=1024, taken=taken)
    again = str(tmp_path / "new-machines" / "m0" / "laminar-run" / "storage" / "in")
    storage.push_tree(remote.submit, remote.get, driver, again, chunk_bytes=1024)
    (version, restored), = run_ranks(
        1, _load_per_machine, cfg, str(tmp_path / "w2"), str(tmp_path / "new-machines"),
        NodePath("run", "scratch", "storage/in"),
    )  # fmt: skip
    assert version == 5
    for k, v in saved[0].items():
        np.testing.assert_array_equal(restored[k], v)


class _Call:
    def __init__(self, fn):
        self.remote = fn


class FakeTrainer:
    """The trainer actor's face as the driver calls it (plain values for Ray's references)."""

    def __init__(self):
        self.save_model = _Call(self._save)
        self.saved_to: list = []

    def _save(self, out):
        self.saved_to.append(out)
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "model.safetensors").write_bytes(b"weights")
        (out / "config.json").write_text("{}")
        return str(out)


def test_a_shared_paths_final_model_is_moved_into_the_run_directory(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "model").mkdir()
    (run / "model" / "stale").write_text("an earlier model")  # replaced whole
    shared = Storage("shared", root=tmp_path / "nfs" / "run-abc")
    trainer = FakeTrainer()
    shared.save_model(trainer, str(run / "model"))
    assert trainer.saved_to == [str(tmp_path / "nfs" / "run-abc" / "model")]
    assert sorted(p.name for p in (run / "model").iterdir()) == ["config.json", "model.safetensors"]
    assert not (tmp_path / "nfs" / "run-abc" / "model").exists()
    assert not [p for p in run.iterdir() if p.name.startswith(".")]
    local = FakeTrainer()
    Storage("local").save_model(local, str(run / "model2"))  # the trainer writes it itself
    assert local.saved_to == [str(run / "model2")]
