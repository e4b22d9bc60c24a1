"""``glassllm`` command line: ``glassllm train``, ``glassllm generate``, ``glassllm exercises
check`` and ``glassllm grade`` (docs/grading.md).

    glassllm train [TEXT_FILE] [--steps 300] [--out glassllm.npz] [--seed 0] ...
    glassllm generate --checkpoint glassllm.npz --prompt "The " [--temperature 0.8]
                      [--top-k 20] [--seed 0] [--max-new-tokens 200]

``train`` writes the weights to ``--out`` (.npz, no pickle) and the config next to it
(``model.npz`` → ``model.json``; any other name whole plus ``.json``), each atomically (a
failed save leaves the previous checkpoint as it was). Both commands are deterministic for
a given seed. In ``generate``, ``--temperature 0`` is greedy (argmax) and omitting
``--top-k`` means no top-k; top-k must be ≥ 1 and a positive temperature at least 0.001.

Every option is checked before any work starts (the argparse ``type=`` functions below):
a bad value exits with status 2 and ``argument --steps: must be a positive integer, got
'0'``, never a traceback. Counts and sizes are positive integers, seeds non-negative
integers, floats finite (``nan``/``inf`` are refused). If training still diverges (a
nan/inf loss, gradient or weight), it stops with status 1 and saves no checkpoint.

Output is written so that any terminal can show it: characters the output encoding
cannot represent (``PYTHONIOENCODING=cp1252``, a Windows console, a pipe in ASCII)
become ``?`` instead of ending the run with UnicodeEncodeError, and control characters
in sampled text (ESC, NUL, BEL, DEL, C1 controls, bidi overrides; everything but
newline and tab) are shown escaped, ``\x1b``, never sent raw to the terminal.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import sys
import unicodedata
import zipfile
from dataclasses import fields
from pathlib import Path

import numpy as np

from glassllm.layers import GlassConfig
from glassllm.modules import GlassLM
from glassllm.sandbox.runtime import tune_malloc
from glassllm.tokenizer import ByteTokenizer
from glassllm.training.loop import TrainingDiverged, default_corpus, read_corpus, train

__all__ = ["main", "printable"]

TQDM_MISSING = (
    "note: tqdm is not installed, so progress is printed as plain lines; "
    "`pip install 'glassllm[train]'` gives a progress bar."
)


class _UsageError(Exception):
    """Bad input found after parsing (a file, or options that clash): exit 2 like argparse."""


def _int_type(minimum: int, rule: str):
    """An argparse ``type=``: an integer ≥ ``minimum``, else 'must be <rule>, got ...'."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError(f"must be {rule}, got {text!r}")
        return value

    return parse


def _float_type(minimum: float, rule: str, *, inclusive: bool):
    """An argparse ``type=``: a finite float ≥ (or >) ``minimum``; nan and ±inf refused."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        ok = math.isfinite(value) and (value >= minimum if inclusive else value > minimum)
        if not ok:
            raise argparse.ArgumentTypeError(f"must be {rule}, got {text!r}")
        return value

    return parse


MAX_NEW_TOKENS = 10_000  # past max_seq_len the KV cache is rebuilt every token: keep it bounded
MIN_TEMPERATURE = 1e-3  # below this (but > 0) logits/T can overflow; 0 is exact greedy


def _max_new_tokens(text: str) -> int:
    """``--max-new-tokens``: an integer from 0 (echo the prompt) to ``MAX_NEW_TOKENS``."""
    value = _int_type(0, f"an integer from 0 to {MAX_NEW_TOKENS}")(text)
    if value > MAX_NEW_TOKENS:
        raise argparse.ArgumentTypeError(
            f"must be an integer from 0 to {MAX_NEW_TOKENS}, got {text!r}"
        )
    return value


def _temperature(text: str) -> float:
    """``--temperature``: 0 (greedy) or a finite number ≥ ``MIN_TEMPERATURE``."""
    rule = f"0 (greedy) or a finite number ≥ {MIN_TEMPERATURE:g}"
    value = _float_type(0.0, rule, inclusive=True)(text)
    if 0 < value < MIN_TEMPERATURE:
        raise argparse.ArgumentTypeError(f"must be {rule}, got {text!r}")
    return value


_positive_int = _int_type(1, "a positive integer")
_seed = _int_type(0, "a non-negative integer")
_positive_float = _float_type(0.0, "a finite number > 0", inclusive=False)
_non_negative_float = _float_type(0.0, "a finite number ≥ 0", inclusive=True)


def _byte_vocab(text: str) -> int:
    """``--vocab``: the tokenizer is byte-level, so the only vocabulary that works is 256."""
    if text.strip() != str(ByteTokenizer.vocab_size):
        raise argparse.ArgumentTypeError(
            f"must be {ByteTokenizer.vocab_size} (the byte-level tokenizer), got {text!r}"
        )
    return ByteTokenizer.vocab_size


# Every GlassConfig field: its --option's type= (the rule) and help.
_CONFIG_OPTIONS = {
    "vocab": (_byte_vocab, "V; must be 256 (bytes)"),
    "d_model": (_positive_int, "d, ≥ 1, divisible by --n-heads"),
    "n_layers": (_positive_int, "≥ 1"),
    "n_heads": (_positive_int, "H, ≥ 1, d/H even (RoPE)"),
    "n_kv_heads": (_positive_int, "Hkv, ≥ 1, divides H"),
    "ffn_hidden": (_positive_int, "F (SwiGLU width), ≥ 1"),
    "rope_theta": (_positive_float, "finite, > 0"),
    "norm_eps": (_positive_float, "finite, > 0"),
    "max_seq_len": (_positive_int, "n (training window, context), ≥ 1"),
    "seed": (_seed, "≥ 0"),
}


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="glassllm", description="Train and sample a tiny LM.")
    sub = parser.add_subparsers(dest="command", required=True)

    t = sub.add_parser("train", help="train a tiny byte-level LM on a text file")
    t.set_defaults(subparser=t)
    t.add_argument(
        "text", nargs="?", metavar="TEXT_FILE", help="UTF-8 text file (default: the shipped corpus)"
    )
    t.add_argument(
        "--out", default="glassllm.npz",
        help="checkpoint path (.npz); its config goes beside it: NAME.npz → NAME.json,"
             " another name + .json"
    )
    t.add_argument("--steps", type=_positive_int, default=300, help="≥ 1 (default %(default)s)")
    t.add_argument("--batch-size", type=_positive_int, default=8, help="≥ 1 (default %(default)s)")
    t.add_argument(
        "--lr", type=_positive_float, default=3e-3, help="finite, > 0 (default %(default)s)"
    )
    t.add_argument(
        "--weight-decay",
        type=_non_negative_float,
        default=0.01,
        help="finite, ≥ 0 (default %(default)s)",
    )
    t.add_argument(
        "--max-grad-norm",
        type=_positive_float,
        default=1.0,
        help="clip the global gradient norm to this; finite, > 0 (default %(default)s)",
    )
    t.add_argument("--seed", type=_seed, default=0, help="seeds the weights and the batches; ≥ 0")
    defaults = GlassConfig()
    for f in fields(GlassConfig):
        if f.name != "seed":
            default = getattr(defaults, f.name)
            kind, rule = _CONFIG_OPTIONS.get(f.name, (type(default), "model config"))
            t.add_argument(
                f"--{f.name.replace('_', '-')}",
                type=kind,
                default=default,
                help=f"{rule} (default %(default)s)",
            )

    e = sub.add_parser("exercises", help="check exercise files (docs/exercises.md)")
    e.set_defaults(subparser=e)
    e.add_argument("action", choices=["check"], help="check: read every file as the"
                   " sandbox does at startup, each error naming the file, field and rule")
    e.add_argument("paths", nargs="*", metavar="PATH",
                   help="*.toml files or directories of them (default: the shipped ones)")

    from glassllm.course.grader import command as grade_command

    grade_command.add_parser(sub)

    g = sub.add_parser("generate", help="sample text from a checkpoint")
    g.set_defaults(subparser=g)
    g.add_argument("--checkpoint", required=True, help=".npz written by `glassllm train`")
    g.add_argument("--prompt", default="The ", help="non-empty text (default %(default)r)")
    g.add_argument(
        "--max-new-tokens",
        type=_max_new_tokens,
        default=200,
        help=f"bytes to sample, 0 to {MAX_NEW_TOKENS} (default %(default)s)",
    )
    g.add_argument(
        "--temperature",
        type=_temperature,
        default=0.8,
        help=f"0 means greedy (argmax); otherwise finite, ≥ {MIN_TEMPERATURE:g} "
        "(default %(default)s)",
    )
    g.add_argument(
        "--top-k",
        type=_positive_int,
        default=None,
        help="sample only among the k likeliest bytes, k ≥ 1 (k ≥ 256 keeps them all); "
        "omit it for no top-k (the default)",
    )
    g.add_argument("--seed", type=_seed, default=0, help="≥ 0 (default %(default)s)")
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


def _read_text(name: str | None) -> str:
    """The TEXT_FILE argument's corpus (or the shipped one), read as bytes by
    `glassllm.training.loop.read_corpus` (CRLF kept, a leading BOM dropped: what the service
    trains on for the same file); _UsageError if unreadable or not UTF-8."""
    if name is None:
        return default_corpus()
    path = Path(name)
    if not path.exists():
        raise _UsageError(f"argument TEXT_FILE: text file {name} not found")
    if not path.is_file():
        raise _UsageError(f"argument TEXT_FILE: {name} is not a file")
    try:
        return read_corpus(path)
    except ValueError as exc:
        raise _UsageError(f"argument TEXT_FILE: {name} {exc}") from None
    except OSError as exc:
        raise _UsageError(f"argument TEXT_FILE: {name} cannot be read ({exc.strerror})") from None


def _check_out(name: str) -> Path:
    """``--out`` must be writable-looking before hours of training, not after."""
    out = Path(name)
    if out.suffix == ".json":
        raise _UsageError(
            f"argument --out: {name} names a .json file; a checkpoint is an .npz archive"
            " (its config goes beside it)"
        )
    if out.is_dir():
        raise _UsageError(f"argument --out: {name} is a directory")
    if not out.parent.is_dir():
        raise _UsageError(f"argument --out: directory {out.parent} does not exist")
    return out


def _train(args: argparse.Namespace) -> int:
    out = _check_out(args.out)
    text = _read_text(args.text)
    try:
        config = GlassConfig(
            seed=args.seed,
            **{f.name: getattr(args, f.name) for f in fields(GlassConfig) if f.name != "seed"},
        )
    except ValueError as exc:
        raise _UsageError(
            f"arguments --d-model {args.d_model}, --n-heads {args.n_heads}, "
            f"--n-kv-heads {args.n_kv_heads} do not fit: {exc}"
        ) from None
    data = ByteTokenizer().encode(text)  # (T,)
    if len(data) < config.max_seq_len + 1:
        raise _UsageError(
            f"argument TEXT_FILE: the text has {len(data)} bytes; training windows need at "
            f"least --max-seq-len + 1 = {config.max_seq_len + 1}"
        )
    model = GlassLM(config)
    on_step, close = _progress(args.steps)
    try:
        try:
            # Overflow/invalid warnings would only repeat what TrainingDiverged says clearly.
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
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
    except TrainingDiverged as exc:
        print(
            f"error: training diverged: {exc}; stopped, no checkpoint saved "
            f"(try a smaller --lr or --max-grad-norm)",
            file=sys.stderr,
        )
        return 1
    model.save_checkpoint(out)
    print(
        f"trained {args.steps} steps ({model.num_parameters():,} parameters) on "
        f"{len(data):,} bytes in {result.seconds:.1f}s: "
        f"loss {result.losses[0]:.3f} → {result.losses[-1]:.3f}; "
        f"saved {out} and {GlassLM.config_path(out)}"
    )
    return 0


def _load_checkpoint(name: str) -> GlassLM:
    """``--checkpoint``: the .npz and its .json config, each problem named (_UsageError)."""
    path = Path(name)
    config_path = GlassLM.config_path(path)
    where = f"argument --checkpoint: checkpoint {name}"
    if not path.exists():
        raise _UsageError(f"{where} not found")
    if not path.is_file():
        raise _UsageError(f"{where} is not a file")
    if not config_path.is_file():
        raise _UsageError(
            f"{where}: its config {config_path} is missing (`glassllm train` writes both)"
        )
    try:
        raw = json.loads(config_path.read_bytes())  # bytes: UTF-8, a BOM ignored
        if not isinstance(raw, dict):
            raise ValueError(f"expected a JSON object, got {type(raw).__name__}")
        unknown = sorted(raw.keys() - {f.name for f in fields(GlassConfig)})
        if unknown:
            raise ValueError(f"unknown field(s) {unknown}")
        for key, value in raw.items():
            kind, _ = _CONFIG_OPTIONS.get(key, (None, ""))
            if kind is not None:
                try:
                    kind(str(value))
                except argparse.ArgumentTypeError as exc:
                    raise ValueError(f"{key} {exc}") from None
        config = GlassConfig(**raw)
    except (ValueError, TypeError) as exc:  # JSONDecodeError/UnicodeDecodeError: ValueError
        raise _UsageError(f"{where}: its config {config_path} is corrupt: {exc}") from None
    if not zipfile.is_zipfile(path):
        raise _UsageError(f"{where} is not an .npz archive (empty, truncated or another format)")
    model = GlassLM(config)
    try:
        model.load(path)
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        detail = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc  # no repr quotes
        raise _UsageError(
            f"{where} is corrupt or does not match its config {config_path}: {detail}"
        ) from None
    for pname, p in model.named_parameters():
        if not np.all(np.isfinite(p.data)):
            raise _UsageError(
                f"{where} has non-finite weights ({pname}); it was saved from a diverged "
                "run, train it again"
            )
    return model


_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def printable(text: str) -> str:
    r"""``text`` with control characters escaped, so sampled bytes cannot drive the terminal.

    Newline and tab stay; every other C0/C1 control and DEL (Unicode category Cc) and
    the bidi embedding/override/isolate controls become ``\xNN`` / ``\uNNNN``.

    Example:
        >>> printable("a\x1b[2Jb\u202ec")
        'a\\x1b[2Jb\\u202ec'
    """

    def shown(ch: str) -> str:
        if ch in "\n\t" or (unicodedata.category(ch) != "Cc" and ch not in _BIDI_CONTROLS):
            return ch
        return f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}"

    return "".join(map(shown, text))


def _generate(args: argparse.Namespace) -> int:
    tok = ByteTokenizer()
    try:
        prompt = tok.encode(args.prompt)  # (n,)
    except UnicodeEncodeError:  # an undecodable command-line byte (surrogate escape)
        raise _UsageError("argument --prompt: must be valid UTF-8 text") from None
    if prompt.size == 0:
        raise _UsageError("argument --prompt: must not be empty")
    model = _load_checkpoint(args.checkpoint)
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            ids = model.generate(
                prompt,
                args.max_new_tokens,
                temperature=args.temperature,
                top_k=args.top_k,
                rng=np.random.default_rng(args.seed),
            )
    except ValueError as exc:  # finite but huge weights: NumPy's "probabilities contain NaN"
        print(
            f"error: checkpoint {args.checkpoint} gives non-finite logits ({exc}); "
            "its weights overflow, train it again",
            file=sys.stderr,
        )
        return 1
    print(printable(tok.decode(ids)))
    return 0


def _check_exercises(paths: list[str]) -> int:
    """``glassllm exercises check``: every file read and checked, every error printed (one
    line each: file, field, rule), an id twice named; 1 if any, else 0."""
    from pathlib import Path

    from glassllm.course.exercise import LESSONS_DIR, SHIPPED, ExerciseFileError, load

    files: list[Path] = []
    for path in map(Path, paths or [LESSONS_DIR, SHIPPED]):
        files += sorted(path.glob("*.toml")) if path.is_dir() else [path]
    bad, seen = 0, {}
    for file in files:
        try:
            exercise = load(file)
            if exercise.id in seen:
                raise ExerciseFileError(str(file), "id", f"{exercise.id!r} is also the id of"
                                        f" {seen[exercise.id]}")
        except ExerciseFileError as exc:
            print(f"error: {exc}", file=sys.stderr)
            bad += 1
            continue
        seen[exercise.id] = str(file)
        print(f"ok: {file}: {exercise.id} version {exercise.version}"
              f" ({exercise.answer.kind}, {len(exercise.hints)} hints, hides"
              f" {', '.join(sorted(exercise.hide)) or 'nothing'})")
        if exercise.answer.kind == "function" and "expected" not in exercise.hide:
            # the sandbox grades the function's own case as arrays; revealed, they are
            # what the offline grader checks on the student's numbers
            print(f"warning: {file}: a function exercise that does not hide \"expected\":"
                  " the sandbox's reveal hands a student the arrays the grader checks on"
                  " their numbers; add \"expected\" to hide (docs/integrity.md)",
                  file=sys.stderr)
    print(f"{len(files) - bad} of {len(files)} exercise files are well-formed")
    if files and not bad:
        # the record remembers each (id, version)'s case; a file alone cannot tell
        print("whether a case changed under its version: glassllm-sandbox check, where the"
              " course's settings are (docs/exercises.md#version)")
    return 1 if bad or not files else 0


def main(argv: list[str] | None = None) -> int:
    """Run the CLI. Bad input exits 2 (argparse's SystemExit); failures while running, 1."""
    stdout = sys.stdout
    errors = getattr(stdout, "errors", None)
    # "strict", and "surrogateescape" (a C/POSIX locale), fail on a character the encoding
    # lacks; "replace" writes "?" instead. Restored afterwards: main() may be a library call.
    fragile = isinstance(stdout, io.TextIOWrapper) and errors in ("strict", "surrogateescape")
    if fragile:
        stdout.reconfigure(errors="replace")
    try:
        return _main(argv)
    finally:
        if fragile:
            stdout.reconfigure(errors=errors)


def _main(argv: list[str] | None) -> int:
    args = _build_parser().parse_args(argv)
    tune_malloc()  # this process is ours: keep freed NumPy buffers for reuse (runtime.py)
    try:
        if args.command == "exercises":
            return _check_exercises(args.paths)
        if args.command == "grade":
            from glassllm.course.grader import command as grade_command

            return grade_command.run(args)
        return _train(args) if args.command == "train" else _generate(args)
    except _UsageError as exc:
        args.subparser.error(str(exc))  # usage + "glassllm train: error: ...", exit 2
    except (OSError, ValueError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except MemoryError:
        print("error: out of memory; try a smaller model or batch", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        saved = "; no checkpoint saved" if args.command == "train" else ""
        print(f"error: interrupted{saved}", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
