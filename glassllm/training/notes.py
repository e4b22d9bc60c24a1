"""The Train view's "What to notice" notes, each a sentence for the student *and* the claims
about the run's own numbers that make it true, as the lessons' notes carry theirs
(`glassllm.course.lesson_requests`).

The page (static/index.html, the Train section) shows each note's text verbatim; a test
(tests/library/test_training_notes.py) trains the page's default run, checks every claim
with `check` against its events, and checks the page's text is the note's. A note that
stops being true of the default run (a new default, a changed model) fails that test
instead of misleading a student.

A claim is a dict with a ``kind``, read from the run's events (``train_events``' dicts,
in order):

- ``first_loss``: the first step's loss lies in [``low``, ``high``].
- ``fast_then_slow``: the loss falls more over steps 1 … ``split`` than over the rest
  (10-step means at the ends, so one batch's noise does not decide).
- ``noisy``: at least ``min_rises`` steps have a higher loss than the step before.
- ``largest``: at every ``stats`` event, the ``top`` largest gradient groups are all of
  the ``kinds`` (a group's kind: ``attn``, ``ffn``, ``head``, ``tok_emb``, ``norm``: an
  RMSNorm gain).
- ``smaller``: at every ``stats`` event, every group of the ``small`` kinds is below every
  group of the ``large`` kinds.
- ``grow``: the last ``stats`` event's gradient norms, summed, exceed the first's.
- ``clipped``: the total gradient norm (before clipping) passes ``max_norm`` in each of
  the ``first`` steps and in at least ``late_min`` steps from step ``late_from`` on, so
  clipping acts then; and each ``stats`` event's groups make up its step's total (the
  root of their squares' sum, to 1e-9).
- ``first_sample``: the first sample holds ``word`` and at least ``spaces`` spaces.
- ``more_words``: the samples of the run's second half hold more of the corpus's words
  (of ≥ 2 letters), on average, than those of its first half, and the last more than the
  first.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field
from typing import Any

LN_256 = math.log(256)


@dataclass(frozen=True)
class Note:
    """One "What to notice" note of a Train panel (``panel``: its element id's stem)."""

    panel: str
    text: str
    claims: list[dict[str, Any]] = field(default_factory=list)


NOTES = [
    Note("loss",
         "the loss starts near ln 256 ≈ 5.5 (a uniform guess over 256 bytes; a fresh "
         "model's guesses are a little worse), drops fast as the model learns which bytes "
         "are common, then slowly as it learns words. The curve is noisy because each step "
         "sees a different random batch.",
         [{"kind": "first_loss", "low": LN_256 - 0.1, "high": LN_256 + 1.0},
          {"kind": "fast_then_slow", "split": 50},
          {"kind": "noisy", "min_rises": 30}]),
    Note("norms",
         "the attention and FFN blocks and the output head get the largest gradients; the "
         "embedding and the RMSNorm gains get far smaller ones (each embedding row moves "
         "only for its own byte). The norms need not shrink as the loss falls: here they "
         "grow. Before the update, all gradients together are clipped to norm 1: in the "
         "first steps, and again late in the run as the norms grow.",
         [{"kind": "largest", "top": 3, "kinds": ["attn", "ffn", "head"]},
          {"kind": "smaller", "small": ["tok_emb", "norm"], "large": ["attn", "ffn", "head"]},
          {"kind": "grow"},
          {"kind": "clipped", "max_norm": 1.0, "first": 5, "late_from": 150,
           "late_min": 20}]),
    Note("samples",
         "every sample uses the same random numbers, so only the model changes: spaces, "
         "common letters and \"the\" come first; later samples hold more real words.",
         [{"kind": "first_sample", "word": "the", "spaces": 5},
          {"kind": "more_words"}]),
]


def group_kind(name: str) -> str:
    """``blocks.0.attn`` → ``attn``; ``blocks.1.ffn_norm``, ``norm`` → ``norm``."""
    last = name.rsplit(".", 1)[-1]
    return "norm" if last.endswith("norm") else last


def _words(text: str, vocabulary: set[str]) -> int:
    return sum(w.lower() in vocabulary for w in re.findall(r"[A-Za-z]{2,}", text))


def check(claim: dict[str, Any], events: list[dict[str, Any]], corpus: str = "") -> None:
    """Raise AssertionError (naming the claim and the numbers) unless `claim` holds of the
    run whose events are `events`; `corpus`: the run's text (for ``more_words``)."""
    losses = [e["loss"] for e in events if e["event"] == "step"]
    stats = [e for e in events if e["event"] == "stats"]
    kind = claim["kind"]
    if kind == "first_loss":
        assert claim["low"] <= losses[0] <= claim["high"], (claim, losses[0])
    elif kind == "fast_then_slow":
        k = claim["split"]
        head = sum(losses[:10]) / 10 - sum(losses[k - 5:k + 5]) / 10
        tail = sum(losses[k - 5:k + 5]) / 10 - sum(losses[-10:]) / 10
        assert head > tail > 0, (claim, head, tail)
    elif kind == "noisy":
        rises = sum(b > a for a, b in itertools.pairwise(losses))
        assert rises >= claim["min_rises"], (claim, rises)
    elif kind == "largest":
        for e in stats:
            top = sorted(e["grad_norms"], key=e["grad_norms"].get, reverse=True)[:claim["top"]]
            assert all(group_kind(g) in claim["kinds"] for g in top), (claim, e["step"], top)
    elif kind == "smaller":
        for e in stats:
            norms = e["grad_norms"]
            small = max(v for g, v in norms.items() if group_kind(g) in claim["small"])
            large = min(v for g, v in norms.items() if group_kind(g) in claim["large"])
            assert small < large, (claim, e["step"], small, large)
    elif kind == "grow":
        first, last = (sum(e["grad_norms"].values()) for e in (stats[0], stats[-1]))
        assert last > first, (claim, first, last)
    elif kind == "clipped":
        totals = {e["step"]: e["grad_norm"] for e in events if e["event"] == "step"}
        first = [totals[k] for k in range(1, claim["first"] + 1)]
        late = sum(v > claim["max_norm"] for k, v in totals.items() if k >= claim["late_from"])
        assert min(first) > claim["max_norm"] and late >= claim["late_min"], (claim, first, late)
        for e in stats:
            total = math.sqrt(sum(v * v for v in e["grad_norms"].values()))
            assert math.isclose(total, totals[e["step"]], rel_tol=1e-9), (claim, e["step"])
    elif kind == "first_sample":
        sample = stats[0]["sample"]
        assert claim["word"] in sample.lower().split() and sample.count(" ") >= claim["spaces"], \
            (claim, sample)
    elif kind == "more_words":
        vocabulary = {w.lower() for w in re.findall(r"[A-Za-z]{2,}", corpus)}
        words = [_words(e["sample"], vocabulary) for e in stats]
        half = len(words) // 2
        assert sum(words[half:]) / (len(words) - half) > sum(words[:half]) / half \
            and words[-1] > words[0], (claim, words)
    else:
        raise ValueError(f"unknown claim kind {kind!r}")
