"""Fault injection (paper §3.3, §4.3, §8.5): kill a rollout machine, a relay or the trainer.

``faults.events`` in the config lists the faults; one SimPy process fires them at their times.
What a fault does depends on the system's *fault domain* (``System.fault_domain``):

- ``component`` (Laminar, §3.3): only the failed component stops. A dead rollout machine's
  in-progress trajectories keep their tokens (the partial-response pool) and are redirected to
  healthy replicas of the same weight version, which re-prefill them; without such a replica
  they restart from scratch on the least-loaded healthy one (one version per trajectory, §6).
  The relay chain is rebuilt around the dead relay (``laminar.policy.relay.rebuild_chain``,
  §4.3). A dead trainer restarts its step from the last checkpoint while rollouts keep
  generating.
- ``job`` (the baselines): global weight synchronization ties every GPU into one collective
  group, so any fault restarts the whole job from its checkpoint: the trainer redoes its step,
  every rollout is down for the recovery time and regenerates its in-flight trajectories from
  scratch (they have no partial-response pool). A relay fault does nothing: they have no relays.

No trajectory is ever lost: each is generated to completion once it is handed out (restarted
ones regenerate their tokens; the log counts them). ``log`` records every fault as it fires.
"""

from __future__ import annotations

import pandas as pd
import simpy

from laminar.policy.relay import rebuild_chain


class FaultInjector:
    """The fault process of one cluster, and the trainer's outage schedule."""

    def __init__(self, cluster):
        self.env: simpy.Environment = cluster.env
        self.cluster = cluster
        self.cfg = cluster.cfg.faults
        self.events = sorted(self.cfg.events, key=lambda e: e.at_s)
        # Machine indices were checked with the config (laminar.sim.cluster.check_setup).
        # Known in advance, so the trainer's work can be scheduled around them exactly.
        job = cluster.system.fault_domain == "job"
        self.trainer_outages = sorted(
            (e.at_s, e.at_s + e.recover_s)
            for e in self.events
            if e.type == "trainer" or (job and e.type == "rollout_machine")
        )
        self.log: list[dict] = []
        self.env.process(self.run())

    def run(self):
        for e in self.events:
            yield self.env.timeout(max(0.0, e.at_s - self.env.now))
            self.fire(e)

    def fire(self, e) -> None:
        """Carry out one fault now."""
        domain = self.cluster.system.fault_domain
        if e.type == "trainer" and domain == "component":
            self._note(e, "trainer restarts from its checkpoint; rollouts keep generating")
        elif e.type == "relay" and domain == "component":
            self._relay_down(e.machine, e.recover_s)
        elif e.type == "rollout_machine" and domain == "component":
            self._machine_down(e.machine, e.recover_s)
        elif e.type == "relay":
            self._note(e, "no relay in this design: nothing happens")
        else:
            self._job_restart(e)

    # Trainer ----------------------------------------------------------------------------------

    def _up_at(self, t: float) -> float:
        """The first moment at or after ``t`` when the trainer is alive."""
        for start, until in self.trainer_outages:
            if start <= t < until:
                t = until
        return t

    def work_end(self, start_s: float, seconds: float) -> float:
        """When ``seconds`` of trainer work begun at ``start_s`` ends: work cut by an outage is
        redone from the start once the trainer is back (one checkpoint per step)."""
        t = self._up_at(start_s)
        while True:
            end = t + seconds
            died = next((s for s, _ in self.trainer_outages if t < s < end), None)
            if died is None:
                return end
            t = self._up_at(died)

    def trainer_work(self, seconds: float):
        """A process body: ``seconds`` of training, through trainer outages (``work_end``)."""
        yield self.env.timeout(self.work_end(self.env.now, seconds) - self.env.now)

    # Rollout machines ---------------------------------------------------------------------------

    def _replicas_on(self, machine_index: int) -> list:
        machine = self.cluster.split.rollout_machines[machine_index]
        split = self.cluster.split
        return [r for r in self.cluster.replicas if machine in split.machines_of(r.machine)]

    def _machine_down(self, machine_index: int, recover_s: float) -> None:
        """§3.3: the machine's replicas stop; their work goes to healthy replicas."""
        now = self.env.now
        dead = self._replicas_on(machine_index)
        alive = [r for r in self.cluster.replicas if r.down_until <= now and r not in dead]
        trajs = []
        for r in dead:
            r.down_until = now + recover_s
            mine = r.detach_all()
            if not alive:  # no healthy replica: they wait, tokens kept, for the recovery
                r.busy_until = max(r.busy_until, r.down_until)
                r.waiting.extend(mine)
            trajs += mine
            r.wake()
        kept, restarted = self._redirect(trajs, alive) if alive else (len(trajs), 0)
        self._relay_down(machine_index, recover_s, quiet=True)
        self._note(
            "rollout_machine",
            f"{len(dead)} replicas down for {recover_s:g} s; {kept} trajectories redirected "
            f"with their tokens, {restarted} restarted",
            machine=machine_index,
            replicas=len(dead),
            redirected=kept,
            restarted=restarted,
        )

    def _redirect(self, trajs: list, alive: list) -> tuple[int, int]:
        """Hand ``trajs`` to ``alive`` replicas; returns (kept their tokens, restarted)."""
        kept = restarted = 0
        load = {r.rid: r.kv_now() + sum(t.prompt_len + t.generated for t in r.waiting)
                for r in alive}  # fmt: skip
        for t in sorted(trajs, key=lambda t: t.tid):
            same = [r for r in alive if r.version == t.version]
            pool = same or alive
            dst = min(pool, key=lambda r: (load[r.rid], r.index))
            if same:
                kept += 1
            else:
                restarted += 1
                t.generated = 0
                t.version = dst.version
                t.gen_start_s = self.env.now  # its tokens are generated anew from here
            load[dst.rid] += t.prompt_len + t.generated
            dst.attach([t])
        for r in alive:
            r.wake()
        return kept, restarted

    # Relays -------------------------------------------------------------------------------------

    def _relay_down(self, machine_index: int, recover_s: float, *, quiet: bool = False) -> None:
        """§4.3: the chain is rebuilt without the dead relay within ``chain_rebuild_s``."""
        relay = self.cluster.relay
        node = f"relay-{self.cluster.split.rollout_machines[machine_index]}"
        if relay.chain.p == 1:  # the only relay: no chain is left until it is back
            relay.fail(node, None, recover_s, recover_s)
            what = f"the only relay is down for {recover_s:g} s: no new weights meanwhile"
        else:
            chain = rebuild_chain(relay.chain, {node})
            relay.fail(node, chain, self.cfg.chain_rebuild_s, recover_s)
            what = f"chain rebuilt in {self.cfg.chain_rebuild_s:g} s; master {chain.master}"
        if not quiet:
            self._note("relay", what, machine=machine_index)

    # Whole-job restart (global synchronization) --------------------------------------------------

    def _job_restart(self, e) -> None:
        now = self.env.now
        until = now + e.recover_s
        restarted = lost_tokens = 0
        for r in self.cluster.replicas:
            trajs = r.detach_all()
            for t in trajs:
                lost_tokens += t.generated
                t.generated = 0
                t.gen_start_s = until  # generated anew once the job is back
                if t.versions:  # a partial-rollout trajectory starts over on one version
                    t.versions = ()
                    t.version = r.version
            restarted += len(trajs)
            r.down_until = until
            r.busy_until = max(r.busy_until, until)
            r.waiting.extend(trajs)
            r.wake()
        self._note(
            e.type,
            f"global synchronization: the whole job restarts from its checkpoint in "
            f"{e.recover_s:g} s; {restarted} in-flight trajectories regenerate",
            machine=getattr(e, "machine", -1),
            replicas=len(self.cluster.replicas),
            restarted=restarted,
            lost_tokens=lost_tokens,
        )

    def _note(self, kind, what: str, **extra) -> None:
        kind = kind if isinstance(kind, str) else kind.type
        row = {"t_s": self.env.now, "fault": kind, "what": what, "machine": -1}
        row.update(extra)
        self.log.append(row)


FAULT_COLUMNS = ["system", "t_s", "fault", "machine", "what", "replicas", "redirected",
                 "restarted", "lost_tokens"]  # fmt: skip


def faults_frame(cluster) -> pd.DataFrame:
    """The fault log of one run (no rows without faults)."""
    rows = cluster.faults.log if cluster.faults is not None else []
    df = pd.DataFrame(rows, columns=FAULT_COLUMNS[1:])
    df.insert(0, "system", cluster.system.name)
    return df
