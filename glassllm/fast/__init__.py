"""Faster forms of the book's layers, each tested equal to the lines it stands for.

- `glassllm.fast.fused`: ``rms_norm``, ``attention`` and ``swiglu`` as one node each with
  the backward written out, run when a caller names it (``fused=True``: the trainer);
- `glassllm.fast.kvcache`: the key/value cache that ``GlassLM.generate`` uses.

The book (`glassllm.layers`, `glassllm.modules`) runs the composed lines by default; a
student reads those first and comes here to see what a fast path changes and why it gives
the same numbers.
"""
