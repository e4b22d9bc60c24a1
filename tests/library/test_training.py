"""glassllm.training.stream: the event stream, weights as JSON, attention maps and their gradients,
and the KV cache of ``generate``."""

from __future__ import annotations

import numpy as np
import pytest

from glassllm import Tensor
from glassllm.layers import ATTENTION_PROBE, GlassConfig, GlassLM
from glassllm.tokenizer import ByteTokenizer
from glassllm.training.loop import default_corpus, train
from glassllm.training.stream import (
    WeightsError,
    attention_maps,
    count_parameters,
    decode_weights,
    encode_weights,
    next_token_loss,
    train_events,
)

TINY = GlassConfig(d_model=8, n_layers=2, n_heads=2, n_kv_heads=1, ffn_hidden=12,
                   max_seq_len=16, seed=3)


@pytest.mark.parametrize("temperature, top_k", [(0.0, None), (0.8, None), (1.0, 5)])
def test_kv_cache_gives_the_same_tokens(temperature, top_k):
    # 40 new tokens after 3: the window (16) fills and slides, so the rebuild path runs too
    model = GlassLM(TINY)
    prompt = ByteTokenizer().encode("The")
    runs = [model.generate(prompt, 40, temperature=temperature, top_k=top_k,
                           rng=np.random.default_rng(7), kv_cache=cache) for cache in (True, False)]
    assert runs[0].tolist() == runs[1].tolist()
    assert len(runs[0]) == 43


def test_kv_cache_logits_match_the_full_forward():
    from glassllm.fast.kvcache import next_logits_cached

    model = GlassLM(GlassConfig(seed=1))
    tokens = ByteTokenizer().encode("Hello there, friend").tolist()
    step = next_logits_cached(model)
    for t in range(2, len(tokens) + 1):
        cached = step(tokens[:t])
        full = model(np.array([tokens[:t]])).data[0, -1]
        np.testing.assert_allclose(cached, full, rtol=1e-10, atol=1e-12)


def test_count_parameters_matches_the_model():
    for config in (TINY, GlassConfig()):
        assert count_parameters(config) == sum(p.data.size for p in GlassLM(config).parameters())
    assert count_parameters(GlassConfig()) == 131_392  # 2·V·d + 2 blocks of 49 280 + d


def test_weights_round_trip_bit_for_bit():
    model = GlassLM(TINY)
    obj = encode_weights(model)
    back = decode_weights(obj)
    assert back.config == model.config
    for (name, p), (name2, q) in zip(model.named_parameters(), back.named_parameters(),
                                     strict=True):
        assert name == name2 and p.data.tobytes() == q.data.tobytes()


@pytest.mark.parametrize("edit, where", [
    (lambda o: o.update(format="x"), "weights"),
    (lambda o: o["config"].update(d_model=-1), "weights.config.d_model"),
    (lambda o: o["config"].update(n_heads=3), "weights.config"),
    (lambda o: o["config"].update(bogus=1), "weights.config"),
    (lambda o: o["tensors"].pop("head.weight"), "weights.tensors"),
    (lambda o: o["tensors"]["head.weight"].update(shape=[1, 2]), "weights.tensors.head.weight"),
    (lambda o: o["tensors"]["head.weight"].update(data="@@"), "weights.tensors.head.weight"),
    (lambda o: o["tensors"]["head.weight"].update(data="AAAA"), "weights.tensors.head.weight"),
])
def test_bad_weights_name_the_field(edit, where):
    obj = encode_weights(GlassLM(TINY))
    edit(obj)
    with pytest.raises(WeightsError) as info:
        decode_weights(obj)
    assert info.value.input == where


def test_weights_over_the_parameter_limit_are_refused_before_allocating():
    obj = encode_weights(GlassLM(TINY))
    obj["config"]["d_model"] = 4096
    with pytest.raises(WeightsError, match="GLASSLLM_MAX_PARAMETERS"):
        decode_weights(obj, max_parameters=100_000)


def test_non_finite_weights_are_refused():
    model = GlassLM(TINY)
    model.head.weight.data = np.full_like(model.head.weight.data, np.nan)
    with pytest.raises(WeightsError, match="non-finite"):
        decode_weights(encode_weights(model))


def test_attention_maps_shapes_and_rows():
    model = GlassLM(TINY)
    ids = ByteTokenizer().encode("abcab")
    out = attention_maps(model, ids)
    L, H, n = TINY.n_layers, TINY.n_heads, 5
    assert out["probs"].shape == out["grads"].shape == (L, H, n, n)
    np.testing.assert_allclose(out["probs"].sum(-1), 1.0, rtol=1e-12)
    assert np.all(np.triu(out["probs"], k=1) == 0)  # causal: no weight on the future
    assert np.all(out["grads"][:, :, -1, :] == 0)  # the last row predicts nothing
    assert out["loss"] == pytest.approx(next_token_loss(model, ids).item(), rel=1e-15)


def test_attention_gradients_match_finite_differences():
    # L3.5, L0.5: nudge one probability P[l, h, i, j] through the layer's probe and watch
    # the next-token loss; central differences in float64 against the autograd's ∂loss/∂P.
    model = GlassLM(TINY)
    ids = ByteTokenizer().encode("hello")
    grads = attention_maps(model, ids)["grads"]
    eps = 1e-6

    def loss_with(layer, h, i, j, delta):
        seen = []

        def nudge(weights: Tensor) -> Tensor:
            seen.append(None)
            if len(seen) - 1 != layer:
                return weights
            bump = np.zeros(weights.shape)
            bump[0, h, i, j] = delta
            return weights + Tensor(bump)

        token = ATTENTION_PROBE.set(nudge)
        try:
            return next_token_loss(model, ids).item()
        finally:
            ATTENTION_PROBE.reset(token)

    checked = 0
    for layer in range(TINY.n_layers):
        for h in range(TINY.n_heads):
            for i in range(len(ids)):
                for j in range(i + 1):
                    fd = (loss_with(layer, h, i, j, eps) - loss_with(layer, h, i, j, -eps)) / (
                        2 * eps)
                    assert fd == pytest.approx(grads[layer, h, i, j], rel=1e-5, abs=1e-9)
                    checked += 1
    assert checked == 2 * 2 * 15
    assert np.abs(grads).max() > 1e-3  # not all zero: the check has teeth


def test_train_events_order_and_the_cli_loss_curve_bit_for_bit():
    # train_events (what /api/v1/train streams) and train (what `glassllm
    # train` runs) give the same losses, bit for bit, for the same seed and settings.
    config = GlassConfig(d_model=16, n_layers=1, n_heads=2, n_kv_heads=1, ffn_hidden=32,
                         max_seq_len=16)
    corpus = default_corpus()
    events = list(train_events(config, corpus, steps=6, lr=1e-2, batch=4, seed=5, every=3))
    kinds = [e["event"] for e in events]
    assert kinds == ["start", "step", "step", "step", "stats", "step", "step", "step", "stats",
                     "done"]
    assert [e["step"] for e in events if e["event"] == "step"] == [1, 2, 3, 4, 5, 6]
    stats = events[4]
    assert sorted(stats["grad_norms"]) == ["blocks.0.attn", "blocks.0.attn_norm", "blocks.0.ffn",
                                           "blocks.0.ffn_norm", "head", "norm", "tok_emb"]
    assert stats["sample"].startswith("The ") and stats["lr"] == 1e-2

    import dataclasses
    model = GlassLM(dataclasses.replace(config, seed=5))
    data = ByteTokenizer().encode(corpus)
    result = train(model, data, steps=6, batch_size=4, lr=1e-2, seed=5)
    assert [e["loss"] for e in events if e["event"] == "step"] == result.losses
    done = decode_weights(events[-1]["weights"])
    for p, q in zip(model.parameters(), done.parameters(), strict=True):
        assert p.data.tobytes() == q.data.tobytes()
    assert result.losses[0] == pytest.approx(5.886332669411635, rel=1e-12)  # ≈ ln 256 + 0.34


def test_sgd_runs_and_a_bad_optimizer_is_named():
    config = GlassConfig(d_model=8, n_layers=1, n_heads=2, n_kv_heads=1, ffn_hidden=8,
                         max_seq_len=8)
    events = list(train_events(config, default_corpus(), steps=2, lr=0.1, batch=2,
                               optimizer="sgd", every=0))
    assert [e["event"] for e in events] == ["start", "step", "step", "done"]
    with pytest.raises(ValueError, match="optimizer must be one of adamw, sgd; got 'adam'"):
        list(train_events(config, default_corpus(), steps=1, optimizer="adam"))


@pytest.mark.parametrize("name", ["training.stream", "fast.kvcache"])
def test_module_all_is_complete(name):
    import importlib

    module = importlib.import_module(f"glassllm.{name}")
    public = {"OPTIMIZERS"} if name == "training.stream" else set()  # a tuple: no __module__
    public |= {attr for attr, value in vars(module).items()
              if not attr.startswith("_") and getattr(value, "__module__", None) == module.__name__}
    assert sorted(module.__all__) == module.__all__
    assert set(module.__all__) == public
