"""Limits of the Train view's endpoints (issue 15), each set by GLASSLLM_<NAME> like H5.

Kept apart from ``glassllm_service.settings`` so the training routes stay one module that can be
removed whole; a bad value stops the app at startup with a `SettingsError` naming it.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from glassllm_service.settings import ENV_PREFIX, StrictSettings


class TrainSettings(StrictSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, frozen=True, extra="ignore")

    max_training_runs: Annotated[int, Field(ge=0, le=64)] = 2
    """Training runs at once in one worker process; one more is refused with 429 (0: the
    sandbox trains nothing)."""
    max_train_steps: Annotated[int, Field(ge=1, le=1_000_000)] = 2000
    """Steps of one run (422 above)."""
    max_parameters: Annotated[int, Field(ge=1, le=100_000_000)] = 500_000
    """Weights of a model to train or to run attention on, from its size (413 above)."""
    max_corpus_bytes: Annotated[int, Field(ge=1, le=100_000_000)] = 200_000
    """UTF-8 bytes of a pasted corpus (413 above); the shipped corpus is always allowed."""
    max_train_seconds: Annotated[float, Field(gt=0, le=86_400)] = 300.0
    """Wall time of one run; past it the run stops with an ``error`` event naming it."""
    max_train_batch: Annotated[int, Field(ge=1, le=4096)] = 64
    """Windows per step (422 above)."""
