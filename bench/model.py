"""Benchmark one training step (forward, backward, AdamW) of a small GlassLM.

    python bench/model.py [--steps 30] [--warmup 5]

Shape: d=64, 2 layers, H=4, Hkv=2, F=192, n=64, B=8, V=256, float64.
Prints median step time, tokens/s and peak memory for glassllm, and for PyTorch
(float64, eager, the same math op for op, weights copied from glassllm) when torch is
importable. Each framework runs in its own subprocess so their memory peaks do not mix.

Memory: "traced" is tracemalloc's peak during the measured steps (it sees NumPy's
buffers; it does not see PyTorch's allocator), "rss+" is the growth of the process's
peak resident set over the measured steps (comparable between the two).

Not a test: timings depend on the machine. PyTorch is never a dependency of glassllm.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from glassllm.layers import GlassConfig, GlassLM, rope_angles
from glassllm.optim import AdamW

CONFIG = GlassConfig(
    d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, ffn_hidden=192, max_seq_len=64, seed=0
)
B, N = 8, 64
LR, WD = 3e-3, 0.01


def _batch() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    data = rng.integers(0, CONFIG.vocab, size=B * (N + 1)).reshape(B, N + 1)
    return data[:, :-1], data[:, 1:]  # ids, targets: (B, n)


def _maxrss_mb() -> float:
    """Peak resident set of this process in MB (VmHWM: reset by exec, unlike ru_maxrss,
    which a child inherits from the parent that forked it)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB → MB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def _measure(step, steps: int, warmup: int) -> dict:
    """Time ``steps`` steps, then measure memory over a few more (tracemalloc slows
    Python allocations, so it must not run while timing)."""
    for _ in range(warmup):
        step()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    rss_before = _maxrss_mb()
    tracemalloc.start()
    for _ in range(3):
        step()
    _, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    median = statistics.median(times)
    return {
        "step_ms": 1000 * median,
        "min_step_ms": 1000 * min(times),
        "tokens_per_s": B * N / median,
        "traced_peak_mb": traced_peak / 2**20,
        "rss_growth_mb": _maxrss_mb() - rss_before,
        "rss_peak_mb": _maxrss_mb(),
    }


def bench_glassllm(steps: int, warmup: int) -> dict:
    model = GlassLM(CONFIG)
    optimizer = AdamW(model.parameters(), lr=LR, weight_decay=WD)
    ids, targets = _batch()

    def step():  # the training loop's path (glassllm.training.stream.train_steps): fused layers
        optimizer.zero_grad()
        model.loss(ids, targets, fused=True).backward()
        optimizer.step()

    return _measure(step, steps, warmup)


def bench_torch(steps: int, warmup: int) -> dict:
    import torch
    import torch.nn.functional as F

    torch.set_default_dtype(torch.float64)
    reference = GlassLM(CONFIG)
    W = {k: torch.tensor(v, requires_grad=True) for k, v in reference.state_dict().items()}
    H, Hkv, dk = CONFIG.n_heads, CONFIG.n_kv_heads, CONFIG.d_model // CONFIG.n_heads
    cos, sin = (torch.tensor(t) for t in rope_angles(N, dk, CONFIG.rope_theta))
    future = torch.triu(torch.ones(N, N, dtype=torch.bool), diagonal=1)
    ids_np, targets_np = _batch()
    ids, targets = torch.tensor(ids_np), torch.tensor(targets_np)

    def rms(x, w):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + CONFIG.norm_eps) * w

    def rot(x):
        x0, x1 = x[..., 0::2], x[..., 1::2]
        return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1).flatten(-2)

    def loss_fn():
        x = W["tok_emb.weight"][ids]  # (B, n, d)
        for layer in range(CONFIG.n_layers):
            p = f"blocks.{layer}."
            h = rms(x, W[p + "attn_norm.weight"])
            q = rot((h @ W[p + "attn.wq"]).view(B, N, H, dk).transpose(1, 2))
            k = rot((h @ W[p + "attn.wk"]).view(B, N, Hkv, dk).transpose(1, 2))
            v = (h @ W[p + "attn.wv"]).view(B, N, Hkv, dk).transpose(1, 2)
            k, v = k.repeat_interleave(H // Hkv, 1), v.repeat_interleave(H // Hkv, 1)
            scores = (q @ k.transpose(-1, -2)) / dk**0.5
            att = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1) @ v
            x = x + att.transpose(1, 2).reshape(B, N, H * dk) @ W[p + "attn.wo"]
            h = rms(x, W[p + "ffn_norm.weight"])
            gate = F.silu(h @ W[p + "ffn.w1"]) * (h @ W[p + "ffn.w3"])
            x = x + gate @ W[p + "ffn.w2"]
        logits = rms(x, W["norm.weight"]) @ W["head.weight"]
        return F.cross_entropy(logits.reshape(-1, CONFIG.vocab), targets.reshape(-1))

    # Agreement with glassllm on one forward/backward before timing anything.
    ours = reference.loss(ids_np, targets_np, fused=True)
    ours.backward()
    theirs = loss_fn()
    theirs.backward()
    max_grad_diff = max(
        float(np.max(np.abs(p.grad - W[name].grad.numpy())))
        for name, p in reference.named_parameters()
    )
    agreement = {"loss_diff": abs(ours.item() - theirs.item()), "max_grad_diff": max_grad_diff}

    optimizer = torch.optim.AdamW(W.values(), lr=LR, weight_decay=WD)

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss_fn().backward()
        optimizer.step()

    result = _measure(step, steps, warmup)
    result.update(agreement, torch=torch.__version__, threads=torch.get_num_threads())
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3, help="alternating subprocess rounds")
    parser.add_argument("--only", choices=["glassllm", "torch"], help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.only:  # child process: one framework, JSON out
        fn = bench_glassllm if args.only == "glassllm" else bench_torch
        print(json.dumps(fn(args.steps, args.warmup)))
        return

    print(
        f"training step: d={CONFIG.d_model}, layers={CONFIG.n_layers}, H={CONFIG.n_heads}, "
        f"Hkv={CONFIG.n_kv_heads}, F={CONFIG.ffn_hidden}, n={N}, B={B}, float64, "
        f"median of {args.steps} steps, best of {args.rounds} rounds; numpy {np.__version__}"
    )
    # Frameworks alternate over --rounds fresh subprocesses; each keeps its best round
    # (the machine may be shared, and load only ever makes a step slower).
    results: dict[str, dict] = {}
    names = ["glassllm"]
    if importlib.util.find_spec("torch") is not None:  # not imported here: memory
        names.append("torch")
    else:
        print("torch: not importable, skipped (optional; never a dependency)")
    for _ in range(args.rounds):
        for name in names:
            cmd = [
                sys.executable,
                __file__,
                "--only",
                name,
                "--steps",
                str(args.steps),
                "--warmup",
                str(args.warmup),
            ]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            r = json.loads(out.strip().splitlines()[-1])
            if name not in results or r["step_ms"] < results[name]["step_ms"]:
                results[name] = r
    for name, r in results.items():
        print(
            f"{name:9s} {r['step_ms']:7.2f} ms/step (min {r['min_step_ms']:6.2f})  "
            f"{r['tokens_per_s']:8,.0f} tokens/s  traced peak {r['traced_peak_mb']:5.1f} MB  "
            f"rss+ {r['rss_growth_mb']:5.1f} MB  (rss peak {r['rss_peak_mb']:.0f} MB)"
        )
    if "torch" in results:
        t, g = results["torch"], results["glassllm"]
        print(
            f"torch {t['torch']} ({t['threads']} threads) agrees with glassllm: "
            f"|Δloss| = {t['loss_diff']:.2e}, max |Δgrad| = {t['max_grad_diff']:.2e}"
        )
        print(
            f"glassllm / torch step time: {g['step_ms'] / t['step_ms']:.2f}x median, "
            f"{g['min_step_ms'] / t['min_step_ms']:.2f}x min (target <= 1.0x)"
        )


if __name__ == "__main__":
    from glassllm.sandbox.runtime import tune_malloc

    tune_malloc()  # as the sandbox and the CLI do; see glassllm/sandbox/runtime.py
    main()
