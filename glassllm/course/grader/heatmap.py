"""A small PNG of where the wrong elements are, written with the standard library's
zlib and struct (no plotting package): one panel per answer, one square per element
(leading axes flattened into rows), right in blue and wrong in orange, Okabe and Ito's
colour-blind-safe pair, told apart by lightness too (so also in grey), on a grey grid.

It shows positions only, never a number.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

__all__ = ["RIGHT", "WRONG", "heatmap", "png"]

RIGHT = (0, 114, 178)              # Okabe-Ito blue
WRONG = (230, 159, 0)              # Okabe-Ito orange
GRID = (200, 200, 200)
BACK = (255, 255, 255)
MAX_SIDE = 480                     # pixels of the largest panel side
MAX_CELLS = 96                     # rows or columns drawn; beyond, the panel is cropped


def png(rgb: np.ndarray) -> bytes:
    """An (H, W, 3) uint8 image as PNG bytes (8-bit truecolour, no interlace).

    Example:
        >>> png(np.zeros((1, 1, 3), np.uint8))[:8]
        b'\\x89PNG\\r\\n\\x1a\\n'
    """
    h, w, _ = rgb.shape
    rows = np.concatenate([np.zeros((h, 1), np.uint8), rgb.reshape(h, w * 3)], axis=1)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows.tobytes(), 9)) + chunk(b"IEND", b""))


def _panel(wrong: np.ndarray) -> np.ndarray:
    grid = np.atleast_2d(wrong.reshape(-1, wrong.shape[-1]) if wrong.ndim else wrong)
    grid = grid[:MAX_CELLS, :MAX_CELLS]
    rows, cols = grid.shape
    cell = max(4, min(24, MAX_SIDE // max(rows, cols)))
    img = np.empty((rows * cell + 1, cols * cell + 1, 3), np.uint8)
    img[:] = GRID
    colours = np.where(grid[..., None], np.array(WRONG, np.uint8), np.array(RIGHT, np.uint8))
    block = np.repeat(np.repeat(colours, cell, axis=0), cell, axis=1)
    inner = np.ones((cell, cell), bool)
    inner[0, :] = inner[:, 0] = False                     # a 1-pixel grid line
    mask = np.tile(inner, (rows, cols))
    img[:-1, :-1][mask] = block[mask]
    return img


def heatmap(wrong: list[np.ndarray]) -> bytes:
    """One PNG of the wrong elements of each answer (boolean arrays, True = wrong), the
    panels side by side with a white gap."""
    panels = [_panel(np.asarray(w, bool)) for w in wrong]
    height = max(p.shape[0] for p in panels)
    gap = np.full((height, 8, 3), BACK, np.uint8)
    parts = []
    for p in panels:
        pad = np.full((height - p.shape[0], p.shape[1], 3), BACK, np.uint8)
        parts += [np.concatenate([p, pad], axis=0), gap]
    return png(np.concatenate(parts[:-1], axis=1))
