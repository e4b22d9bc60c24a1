"""Training a GlassLM: the loop the ``glassllm train`` command and the sandbox's Train view
share, as a stream of events, with the weights as JSON and attention maps.

- `glassllm.training.stream`: ``train_steps`` (the loop), ``train_events`` (the page's
  stream), ``encode_weights`` / ``decode_weights``, ``attention_maps``;
- `glassllm.training.loop`: ``train`` (what ``glassllm train`` runs) and the corpus readers;
- ``data/corpus.txt``: the shipped corpus.
"""

from glassllm.training.loop import TrainResult, corpus_text, default_corpus, read_corpus, train
from glassllm.training.stream import (
    OPTIMIZERS,
    StepInfo,
    TrainingDiverged,
    WeightsError,
    attention_maps,
    count_parameters,
    decode_weights,
    encode_weights,
    get_batch,
    next_token_loss,
    param_group,
    sample,
    train_events,
    train_steps,
)

__all__ = ["OPTIMIZERS", "StepInfo", "TrainResult", "TrainingDiverged", "WeightsError",
           "attention_maps", "corpus_text", "count_parameters", "decode_weights",
           "default_corpus", "encode_weights", "get_batch", "next_token_loss", "param_group",
           "read_corpus", "sample", "train", "train_events", "train_steps"]
