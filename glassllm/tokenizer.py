"""A byte-level tokenizer: the token ids of a text are its UTF-8 bytes (V = 256).

No vocabulary file, no merges, no unknown token: every string encodes, and
``decode(encode(s)) == s`` exactly for every Python string without lone surrogates.
"""

from __future__ import annotations

import numpy as np

__all__ = ["ByteTokenizer"]


class ByteTokenizer:
    """Text ↔ byte ids.

    Example:
        >>> tok = ByteTokenizer()
        >>> tok.encode("hé").tolist()          # 'é' is two UTF-8 bytes
        [104, 195, 169]
        >>> tok.decode([104, 195, 169])
        'hé'
    """

    vocab_size = 256

    def encode(self, text: str) -> np.ndarray:
        """str → int64 ids (n,), one per UTF-8 byte."""
        return np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.int64)

    def decode(self, ids, errors: str = "replace") -> str:
        """ids → str. Sampled byte sequences may be invalid UTF-8: by default such bytes
        become U+FFFD; pass ``errors="strict"`` to raise instead."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        if ids.size and (ids.min() < 0 or ids.max() > 255):
            raise ValueError(f"byte ids must be in [0, 255], got range [{ids.min()}, {ids.max()}]")
        return ids.astype(np.uint8).tobytes().decode("utf-8", errors=errors)
