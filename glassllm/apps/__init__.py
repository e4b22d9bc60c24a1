"""The programs built on the library: the ``glassllm`` command (`glassllm.apps.cli`) and the
HTTP client of a running sandbox (`glassllm.apps.client`, imported as ``glassllm.client``).
"""
