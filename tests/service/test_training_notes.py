"""The Train view's "What to notice" notes are true of the page's default run: the run
the page starts with its own default fields (read from static/index.html, completed by
the service as a POST /api/v1/train of those fields is) is trained here, and every claim
of every note (glassllm/training/notes.py) is checked against its events; the page shows
each note's text, word for word."""

from __future__ import annotations

import html
import re

import pytest
from sandbox_server import ROOT
from threadpoolctl import threadpool_limits

from glassllm.layers import GlassConfig
from glassllm.training.notes import NOTES, check, group_kind
from glassllm.training.stream import train_events
from glassllm_service.requests import training_run
from glassllm_service.settings import Settings

PAGE = (ROOT / "static" / "index.html").read_text(encoding="utf-8")


def field(name: str) -> str:
    m = re.search(rf'id="train-{name}"[^>]*value="([^"]+)"', PAGE)
    if m is None:                                  # the optimizer: its first option
        m = re.search(rf'id="train-{name}"><option value="([^"]+)"', PAGE)
    return m.group(1)


def page_default_body() -> dict:
    """What the page's Start sends before a student changes anything (static/js/train.js)."""
    return {"model": {"d_model": int(field("d-model")), "n_layers": int(field("n-layers")),
                      "n_heads": int(field("n-heads")), "n_kv_heads": int(field("n-kv-heads"))},
            "steps": int(field("steps")), "lr": float(field("lr")),
            "batch": int(field("batch")), "seed": int(field("seed")),
            "optimizer": field("optimizer"), "every": int(field("every")), "corpus": None}


@pytest.fixture(scope="module")
def default_run():
    run = training_run.prepare(page_default_body(), Settings())
    kwargs = dict(run.kwargs)
    config = GlassConfig(**kwargs.pop("config"))
    with threadpool_limits(1):      # as the service's child runs it: one BLAS thread
        events = [e for e in train_events(config, **kwargs) if e["event"] != "done"]
    return events, kwargs["corpus"]


@pytest.mark.parametrize("note", NOTES, ids=[n.panel for n in NOTES])
def test_each_note_is_true_of_the_default_run(default_run, note):
    events, corpus = default_run
    assert note.claims, "a note without a claim is not checked"
    for claim in note.claims:
        check(claim, events, corpus)


@pytest.mark.parametrize("note", NOTES, ids=[n.panel for n in NOTES])
def test_the_page_shows_each_note_word_for_word(note):
    m = re.search(rf'<p class="notice" data-note="{note.panel}"><strong>What to notice:'
                  r'</strong>(.*?)</p>', PAGE, re.S)
    assert m, f"no note {note.panel!r} in the Train view"
    assert " ".join(html.unescape(m.group(1)).split()) == note.text


def test_a_false_note_fails_its_check(default_run):
    """The old note said the embedding and the head get the largest gradients: its claim,
    written the same way, fails against the default run (the bars show attention and FFN)."""
    events, _ = default_run
    with pytest.raises(AssertionError):
        check({"kind": "largest", "top": 2, "kinds": ["tok_emb", "head"]}, events)
    with pytest.raises(AssertionError):     # "norms shrink as the loss flattens"
        check({"kind": "grow"}, list(reversed(events)))
    assert group_kind("blocks.1.ffn_norm") == "norm" and group_kind("blocks.0.attn") == "attn"
