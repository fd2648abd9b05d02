"""Does the tiny trainer's cost per padded token grow with sequence length beyond its FLOPs?

Issue 31: the trainer fit charges 8 x params FLOPs per padded token plus 8 x layers x hidden
per squared length, at one rate (``laminar/calibrate/fit.py: train_flops``). This times the
tiny-cpu model (2 layers, hidden 128) on [B, L] micro-batches of 4,096 padded tokens: forward,
the GRPO-style log-prob loss, backward and an AdamW step, one torch thread, the lengths
interleaved, the minimum over repeats; and prints each L's time over L = 128's beside the FLOP
count's ratio. Only ratios matter: run it on a quiet core if you can.

    python benchmarks/trainer_seq_len.py [REPEATS]
"""

from __future__ import annotations

import sys
import time


def main(repeats: int = 7) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from laminar.runtime.models.tinymodel import llama_config

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**llama_config(layers=2, hidden=128,
                                                        max_positions=1024)))  # fmt: skip
    params = sum(p.numel() for p in model.parameters())
    f1, f2 = 8 * params, 8 * 2 * 128
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tokens, lengths = 4096, (32, 64, 128, 256, 512)

    def step(length: int) -> float:
        ids = torch.randint(3, 40, (tokens // length, length))
        t = time.perf_counter()
        logits = model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False).logits
        lp = torch.log_softmax(logits[:, :-1].float(), -1).gather(-1, ids[:, 1:, None])
        (-lp.mean()).backward()
        opt.step()
        opt.zero_grad()
        return time.perf_counter() - t

    for length in lengths:
        step(length)  # warm-up
    times: dict[int, list[float]] = {n: [] for n in lengths}
    for rep in range(repeats):
        for length in lengths if rep % 2 == 0 else lengths[::-1]:
            times[length].append(step(length))

    def flop(n: int) -> float:
        return f1 * tokens + f2 * tokens * n

    print(f"{'L':>4} {'B':>4} {'min s':>8} {'/ L=128':>8} {'FLOPs / L=128':>14}")
    for n in lengths:
        best = min(times[n])
        print(f"{n:4d} {tokens // n:4d} {best:8.4f} {best / min(times[128]):8.3f} "
              f"{flop(n) / flop(128):14.3f}")  # fmt: skip


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 7)
