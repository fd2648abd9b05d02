"""The trainer's publish stall when its ranks span machines (issue 28, item 2): the rank on the
other machine sends its rows to rank 0 over the process group (``train.export.send_rows``, the
runtime's path) against the object-store path it replaced (each bucket ``ray.put`` on the
sender's machine and fetched by rank 0 one at a time), side by side in one run.

    PYTHONPATH=. python benchmarks/bench_publish_machines.py [--hidden 256 512 1024]
                                                             [--layers 8] [--repeats 3]

Two emulated machines (``laminar.runtime.cluster.emulate``: Ray nodes on this host, 100 MiB of
object store each, as the emulation gives them), one trainer rank on each (STRICT_SPREAD), a
tiny Llama of the given shape in fp32, no training step (the stall does not depend on the
weights' values). The stall is ``RankGroup.export`` wall time: what the trainer waits before
a version is committed. Prints a Markdown table for ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import statistics
import time

BUCKET_BYTES = 256 << 20  # the replaced path's bucket size


def _put_buckets(rank) -> list:
    """The replaced path, sender side: this rank's rows as ``ray.put`` buckets."""
    import ray

    from laminar.runtime.train.export import shard_rows

    refs, bucket, size = [], [], 0
    for at, data in shard_rows(rank.model, rank.layout(), dtype=rank.export_dtype, lead=False):
        bucket.append((at, data.tobytes()))
        size += data.nbytes
        if size >= BUCKET_BYTES:
            refs.append(ray.put(bucket))
            bucket, size = [], 0
    if bucket:
        refs.append(ray.put(bucket))
    return refs


def _write_fetched(path: str, refs: list):
    """The replaced path, rank 0's side: fetch each bucket and write it."""

    def run(rank) -> int:
        import ray

        from laminar.runtime.train.export import write_pieces

        return sum(write_pieces(path, rank.layout().nbytes, ray.get(r)) for r in refs)

    return run


def object_store_export(group, path: str) -> None:
    import ray

    pending = [group.ranks[r].__ray_call__.remote(_put_buckets) for r in group.remote]
    local = group.lead.export.remote(path)
    for refs in pending:
        ray.get(group.lead.__ray_call__.remote(_write_fetched(path, ray.get(refs))))
    ray.get(local)


def measure(hidden: int, layers: int, repeats: int) -> dict:
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group

    from laminar.config import load_config
    from laminar.runtime.cluster.nodes import NodePath
    from laminar.runtime.train.group import RankGroup
    from laminar.runtime.train.local import empty_version_file

    cfg = load_config(
        preset="tiny-cpu",
        overrides=["runtime.trainer_ranks=2", "runtime.warmup.steps=0", "runtime.trainer_cpus=''",
                   "runtime.cpu_binds=[]", f"runtime.model.hidden={hidden}",
                   f"runtime.model.layers={layers}"],
    )  # fmt: skip
    pg = placement_group([{"CPU": 0.01}] * 2, strategy="STRICT_SPREAD")
    ray.get(pg.ready(), timeout=120)
    group = RankGroup(cfg, NodePath(f"bench-publish-{hidden}", "scratch", "w"), pg)
    assert group.remote == [1], "the two ranks did not land on two machines"
    group.all("build")
    group.all("prepare", False)
    path = ray.get(group.lead.__ray_call__.remote(empty_version_file))
    nbytes = ray.get(group.lead.__ray_call__.remote(lambda self: self.layout().nbytes))
    times: dict[str, list[float]] = {"process group": [], "object store": []}
    for _ in range(repeats):  # interleaved: a burst of load hits both alike
        for name, export in (("process group", group.export), ("object store", None)):
            t = time.perf_counter()
            if export is None:
                object_store_export(group, path)
            else:
                export(path)
            times[name].append(time.perf_counter() - t)
    group.kill()
    remove_placement_group(pg)
    return {"hidden": hidden, "layers": layers, "mib": nbytes / 2**20,
            **{k: statistics.median(v) for k, v in times.items()}}  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hidden", type=int, nargs="+", default=[256, 512, 1024])
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()
    import os

    import ray

    from laminar.runtime.cluster.emulate import EmulatedCluster

    rows = []
    with EmulatedCluster(machines=2, gpus_per_machine=0, cpus_per_machine=2) as emu:
        emu.connect()
        try:
            for h in a.hidden:
                rows.append(measure(h, a.layers, a.repeats))
                r = rows[-1]
                print(f"hidden {h}: {r['mib']:.0f} MiB, process group {r['process group']:.2f} s,"
                      f" object store {r['object store']:.2f} s", flush=True)  # fmt: skip
        finally:
            ray.shutdown()
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}; medians of {a.repeats}\n")
    print("| model (fp32 file) | stall, process group | stall, object store | object store / "
          "process group | process group MiB/s |")  # fmt: skip
    print("|---|---|---|---|---|")
    for r in rows:
        pg, st = r["process group"], r["object store"]
        print(f"| hidden {r['hidden']} × {r['layers']} layers ({r['mib']:.0f} MiB) | {pg:.2f} s "
              f"| {st:.2f} s | {st / pg:.2f}× | {r['mib'] / pg:.0f} |")  # fmt: skip


if __name__ == "__main__":
    main()
