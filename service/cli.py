"""``glassllm-sandbox --host --port --workers``: serve the sandbox with uvicorn."""

from __future__ import annotations

import argparse

from glassllm.cli import _int_type

# uvicorn's own names (uvicorn.config.LOG_LEVELS), written here so a bad one is a usage
# error before uvicorn is imported, not a KeyError traceback from inside it.
LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")


def _int_in(low: int, high: int | None, rule: str):
    """An argparse ``type=``: an integer in [low, high]; anything else exits 2 naming it
    (the library CLI's integer type, bounded above too)."""
    at_least = _int_type(low, rule)

    def parse(text: str) -> int:
        value = at_least(text)
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"must be {rule}, got {text!r}")
        return value

    return parse


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="glassllm-sandbox", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    # a port past 65535 is not an error to the OS: it binds port % 65536 (70000 → 4464)
    parser.add_argument("--port", type=_int_in(1, 65535, "a TCP port from 1 to 65535"),
                        default=8000, help="1 to 65535 (default 8000)")
    parser.add_argument("--workers", type=_int_in(1, None, "a positive integer"), default=1,
                        help="worker processes, ≥ 1 (default 1)")
    parser.add_argument("--log-level", default="info", choices=LOG_LEVELS,
                        help="uvicorn's log level (default info)")
    args = parser.parse_args(argv)
    try:
        import uvicorn

        import service.app  # noqa: F401 - fail here, with the friendly sentence
    except ImportError as exc:
        raise SystemExit(f"glassllm-sandbox needs the service extra: pip install"
                         f" 'glassllm[service]' ({exc})") from None
    from service.settings import Settings, SettingsError
    try:
        Settings()              # a bad GLASSLLM_* variable stops here, named, not in a worker
    except SettingsError as exc:
        raise SystemExit(f"glassllm-sandbox: {exc}") from None
    uvicorn.run("service.app:create_app", factory=True, host=args.host, port=args.port,
                workers=args.workers, log_level=args.log_level, access_log=False)


if __name__ == "__main__":
    main()
