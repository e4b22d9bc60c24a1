"""``GlassLM.generate`` with and without the KV cache: same tokens, time each.

    .venv/bin/python bench/kv_cache.py [--repeats 5]

Default model (d 64, 2 layers, max_seq_len 64); prompt "The " and 60 new tokens (the
window is 64, so the whole continuation runs from the cache), greedy.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from glassllm.layers import GlassConfig, GlassLM
from glassllm.tokenizer import ByteTokenizer


def best(model: GlassLM, prompt: np.ndarray, new: int, cache: bool, repeats: int):
    times, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = model.generate(prompt, new, temperature=0, kv_cache=cache)
        times.append(time.perf_counter() - t)
    return min(times), out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    prompt = ByteTokenizer().encode("The ")
    for config in (GlassConfig(), GlassConfig(d_model=128, n_layers=4, ffn_hidden=384,
                                              max_seq_len=128)):
        model = GlassLM(config)
        new = config.max_seq_len - len(prompt)
        t_full, a = best(model, prompt, new, False, args.repeats)
        t_cache, b = best(model, prompt, new, True, args.repeats)
        assert a.tolist() == b.tolist()
        print(f"d={config.d_model} L={config.n_layers} n={config.max_seq_len}: {new} tokens "
              f"without cache {t_full * 1000:.0f} ms, with cache {t_cache * 1000:.0f} ms "
              f"({t_full / t_cache:.1f}x), same tokens")
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
