"""/api/v1/train (an SSE stream) and /api/v1/model/attention.

The stream is parsed with httpx: event order, run ids, the limits (each a 4xx naming its
GLASSLLM_ setting), reproducibility against `glassllm train`, and, on real servers in
subprocesses: a disconnect kills the run's child, two workers with no affinity, and
SIGTERM with a stream open.
"""

from __future__ import annotations

import signal
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient
from training_streams import RUN, TINY, parse_sse, start_server, stop_server, training_children

from glassllm.apps.cli import main as cli_main
from glassllm.layers import GlassConfig, GlassLM
from glassllm.tokenizer import ByteTokenizer
from glassllm.training.loop import default_corpus, train
from glassllm.training.stream import attention_maps, decode_weights, encode_weights
from glassllm_service.app import create_app


@pytest.fixture
def client(monkeypatch):
    def make(**env):
        for key, value in env.items():
            monkeypatch.setenv(f"GLASSLLM_{key.upper()}", str(value))
        return TestClient(create_app())
    return make


def run_events(c: TestClient, body: dict) -> list[tuple[str, dict]]:
    with c.stream("POST", "/api/v1/train", json=body) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        return parse_sse(r.iter_lines())


def test_event_order_run_id_and_fields(client):
    events = run_events(client(), RUN)
    assert [n for n, _ in events] == ["queued", "start", "step", "step", "stats", "step", "step",
                                      "stats", "done"]
    run_ids = {d["run_id"] for _, d in events}
    assert len(run_ids) == 1 and len(run_ids.pop()) == 22  # token_urlsafe(16): 128 bits
    queued = events[0][1]                     # no one ahead: its turn at once
    assert (queued["position"], queued["wait_s"], queued["waiting"]) == (0, 0, 0)
    assert queued["run_s"] > 0 and queued["runs_at_once"] >= 1
    start = events[1][1]
    assert start["parameters"] == 2 * 256 * 8 + (2 * 8 + 64 + 2 * 32 + 64 + 3 * 64) + 8
    assert start["corpus_bytes"] == len(default_corpus().encode())
    assert [d["step"] for n, d in events if n == "step"] == [1, 2, 3, 4]
    stats = events[4][1]
    assert stats["lr"] == 0.01 and stats["sample"].startswith("The ")
    assert set(stats["grad_norms"]) == {"tok_emb", "blocks.0.attn_norm", "blocks.0.attn",
                                        "blocks.0.ffn_norm", "blocks.0.ffn", "norm", "head"}
    done = events[-1][1]
    assert done["step"] == 4 and done["weights"]["format"] == "glassllm-weights/1"


def test_the_service_run_is_the_cli_run_bit_for_bit(client, tmp_path):
    """The same seed and settings give `glassllm train`'s curve and weights."""
    events = run_events(client(), RUN)
    losses = [d["loss"] for n, d in events if n == "step"]
    config = GlassConfig(seed=3, **TINY)
    result = train(GlassLM(config), ByteTokenizer().encode(default_corpus()), steps=4,
                   batch_size=2, lr=0.01, seed=3)
    assert losses == result.losses  # floats through JSON: orjson writes the shortest repr
    out = tmp_path / "cli.npz"
    argv = ["train", "--steps", "4", "--batch-size", "2", "--lr", "0.01", "--seed", "3",
            "--out", str(out)] + [a for k, v in TINY.items()
                                  for a in (f"--{k.replace('_', '-')}", str(v))]
    assert cli_main(argv) == 0
    served = decode_weights(events[-1][1]["weights"]).state_dict()
    with np.load(out) as cli:
        assert sorted(cli.files) == sorted(served)
        for name in cli.files:
            assert cli[name].tobytes() == served[name].tobytes(), name


@pytest.mark.parametrize("env, body, status, setting, field", [
    ({}, {"steps": 2001}, 422, "GLASSLLM_MAX_TRAIN_STEPS", "steps"),
    ({"max_train_steps": 3}, {**RUN, "steps": 4}, 422, "GLASSLLM_MAX_TRAIN_STEPS", "steps"),
    ({}, {"batch": 65}, 422, "GLASSLLM_MAX_TRAIN_BATCH", "batch"),
    ({"max_parameters": 1000}, RUN, 413, "GLASSLLM_MAX_PARAMETERS", "model"),
    ({}, {"model": {"d_model": 512, "n_heads": 8, "n_kv_heads": 8, "ffn_hidden": 2048}},
     413, "GLASSLLM_MAX_PARAMETERS", "model"),
    ({"max_corpus_bytes": 100}, {**RUN, "corpus": "é" * 51}, 413, "GLASSLLM_MAX_CORPUS_BYTES",
     "corpus"),
    ({"max_training_runs": 0}, RUN, 403, "GLASSLLM_MAX_TRAINING_RUNS", None),  # training off
    ({"max_result_elements": 1000}, RUN, 413, "GLASSLLM_MAX_RESULT_ELEMENTS", "batch"),
])
def test_every_limit_is_refused_naming_it(client, env, body, status, setting, field):
    r = client(**env).post("/api/v1/train", json=body)
    assert r.status_code == status
    err = r.json()["error"]
    assert setting in err["message"] and err["input"] == field


def test_the_wall_time_limit_ends_the_stream_with_an_error_naming_it(client):
    events = run_events(client(max_train_seconds=0.05), {**RUN, "steps": 2000})
    assert events[-1][0] == "error"
    assert events[-1][1]["code"] == "time_limit"
    assert "GLASSLLM_MAX_TRAIN_SECONDS" in events[-1][1]["message"]


@pytest.mark.parametrize("body, field", [
    ({"steps": 0}, "steps"), ({"lr": "NaN"}, "lr"), ({"optimizer": "adam"}, "optimizer"),
    ({"model": {"n_heads": 3}}, "model.n_heads"), ({"bogus": 1}, "bogus"),
    ({"corpus": "too short"}, "corpus"), ({"seed": -1}, "seed"),
])
def test_bad_runs_are_422_naming_the_field(client, body, field):
    r = client().post("/api/v1/train", json=body)
    assert r.status_code == 422 and r.json()["error"]["input"] == field


def test_attention_of_trained_weights_matches_the_library(client):
    c = client()
    weights = run_events(c, RUN)[-1][1]["weights"]
    r = c.post("/api/v1/model/attention", json={"weights": weights, "prompt": "Th é"})
    assert r.status_code == 200
    body = r.json()
    assert body["tokens"] == ["T", "h", " ", "\\xc3", "\\xa9"]
    assert body["shape"] == [1, 2, 5, 5]
    expected = attention_maps(decode_weights(weights), ByteTokenizer().encode("Th é"))
    assert np.array(body["probs"]).tobytes() == expected["probs"].tobytes()
    assert np.array(body["grads"]).tobytes() == expected["grads"].tobytes()
    assert body["loss"] == expected["loss"]


def test_attention_of_a_fresh_model_by_seed(client):
    r = client().post("/api/v1/model/attention",
                      json={"seed": 5, "model": TINY, "prompt": "abc"})
    model = GlassLM(GlassConfig(seed=5, **TINY))
    expected = attention_maps(model, ByteTokenizer().encode("abc"))
    assert np.allclose(r.json()["grads"], expected["grads"], rtol=0, atol=0)
    same = encode_weights(model)
    r2 = client().post("/api/v1/model/attention", json={"weights": same, "prompt": "abc"})
    assert r2.json()["probs"] == r.json()["probs"]


@pytest.mark.parametrize("edit, status, field", [
    (lambda b: b.update(prompt="x"), 422, "prompt"),
    (lambda b: b.update(prompt="x" * 9), 422, "prompt"),
    (lambda b: b["weights"]["tensors"].pop("head.weight"), 422, "weights.tensors"),
    (lambda b: b["weights"]["config"].update(d_model=4096, ffn_hidden=4096), 413,
     "weights.config"),
    (lambda b: b.update(weights=[1]), 422, "weights"),
    (lambda b: b["weights"]["config"].update(vocab=10), 422, "weights.config.vocab"),
    (lambda b: b["weights"]["config"].update(max_seq_len=10**6), 422,
     "weights.config.max_seq_len"),
])
def test_attention_refusals_name_the_field(client, edit, status, field):
    body = {"weights": encode_weights(GlassLM(GlassConfig(**TINY))), "prompt": "abc"}
    edit(body)
    r = client().post("/api/v1/model/attention", json=body)
    assert r.status_code == status, r.text
    assert r.json()["error"]["input"] == field


# --------------------------------------------------------------------------------------
# Real servers in subprocesses
# --------------------------------------------------------------------------------------


def wait_until(predicate, limit: float = 30.0) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


@pytest.mark.slow
def test_a_disconnect_cancels_the_run():
    proc, url = start_server()
    try:
        with httpx.stream("POST", f"{url}/api/v1/train", json={**RUN, "steps": 2000},
                          timeout=60) as r:
            lines = r.iter_lines()
            seen = []
            for line in lines:
                seen.append(line)
                if line.startswith("event: step"):
                    break
            assert seen[:2] == ["id: 0", "event: queued"]
            assert training_children(proc.pid)  # the run's child is alive
        # the stream is closed: the child is killed (bounded wait, not a timing assertion)
        assert wait_until(lambda: not training_children(proc.pid))
    finally:
        stop_server(proc)


@pytest.mark.slow
def test_two_workers_train_and_attention_without_affinity():
    """Every request stands alone, so any worker answers any of them."""
    proc, url = start_server(workers=2)
    try:
        def train_run(student: int):
            # two students: one address, so each names itself (one run per client)
            with httpx.stream("POST", f"{url}/api/v1/train", json=RUN, timeout=120,
                              headers={"X-Client-ID": f"student-{student}"}) as r:
                return parse_sse(r.iter_lines())

        with ThreadPoolExecutor(2) as pool:
            runs = list(pool.map(train_run, range(2)))
        for events in runs:
            assert [n for n, _ in events][-1] == "done"
        weights = runs[0][-1][1]["weights"]
        answers = [httpx.post(f"{url}/api/v1/model/attention", timeout=60,
                              json={"weights": weights, "prompt": "The c"}).json()
                   for _ in range(4)]  # new connections: spread over both workers
        assert all(a == answers[0] for a in answers)
        assert answers[0]["shape"] == [1, 2, 5, 5]
        assert runs[0][-1][1]["weights"] == runs[1][-1][1]["weights"]  # same seed, same run
    finally:
        stop_server(proc)


@pytest.mark.slow
def test_sigterm_with_a_stream_open_ends_the_sandbox_quickly(capsys):
    proc, url = start_server()
    try:
        with httpx.stream("POST", f"{url}/api/v1/train", json={**RUN, "steps": 2000},
                          timeout=60) as r:
            for line in r.iter_lines():
                if line.startswith("event: step"):
                    break
            sent = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=10)  # generous bound; the measured time is printed
            took = time.monotonic() - sent
        with capsys.disabled():
            print(f"\nSIGTERM with a training stream open: the sandbox exited in {took:.2f} s")
        assert wait_until(lambda: not training_children(proc.pid), 10)
    finally:
        stop_server(proc)


def test_a_crlf_and_bom_corpus_file_trains_the_cli_and_the_service_on_the_same_bytes(
        client, tmp_path):
    """A Windows file (a BOM, CRLF line ends, non-ASCII): `glassllm train FILE` reads its
    bytes (text mode once turned CRLF into LF: fewer bytes than the service trained on) and
    the service takes the file's text as sent, with or without its BOM; both drop the BOM,
    keep every CR, and give the same curve and weights, bit for bit."""
    raw = b"\xef\xbb\xbf" + "first line\r\nseconde ligne, été\r\n".encode() * 12
    corpus_file = tmp_path / "windows.txt"
    corpus_file.write_bytes(raw)
    out = tmp_path / "cli.npz"
    argv = ["train", str(corpus_file), "--steps", "4", "--batch-size", "2", "--lr", "0.01",
            "--seed", "3", "--out", str(out)] + [a for k, v in TINY.items()
                                                 for a in (f"--{k.replace('_', '-')}", str(v))]
    assert cli_main(argv) == 0
    for sent in (raw.decode("utf-8"), raw.decode("utf-8-sig")):  # with the BOM, without
        events = run_events(client(), {**RUN, "corpus": sent})
        start = next(d for n, d in events if n == "start")
        assert start["corpus_bytes"] == len(raw) - 3   # every CR counted, no BOM
        served = decode_weights(events[-1][1]["weights"]).state_dict()
        with np.load(out) as cli:
            assert sorted(cli.files) == sorted(served)
            for name in cli.files:
                assert cli[name].tobytes() == served[name].tobytes(), name
    expected = train(GlassLM(GlassConfig(seed=3, **TINY)),
                     ByteTokenizer().encode(raw[3:].decode()), steps=4, batch_size=2, lr=0.01,
                     seed=3).losses
    assert [d["loss"] for n, d in events if n == "step"] == expected


def test_a_corpus_that_is_not_utf8_is_refused_the_same_way_by_both(client, tmp_path, capsys):
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("caf\xe9 ".encode("latin-1") * 40)
    with pytest.raises(SystemExit) as exit_:
        cli_main(["train", str(bad), "--steps", "1", "--out", str(tmp_path / "m.npz")])
    assert exit_.value.code == 2
    assert f"{bad} is not UTF-8 text: byte 3 is 0xe9" in capsys.readouterr().err
    r = client().post("/api/v1/train", content=b'{"corpus": "caf\\ud800 ' + b"x" * 40 + b'"}',
                      headers={"Content-Type": "application/json"})
    assert r.status_code in (400, 422) and r.json()["error"]["input"] in ("corpus",
                                                                          "request body")
