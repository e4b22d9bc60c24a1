"""The sandbox's signature on the weights its own training runs give back (course mode).

A course sandbox's ``done`` event carries its weights with a ``"signature"``: the
HMAC-SHA256 of their format, config and every tensor (name, shape, data), under a key
derived from ``GLASSLLM_COURSE_SALT``. ``POST /api/v1/model/attention`` reads signed
weights as the sandbox's own — numbers a run trained from a seed, none of them chosen by
the student — and any other weights as numbers the student chose, which an open
exercise's hiding refuses to run its hidden ops on (docs/modes.md). Nothing is stored:
every worker, replica and training child derives the same key from the salt; a changed
bit of any tensor, or of the config, makes the signature another's.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

import orjson

__all__ = ["key_of", "sign", "signed"]


def key_of(salt: str) -> bytes:
    """The signing key of a course: derived from its salt, never the salt itself."""
    return hmac.new(salt.encode("utf-8"), b"glassllm trained weights 1",
                    hashlib.sha256).digest()


def _digest(weights: dict[str, Any], key: bytes) -> str:
    mac = hmac.new(key, orjson.dumps(weights["format"]), hashlib.sha256)
    mac.update(orjson.dumps(weights["config"], option=orjson.OPT_SORT_KEYS))
    for name in sorted(weights["tensors"]):
        item = weights["tensors"][name]
        mac.update(orjson.dumps([name, item["shape"]]))
        mac.update(item["data"].encode("ascii"))
    return mac.hexdigest()


def sign(weights: dict[str, Any], key: bytes) -> dict[str, Any]:
    """`weights` (``encode_weights``' dict) with its ``signature``."""
    return {**weights, "signature": _digest(weights, key)}


def signed(weights: Any, key: bytes) -> bool:
    """Whether `weights` carry this course's signature of exactly themselves (compared in
    constant time); anything malformed is not signed."""
    if not isinstance(weights, dict) or not isinstance(weights.get("signature"), str):
        return False
    try:
        expected = _digest(weights, key)
    except (KeyError, TypeError, AttributeError, UnicodeEncodeError, orjson.JSONEncodeError):
        return False
    return hmac.compare_digest(expected.encode(),
                               weights["signature"].encode("utf-8", "replace"))
