"""The trainer's ranks on Ray: one placement group (one bundle per device), the rank actors in
it, the process group they join, and calls fanned out to all of them."""

from __future__ import annotations

from typing import Any

from laminar.config import LaminarConfig
from laminar.runtime.train.ranks import TrainerRank


def placement_group_for(cfg: LaminarConfig) -> Any:
    """A ready placement group of ``runtime.trainer_ranks`` bundles: ``gpu_share`` of a GPU each
    on cuda; on CPU a token CPU share (cores are pinned by ``placement``, not reserved through
    Ray). PACK:
    ranks share machines when they fit, span machines when they must."""
    import ray
    from ray.util.placement_group import placement_group

    rt = cfg.runtime
    bundle = {"GPU": rt.gpu_share} if rt.device == "cuda" else {"CPU": 0.01}
    pg = placement_group([dict(bundle) for _ in range(rt.trainer_ranks)], strategy="PACK")
    ray.get(pg.ready(), timeout=600)
    return pg


def in_bundle(pg: Any, index: int) -> dict:
    """Ray options that put an actor in bundle ``index`` of ``pg``."""
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    return {
        "scheduling_strategy": PlacementGroupSchedulingStrategy(
            placement_group=pg, placement_group_bundle_index=index
        )
    }


def rank_cpus(cores: tuple[int, ...], rank: int, world: int) -> tuple[int, ...]:
    """The trainer's cores split over its ranks (all of them when there are fewer than ranks)."""
    if len(cores) < world:
        return cores
    return tuple(cores[rank::world])


class RankGroup:
    """The rank actors of one trainer, joined in one torch.distributed group."""

    def __init__(self, cfg: LaminarConfig, work_dir: Any, pg: Any):
        import ray

        rt = cfg.runtime
        self.world = rt.trainer_ranks
        data = cfg.model_dump(mode="json")
        self.ranks = []
        for r in range(self.world):
            opts: dict[str, Any] = {"num_cpus": 0, **in_bundle(pg, r)}
            if rt.device == "cuda":
                opts["num_gpus"] = rt.gpu_share
            actor = ray.remote(TrainerRank).options(**opts)
            self.ranks.append(actor.remote(data, work_dir, r, self.world))
        init = ray.get(self.ranks[0].rendezvous.remote())
        where = rt.placement()
        self.all(
            "join",
            init,
            per_rank=lambda r: (rank_cpus(where.trainer_cpus, r, self.world),),
            threads=where.trainer_threads(rt.trainer_threads),
        )
        nodes = ray.get([r.__ray_call__.remote(lambda self: _node()) for r in self.ranks])
        self.nodes: list[str] = nodes  # each rank's machine (Ray node id), by rank
        # ranks on rank 0's machine write the version file directly; the others send their
        # rows to rank 0 over the process group
        self.remote = [r for r, n in enumerate(nodes) if n != nodes[0]]

    @property
    def lead(self) -> Any:
        return self.ranks[0]

    def all(self, method: str, *args: Any, per_rank: Any = None, **kwargs: Any) -> list:
        """Call ``method`` on every rank at once (collectives need them all); wait for all."""
        import ray

        refs = []
        for r, handle in enumerate(self.ranks):
            extra = per_rank(r) if per_rank else ()
            refs.append(getattr(handle, method).remote(*args, *extra, **kwargs))
        return ray.get(refs)

    def export(self, path: str) -> None:
        """Every rank's rows into the version file at ``path`` on rank 0's machine: written
        in place by the ranks there, sent over the process group by the others (rank 0
        receives them: ``train.export.send_rows``, no object store on the way)."""
        refs = [self.ranks[r].send_export.remote() for r in self.remote]
        refs += [h.export.remote(path) for r, h in enumerate(self.ranks[1:], 1)
                 if r not in self.remote]  # fmt: skip
        refs.append(self.lead.export_and_receive.remote(path, self.remote))
        wait_all(refs)

    def kill(self) -> None:
        import ray

        for handle in self.ranks:
            ray.kill(handle)


def _node() -> str:
    import ray

    return ray.get_runtime_context().get_node_id()


def wait_all(refs: list) -> list:
    """``ray.get`` of ``refs`` that raises the first failure as it happens (a rank that died
    mid-transfer leaves its peer blocked in a receive: waiting for every result would hang)."""
    import ray

    pending, out = list(refs), {}
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        out[done[0]] = ray.get(done[0])
    return [out[r] for r in refs]
