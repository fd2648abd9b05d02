"""The driver's supervisor: injects scheduled faults, sees deaths, recovers, times both.

While the trainer runs a step, the driver polls every ``runtime.faults.poll_s`` instead of
blocking, and each poll (:meth:`Supervisor.tick`):

- injects faults whose time has come (``KIND@90s``; ``KIND@5`` goes right after step 5);
- reads the rollout manager's deaths (an actor that stopped answering, an engine that died or
  stalled: ``laminar.runtime.faults.watchdog``), fences the dead actor (killed, so it can
  deliver nothing more) and starts a replacement when ``replace_dead`` and resources allow;
  a replacement joins the job (its machine's weight path, the pools, the manager) once its
  engine is up;
- restarts a relay that stopped answering (``laminar.runtime.faults.relays``).

A trainer that dies at any point makes its step's result raise: what that step took from the
buffer goes back, a new trainer starts from the last checkpoint (rollouts keep generating), and
the step runs again. ``runtime.step_timeout_s`` stays a last resort for a step that never ends.
Every fault gets a record in ``summary.json``'s ``faults``: what, when, detection and recovery
seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from laminar.config import LaminarConfig
from laminar.config.runtime_faults import FaultSpec
from laminar.errors import LaminarError
from laminar.runtime.faults.inject import FaultDeferred, FaultNotApplicable, inject, reap
from laminar.runtime.faults.trainer import restart_trainer

REPLACE_TIMEOUT_S = 300.0  # a replacement whose engine is not up by then is given up
REPLACE_ATTEMPTS = 3  # replacements started for one fault, when they die starting
DEFER_LIMIT_S = 300.0  # a step fault waits this long at its step for something to hit
DRAIN_TIMEOUT_S = 120.0  # after the last step: the longest wait for late faults to be seen


def scheduled_faults(cfg: LaminarConfig) -> list[FaultSpec]:
    """``runtime.faults.inject`` plus the older ``kill_*_at_step`` settings, mapped onto it."""
    return [spec for _, spec in cfg.runtime.scheduled_faults()]


class Supervisor:
    """Fault injection, death detection and recovery for one running job."""

    def __init__(
        self,
        a: Any,
        cfg: LaminarConfig,
        *,
        spawn: Callable[[int, str, frozenset[str]], Any] | None,
        checkpoint: Callable[[], str | None],
        on_change: Callable[[], None] = lambda: None,
        done: set[str] = frozenset(),
    ):
        self.a, self.cfg = a, cfg
        self.spawn = spawn
        self.checkpoint = checkpoint
        self.on_change = on_change
        self.pending = [s for s in scheduled_faults(cfg) if s.text() not in done]
        self.faults: list[dict] = a.info.setdefault("faults", [])
        a.info["replace_dead"] = bool(cfg.runtime.faults.replace_dead and spawn)
        self.loops: dict[str, Any] = {}  # rollout -> its run_laminar call (laminar mode)
        self.starting: dict[str, tuple[Any, Any, int, float]] = {}
        self.index = {rid: i for i, rid in enumerate(a.rollouts)}  # rollout -> its slot
        self.seen_events = 0
        self.loop_t0 = time.time()
        self.last_step = -1
        self.last_tick = time.monotonic()
        self.stopping = False
        self.reaping: list[Any] = []  # refs of reap tasks sent to dead rollouts' machines
        self.watched: dict[str, Any] = {}  # name -> a call that must run until the loop ends

    # -- the clock of the run ---------------------------------------------------------------

    def now_s(self) -> float:
        return time.time() - self.a.info["t0_s"]

    def start_loop(self) -> None:
        self.loop_t0 = time.time()

    def watch(self, name: str, ref: Any) -> None:
        """``ref`` (e.g. the rollout manager's loop) must run while steps remain: if it ends
        early, the next poll raises its error instead of the run waiting out its steps."""
        self.watched[name] = ref

    def check_watched(self) -> None:
        """Raise the error of a watched call that ended (or say that it ended)."""
        import ray

        if not self.watched:
            return
        refs = list(self.watched.values())
        done, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        for name, ref in self.watched.items():
            if ref in done:
                ray.get(ref)  # its own error, if it failed
                raise RuntimeError(f"the {name} stopped before the run's end")

    # -- trainer steps ----------------------------------------------------------------------

    def run_step(self, step: int) -> dict:
        """Run trainer step ``step`` to the end, surviving trainer deaths; poll meanwhile."""
        import ray

        timeout_s = self.cfg.runtime.step_timeout_s
        while True:
            ref = self.a.trainer.step.remote(step)
            deadline = time.monotonic() + timeout_s
            while True:
                ready, _ = ray.wait([ref], timeout=self.cfg.runtime.faults.poll_s)
                if ready:
                    break
                self.tick()
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"trainer step {step} took over runtime.step_timeout_s={timeout_s}s "
                        "(no complete groups arrived: are the rollouts alive?)"
                    )
            try:
                m = ray.get(ref)
                self.last_step = step
                return m
            except ray.exceptions.RayActorError as e:
                self.trainer_died(step, e)

    def call_trainer(self, step: int, fn: Callable[[], Any]) -> Any:
        """A trainer call between steps (checkpoint); a death there restarts the trainer too."""
        import ray

        try:
            return fn()
        except ray.exceptions.RayActorError as e:
            self.trainer_died(step + 1, e)
            return None

    def trainer_died(self, step: int, err: BaseException) -> None:
        """Give back what step ``step`` took, start a new trainer from the last checkpoint."""
        import ray

        detected = self.now_s()
        rec = self._open_record("kill-trainer") or self._record(
            {"kind": "trainer-death", "target": "trainer", "at_s": detected, "step": step - 1}
        )
        rec["detected_s"] = detected
        rec["detection_s"] = detected - rec["at_s"]
        rec["error"] = f"{type(err).__name__}"
        t = time.perf_counter()
        rec["requeued_groups"] = ray.get(self.a.buffer.requeue_from.remote(step))
        rec["resumed_version"] = restart_trainer(self.a, self.checkpoint())
        rec["checkpoint"] = self.checkpoint()
        rec["recovery_s"] = time.perf_counter() - t
        rec["open"] = False
        self.on_change()

    # -- scheduled faults -------------------------------------------------------------------

    def after_step(self, step: int) -> None:
        """Inject the faults scheduled right after trainer step ``step``; then a poll if one
        is due (steps that never wait on their batch would otherwise never poll)."""
        due = [s for s in self.pending if s.step is not None and s.step <= step]
        self._inject(due, step)
        if time.monotonic() - self.last_tick >= self.cfg.runtime.faults.poll_s:
            self.tick()
        # A fault deferred at its step (e.g. the rollouts it could hit are being replaced)
        # holds the next step until it can happen: it happens at its step, not at the end.
        deadline = time.monotonic() + DEFER_LIMIT_S
        while any(s in self.pending for s in due) and time.monotonic() < deadline:
            time.sleep(self.cfg.runtime.faults.poll_s)
            self._tick_between_steps()

    def _tick_between_steps(self) -> None:
        """A poll while no step runs: a trainer killed now would be seen only by the next
        step, so it is asked (and restarted if dead) here."""
        self.tick()
        if any(f.get("open") and f["kind"] == "kill-trainer" for f in self.faults):
            self._probe_trainer()

    def tick(self) -> None:
        """One poll: due timed faults, deaths seen by the manager, replacements coming up."""
        self.last_tick = time.monotonic()
        self.check_watched()
        elapsed = time.time() - self.loop_t0
        due = [
            s
            for s in self.pending
            if (s.at_s is not None and s.at_s <= elapsed)
            or (s.step is not None and s.step <= self.last_step)  # deferred at its step
        ]
        self._inject(due, self.last_step)
        self._watch_rollouts()
        self._finish_replacements()
        relays = getattr(self.a, "relays", None)
        if relays is not None and relays.watch(self):
            self.on_change()

    def _inject(self, due: list[FaultSpec], step: int) -> None:
        import ray

        for spec in due:
            rec = {"kind": spec.kind, "spec": spec.text(), "at_s": self.now_s(), "step": step}
            try:
                rec.update(inject(self.a, spec))
            except (FaultDeferred, ray.exceptions.RayError) as e:
                # a RayError: something it looked at is dying now (e.g. the trainer on a machine
                # just lost): like a deferral, tried again once the recoveries are over
                if self.starting or self._recovering():
                    continue  # stays pending: tried again at the next poll
                why = str(e) if isinstance(e, FaultDeferred) else f"{type(e).__name__}: {e}"
                rec.update(skipped=why[:300])
            except FaultNotApplicable as e:
                rec.update(skipped=str(e))
            self.pending.remove(spec)
            self._record(rec)
        if due:
            self.on_change()

    def _recovering(self) -> bool:
        return any(f.get("open") for f in self.faults)

    def _record(self, rec: dict) -> dict:
        rec.setdefault("open", "skipped" not in rec)
        self.faults.append(rec)
        return rec

    def _open_record(self, kind: str, target: str | None = None) -> dict | None:
        for rec in self.faults:
            hit = target is None or target in (rec.get("target"), *rec.get("rollouts", ()))
            if rec.get("open") and rec["kind"] == kind and hit:
                return rec
        return None

    # -- rollouts -----------------------------------------------------------------------------

    def _watch_rollouts(self) -> None:
        import ray

        health = ray.get(self.a.manager.health.remote(self.seen_events))
        self.seen_events += len(health["events"])
        for ev in health["events"]:
            if ev["kind"] == "recovery":
                self._rollout_died(ev)

    def _rollout_died(self, ev: dict) -> None:
        import ray

        rid = ev["src"]
        self.a.dead.add(rid)
        ray.kill(self.a.rollouts[rid], no_restart=True)  # fence: a hung actor delivers nothing
        # Its orphaned engine would hold memory and cores until the end; not waited for: on a
        # machine just lost (still alive to Ray for ~15 s) the task waits for Ray, and this
        # poll would hold the trainer's next step and the prompt budget (the rollouts idled
        # ~10 s). Teardown reaps every dead rollout again, waiting.
        self.reaping.append(reap(self.a, rid, wait=False))
        rec = self._rollout_record(rid, ev)
        if rec is not None:
            rec["recovered"] = sorted({*rec.get("recovered", []), rid})
            if set(rec["recovered"]) >= set(rec.get("rollouts", [rec.get("target")])):
                rec["detected_s"] = ev["at_s"]
                rec["detection_s"] = ev["at_s"] - rec["at_s"]
                rec["recovery_s"] = ev["duration_s"]
                rec["trajectories_continued"] = ev["continued"]
                rec["trajectories_restarted"] = ev["restarted"]
                rec["already_finished"] = ev.get("already_finished", 0)
                rec["trajectories_unregistered"] = ev.get("unregistered", 0)
        started = self._replace(rid, rec)
        if rec is not None and "detected_s" in rec and not started and not self.starting:
            rec["open"] = False  # nothing more to wait for
        self.on_change()

    def _rollout_record(self, rid: str, ev: dict) -> dict | None:
        for rec in self.faults:  # the earliest open fault that hit this rollout
            hits = (rec.get("target"), *rec.get("rollouts", ()))
            kinds = ("kill-rollout", "kill-engine", "kill-machine")
            fresh = "detected_s" not in rec or rec["kind"] == "kill-machine"
            if rec.get("open") and rec["kind"] in kinds and rid in hits and fresh:
                return rec
        return self._record(
            {
                "kind": "rollout-death",
                "target": rid,
                "at_s": ev["at_s"],
                "detected_s": ev["at_s"],
                "detection_s": 0.0,
                "recovery_s": ev["duration_s"],
                "reason": ev.get("reason", ""),
                "open": False,
            }
        )

    def _replace(self, rid: str, rec: dict | None) -> bool:
        """Start a replacement in ``rid``'s slot if the run is short of rollouts."""
        live = len(self.a.live()) + len(self.starting)
        if self.stopping or not (self.cfg.runtime.faults.replace_dead and self.spawn):
            return False
        if live >= self.cfg.runtime.rollouts:
            return False
        return self._start_replacement(self.index[rid], rec)

    def _start_replacement(self, index: int, rec: dict | None) -> bool:
        """A new rollout in slot ``index``, kept off the machines this run has lost: Ray
        counts a lost machine alive for ~15 s more, and a replacement placed there dies.
        False when no machine is left to place it on."""
        new_id = f"r{len(self.a.rollouts) + len(self.starting)}"
        lost = frozenset(f.get("node_id") for f in self.faults if f["kind"] == "kill-machine")
        try:
            handle = self.spawn(index, new_id, lost - {None})
        except LaminarError as e:
            if rec is not None:
                rec.setdefault("replacements_failed", []).append(f"{new_id}: {e}")
            return False
        self.starting[new_id] = (handle, handle.start.remote(), index, time.perf_counter())
        if rec is not None:
            rec.setdefault("replacements", []).append(new_id)
        return True

    def _finish_replacements(self, deadline: float | None = None) -> None:
        """Replacements whose engine is up join the job; ``deadline`` (monotonic): wait for
        them until then (the end of the run), else only look."""
        import ray

        for new_id, (handle, ref, index, t0) in list(self.starting.items()):
            wait_s = 0.0 if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _ = ray.wait([ref], timeout=wait_s)
            if not ready:
                if deadline is not None or time.perf_counter() - t0 > REPLACE_TIMEOUT_S:
                    del self.starting[new_id]
                    ray.kill(handle, no_restart=True)  # its processes: swept at teardown
                    self._replacement_failed(new_id, "not started in time")
                continue
            del self.starting[new_id]
            try:
                footprint = ray.get(ref)
            except ray.exceptions.RayError as e:  # it died starting (its machine went too)
                self._replacement_failed(new_id, type(e).__name__, index)
                continue
            self.a.join(new_id, handle, index, footprint)
            self.index[new_id] = index
            if not self.stopping:
                if self.cfg.runtime.mode == "laminar":
                    self.loops[new_id] = handle.run_laminar.remote()
                ray.get(self.a.manager.add.remote(new_id, handle))
            for rec in self.faults:
                if new_id in rec.get("replacements", []):
                    rec["replaced_s"] = self.now_s() - rec["at_s"]
                    rec["open"] = False
            self.on_change()

    def _replacement_failed(self, new_id: str, why: str, index: int | None = None) -> None:
        """Record it; one that died starting (``index``: its slot) is started again, a few
        times: its machine was lost before Ray knew (a real loss, or one another fault
        caused), and Ray has declared it dead by now, so the next goes elsewhere."""
        for rec in self.faults:
            if new_id in rec.get("replacements", []):
                rec.setdefault("replacements_failed", []).append(f"{new_id}: {why}")
                again = index is not None and not self.stopping
                again = again and len(rec["replacements_failed"]) < REPLACE_ATTEMPTS
                if not (again and self._start_replacement(index, rec)):
                    rec["open"] = False

    def drain(self, timeout_s: float = DRAIN_TIMEOUT_S) -> None:
        """The last step is done; before the run ends (rollouts and manager still run), a
        fault scheduled at a step already run that is still waiting for something to hit
        fires, and every fault injected is detected (its recovery started): a fault late in a
        run is recorded whole, not cut off by the end. Bounded by ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self._tick_between_steps()
            due = [s for s in self.pending if s.step is not None and s.step <= self.last_step]
            if not due and not self._undetected():
                return
            time.sleep(self.cfg.runtime.faults.poll_s)

    def _undetected(self) -> list[dict]:
        return [f for f in self.faults if f.get("open") and "detected_s" not in f]

    def _probe_trainer(self) -> None:
        import ray

        try:
            ray.get(self.a.trainer.__ray_call__.remote(lambda trainer: None), timeout=10.0)
        except ray.exceptions.RayActorError as e:
            self.trainer_died(self.last_step + 1, e)  # gives nothing back: no step took
        except ray.exceptions.GetTimeoutError:
            pass  # busy (a checkpoint): alive

    def settle(self, timeout_s: float = 180.0) -> None:
        """End of the loop: replacements still starting join (so teardown stops their engines
        cleanly) without taking work; faults that never found their moment are recorded."""
        self.stopping = True
        self._finish_replacements(deadline=time.monotonic() + timeout_s)
        self._watch_rollouts()
        for spec in self.pending:
            self._record(
                {"kind": spec.kind, "spec": spec.text(), "skipped": "the run ended first"}
            )
        self.pending = []
        self.on_change()

    def checkpoint_meta(self, step: int) -> dict:
        """What a resumed run needs besides trainer and pools: the clock, faults, events."""
        import ray

        events = self.a.info.get("prior_events", [])  # a resumed run's earlier ones
        events = events + ray.get(self.a.manager.health.remote(0))["events"]
        return {
            "elapsed_s": self.now_s(),
            "wall_s": self.a.info.get("prior_wall_s", 0.0) + time.time() - self.loop_t0,
            "faults": self.faults,
            "events": events,
            "rollouts": sorted(self.a.rollouts),
        }
