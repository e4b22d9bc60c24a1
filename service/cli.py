"""``glassllm-sandbox --host --port --workers``: serve the sandbox with uvicorn."""

from __future__ import annotations

import argparse


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="glassllm-sandbox", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--log-level", default="info")
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
