"""A batch of prompts (B, n) is never flattened into one sequence: every function that takes
ids either works row by row, as PyTorch's and Hugging Face's do, or refuses the batch with
an error that says what to do.

| function | a batch (B, n) |
|---|---|
| `GlassLM.generate` | (B, n + k): each row continued on its own |
| `GlassLM.forward`, `GlassLM.loss` | (B, n) is their shape |
| `ByteTokenizer.decode` | refused, naming `decode_batch` (one string per row) |
| `attention_maps` | refused: the maps are per prompt |
| `get_batch`, `train` (a token stream) | refused: join the documents first |
| `embedding`, `getitem` (ops) | any shape by definition: a gather |
"""

from __future__ import annotations

import numpy as np
import pytest

from glassllm.layers import GlassConfig, GlassLM
from glassllm.tokenizer import ByteTokenizer
from glassllm.training.loop import train
from glassllm.training.stream import attention_maps, get_batch

CONFIG = GlassConfig(d_model=8, n_layers=1, n_heads=2, n_kv_heads=1, ffn_hidden=8,
                     max_seq_len=8, seed=4)
PROMPTS = np.array([[72, 105, 32], [84, 104, 101], [0, 255, 10]])  # (B, n) = (3, 3)


@pytest.mark.parametrize("kv_cache", [True, False])
def test_generate_continues_each_row_of_a_batch(kv_cache):
    model = GlassLM(CONFIG)
    out = model.generate(PROMPTS, 5, temperature=0, kv_cache=kv_cache)
    assert out.shape == (3, 3 + 5) and out.dtype == np.int64
    for b, row in enumerate(PROMPTS):  # greedy: each row is exactly its own generation
        np.testing.assert_array_equal(out[b], model.generate(row, 5, temperature=0))
    np.testing.assert_array_equal(out[:, :3], PROMPTS)  # once: one flat (9 + 5,) sequence


def test_sampling_a_batch_draws_row_after_row_from_one_generator():
    model = GlassLM(CONFIG)
    out = model.generate(PROMPTS, 6, temperature=1.0, top_k=20, rng=np.random.default_rng(3))
    rng = np.random.default_rng(3)
    rows = [model.generate(row, 6, temperature=1.0, top_k=20, rng=rng) for row in PROMPTS]
    np.testing.assert_array_equal(out, np.stack(rows))
    again = model.generate(PROMPTS, 6, temperature=1.0, top_k=20, rng=np.random.default_rng(3))
    np.testing.assert_array_equal(out, again)
    assert model.generate(PROMPTS[:0], 4, temperature=0).shape == (0, 3 + 4)


@pytest.mark.parametrize("ids", [np.array(5), np.zeros((1, 2, 3), dtype=int)],
                         ids=["0-d", "3-D"])
def test_generate_refuses_other_shapes_naming_them(ids):
    with pytest.raises(ValueError, match=r"one prompt \(n,\) or a batch of prompts \(B, n\), "
                                         rf"got shape {re_shape(ids.shape)}"):
        GlassLM(CONFIG).generate(ids, 2)


def re_shape(shape: tuple) -> str:
    return str(shape).replace("(", r"\(").replace(")", r"\)")


def test_decode_refuses_a_batch_and_decode_batch_gives_a_string_per_row():
    tok = ByteTokenizer()
    with pytest.raises(ValueError, match=r"one text \(n,\), got shape \(2, 2\); decode_batch"):
        tok.decode([[104, 105], [33, 33]])
    assert tok.decode_batch([[104, 105], [33, 33]]) == ["hi", "!!"]
    assert tok.decode_batch(np.array([[195, 169], [255, 65]], dtype=np.uint8)) == ["é", "\ufffdA"]
    assert tok.decode(104) == "h" and tok.decode([104, 105]) == "hi"
    with pytest.raises(ValueError, match=r"a batch \(B, n\), got shape \(2,\)"):
        tok.decode_batch([104, 105])
    with pytest.raises(TypeError, match=r"ids\[1, 0\] = 1.5"):
        tok.decode_batch([[104], [1.5]])


def test_attention_maps_refuse_a_batch_and_never_truncate_a_float():
    model = GlassLM(CONFIG)
    with pytest.raises(ValueError, match=r"one prompt \(n,\), got shape \(3, 3\).*per row"):
        attention_maps(model, PROMPTS)
    with pytest.raises(TypeError, match=r"ids\[1\] = 104.9 is not an integer id"):
        attention_maps(model, [72, 104.9, 3])  # once truncated to 104, silently
    assert attention_maps(model, PROMPTS[0])["probs"].shape == (1, 2, 3, 3)


def test_a_token_stream_must_be_one_stream():
    data = np.arange(40).reshape(2, 20)  # two documents
    with pytest.raises(ValueError, match=r"one token stream \(T,\), got shape \(2, 20\)"):
        get_batch(data, 2, 4, np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"one token stream"):
        train(GlassLM(CONFIG), data, steps=1, batch_size=2)
