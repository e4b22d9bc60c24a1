"""Limits and options (SPEC H5), each settable by an environment variable GLASSLLM_<NAME>."""

import os
from pathlib import Path

from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="GLASSLLM_", frozen=True)

    max_body_bytes: int = 8 * 1024 * 1024
    """Request body size, enforced while reading, before parsing (413)."""
    max_json_depth: int = 32
    """Nesting of [ and { in a request body (422); a 4-D array sits at depth 6."""
    max_array_elements: int = 1_000_000
    """Elements of any one input array (413)."""
    max_result_elements: int = 4_000_000
    """Elements of the output and of every large intermediate, from shapes, before work (413)."""
    max_matmul_madds: int = 1_000_000_000
    """Multiply-adds of every matmul of a request, forward + backward (3x the forward), 413."""
    max_concurrency: int = 2 * (os.cpu_count() or 1)
    """Computations running at once; more are refused with 503 and Retry-After."""
    retry_after_seconds: int = 1
    max_expression_length: int = 2000
    """Characters of a /api/v1/eval expression (422 above)."""
    max_check_elements: int = 2000
    """Elements finite-differenced by /api/v1/eval's "check": true (413 above)."""
    static_dir: Path | None = None
    """Where the page lives; default: the copy shipped in the wheel, else the repo's static/."""
