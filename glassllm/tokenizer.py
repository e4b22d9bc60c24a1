"""A byte-level tokenizer: the token ids of a text are its UTF-8 bytes (V = 256).

No vocabulary file, no merges, no unknown token: every string encodes, and
``decode(encode(s)) == s`` exactly for every Python string without lone surrogates.
"""

from __future__ import annotations

import numpy as np

from glassllm.errors import id_array

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
        """ids (n,) (or one id), any integer dtype → str. Sampled byte sequences may be
        invalid UTF-8: by default such bytes become U+FFFD; pass ``errors="strict"`` to
        raise.

        Raises: ValueError for a batch (B, n), which is not one text (`decode_batch` gives
        a string per row; a batch is never run together into one string), or any other
        shape; TypeError naming the first id that is not an integer (104.9, 104.0, True:
        nothing is truncated or rounded); ValueError naming the first id outside
        [0, 256), with its position and value.
        """
        ids = id_array(ids, "ids", self.vocab_size)
        if ids.ndim > 1:
            hint = "; decode_batch gives one string per row" if ids.ndim == 2 else ""
            raise ValueError(f"ids must be one text (n,), got shape {ids.shape}{hint}")
        return ids.reshape(-1).astype(np.uint8).tobytes().decode("utf-8", errors=errors)

    def decode_batch(self, ids, errors: str = "replace") -> list[str]:
        """A batch of ids (B, n) → B strings, row by row (as `decode`).

        Raises: ValueError unless ids is 2-D; TypeError/ValueError as `decode`.

        Example:
            >>> ByteTokenizer().decode_batch([[104, 105], [33, 33]])
            ['hi', '!!']
        """
        ids = id_array(ids, "ids", self.vocab_size)
        if ids.ndim != 2:
            raise ValueError(f"ids must be a batch (B, n), got shape {ids.shape}")
        return [row.astype(np.uint8).tobytes().decode("utf-8", errors=errors) for row in ids]
