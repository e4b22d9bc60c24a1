"""``glassllm`` command line: ``glassllm train`` and ``glassllm generate``.

    glassllm train [TEXT_FILE] [--steps 300] [--out glassllm.npz] [--seed 0] ...
    glassllm generate --checkpoint glassllm.npz --prompt "The " [--temperature 0.8]
                      [--top-k 20] [--seed 0] [--max-new-tokens 200]

``train`` writes the weights to ``--out`` (.npz, no pickle) and the config next to it
(same name, .json). Both commands are deterministic for a given seed.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import fields
from pathlib import Path

from glassllm.layers import GlassConfig, GlassLM
from glassllm.tokenizer import ByteTokenizer
from glassllm.train import default_corpus, train

__all__ = ["main"]

TQDM_MISSING = (
    "note: tqdm is not installed, so progress is printed as plain lines; "
    "`pip install 'glassllm[train]'` gives a progress bar."
)


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="glassllm", description="Train and sample a tiny LM.")
    sub = parser.add_subparsers(dest="command", required=True)

    t = sub.add_parser("train", help="train a tiny byte-level LM on a text file")
    t.add_argument("text", nargs="?", help="UTF-8 text file (default: the shipped corpus)")
    t.add_argument("--out", default="glassllm.npz", help="checkpoint path (.npz); config → .json")
    t.add_argument("--steps", type=int, default=300)
    t.add_argument("--batch-size", type=int, default=8)
    t.add_argument("--lr", type=float, default=3e-3)
    t.add_argument("--weight-decay", type=float, default=0.01)
    t.add_argument("--max-grad-norm", type=float, default=1.0)
    t.add_argument("--seed", type=int, default=0, help="seeds the weights and the batches")
    defaults = GlassConfig()
    for f in fields(GlassConfig):
        if f.name != "seed":
            t.add_argument(
                f"--{f.name.replace('_', '-')}",
                type=type(getattr(defaults, f.name)),
                default=getattr(defaults, f.name),
            )

    g = sub.add_parser("generate", help="sample text from a checkpoint")
    g.add_argument("--checkpoint", required=True, help=".npz written by `glassllm train`")
    g.add_argument("--prompt", default="The ")
    g.add_argument("--max-new-tokens", type=int, default=200)
    g.add_argument("--temperature", type=float, default=0.8, help="0 means greedy")
    g.add_argument("--top-k", type=int, default=None, help="sample among the k likeliest bytes")
    g.add_argument("--seed", type=int, default=0)
    return parser


def _progress(steps: int):
    """A per-step callback: a tqdm bar if tqdm is installed, else a line every 10%."""
    try:
        from tqdm import tqdm
    except ImportError:
        print(TQDM_MISSING, file=sys.stderr)
        every = max(1, steps // 10)

        def plain(step: int, loss: float, tps: float) -> None:
            if step % every == 0 or step == steps:
                print(f"step {step}/{steps}  loss {loss:.4f}  {tps:,.0f} tok/s", file=sys.stderr)

        return plain, lambda: None

    bar = tqdm(total=steps, desc="train", unit="step")

    def update(step: int, loss: float, tps: float) -> None:
        bar.set_postfix(loss=f"{loss:.4f}", tok_s=f"{tps:,.0f}", refresh=False)
        bar.update(1)

    return update, bar.close


def _train(args: argparse.Namespace) -> int:
    text = Path(args.text).read_text(encoding="utf-8") if args.text else default_corpus()
    config = GlassConfig(
        seed=args.seed,
        **{f.name: getattr(args, f.name) for f in fields(GlassConfig) if f.name != "seed"},
    )
    data = ByteTokenizer().encode(text)  # (T,)
    if len(data) < config.max_seq_len + 1:
        raise ValueError(
            f"the text has {len(data)} bytes; training windows need at least "
            f"max_seq_len + 1 = {config.max_seq_len + 1}"
        )
    model = GlassLM(config)
    on_step, close = _progress(args.steps)
    try:
        result = train(
            model,
            data,
            steps=args.steps,
            batch_size=args.batch_size,
            lr=args.lr,
            weight_decay=args.weight_decay,
            max_grad_norm=args.max_grad_norm,
            seed=args.seed,
            on_step=on_step,
        )
    finally:
        close()
    out = Path(args.out)
    model.save_checkpoint(out)
    print(
        f"trained {args.steps} steps on {len(data):,} bytes in {result.seconds:.1f}s: "
        f"loss {result.losses[0]:.3f} → {result.losses[-1]:.3f}; "
        f"saved {out} and {out.with_suffix('.json')}"
    )
    return 0


def _generate(args: argparse.Namespace) -> int:
    import numpy as np

    model = GlassLM.from_checkpoint(args.checkpoint)
    tok = ByteTokenizer()
    prompt = tok.encode(args.prompt)
    if prompt.size == 0:
        print("error: --prompt must not be empty", file=sys.stderr)
        return 2
    ids = model.generate(
        prompt,
        args.max_new_tokens,
        temperature=args.temperature,
        top_k=args.top_k,
        rng=np.random.default_rng(args.seed),
    )
    print(tok.decode(ids))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    try:
        return _train(args) if args.command == "train" else _generate(args)
    except (OSError, ValueError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
