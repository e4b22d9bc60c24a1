"""A byte-level tokenizer: the token ids of a text are its UTF-8 bytes (V = 256).

No vocabulary file, no merges, no unknown token: every string encodes, and
``decode(encode(s)) == s`` exactly for every Python string without lone surrogates.
"""

from __future__ import annotations

import numpy as np

from glassllm.checks import id_array

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
        """str → int64 ids (n,), one per UTF-8 byte. TypeError if ``text`` is not a str
        (bytes are not decoded by guess)."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        return np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.int64)

    def decode(self, ids, errors: str = "replace") -> str:
        """ids (any shape, any integer dtype) → str. Sampled byte sequences may be invalid
        UTF-8: by default such bytes become U+FFFD; pass ``errors="strict"`` to raise.

        Raises: TypeError naming the first id that is not an integer (104.9, 104.0, True:
        nothing is truncated or rounded); ValueError naming the first id outside
        [0, 256), with its position and value.
        """
        ids = id_array(ids, "ids", self.vocab_size).reshape(-1)
        return ids.astype(np.uint8).tobytes().decode("utf-8", errors=errors)
