"""Publishing from trainer ranks on two emulated machines (issue 28, item 2): the rank on the
other machine sends its rows to rank 0 over the trainer's process group (gloo here, NCCL on
GPUs), not through Ray's object store, and the version file rank 0 writes is byte-identical to
``safetensors`` of the whole model."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # two Ray nodes, two gloo ranks (~1 min)


def test_a_rank_on_another_machine_sends_its_rows_to_rank_0(tmp_path):
    import ray
    from ray.util.placement_group import placement_group
    from safetensors.torch import save

    from laminar.config import load_config
    from laminar.runtime.cluster.emulate import EmulatedCluster
    from laminar.runtime.cluster.nodes import NodePath
    from laminar.runtime.models import tinymodel
    from laminar.runtime.train.group import RankGroup
    from laminar.runtime.train.local import empty_version_file

    cfg = load_config(
        preset="tiny-cpu",
        overrides=["runtime.trainer_ranks=2", "runtime.warmup.steps=0", "runtime.trainer_cpus=''",
                   "runtime.cpu_binds=[]"],
    )  # fmt: skip
    with EmulatedCluster(machines=2, gpus_per_machine=0, cpus_per_machine=2) as emu:
        emu.connect()
        try:
            pg = placement_group([{"CPU": 0.01}] * 2, strategy="STRICT_SPREAD")
            ray.get(pg.ready(), timeout=120)
            group = RankGroup(cfg, NodePath("publish-test", "scratch", "w"), pg)
            assert len(set(group.nodes)) == 2 and group.remote == [1]
            group.all("build")
            group.all("prepare", False)
            lead = group.lead
            path = ray.get(lead.__ray_call__.remote(empty_version_file))
            group.export(path)
            got = ray.get(lead.__ray_call__.remote(lambda self: Path(path).read_bytes()))
            group.kill()
        finally:
            ray.shutdown()
    rt = cfg.runtime
    kw = tinymodel.llama_config(
        layers=rt.model.layers, hidden=rt.model.hidden,
        max_positions=cfg.workload.max_prompt_len + cfg.workload.max_response_len,
    )  # fmt: skip
    model = tinymodel.build_model(kw, cfg.seed)  # what the ranks built, whole
    assert got == save(model.state_dict(), metadata={"format": "pt"})
