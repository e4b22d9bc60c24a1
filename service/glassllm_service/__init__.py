"""The gradient sandbox: glassllm's ops over HTTP (SPEC Part H).

`glassllm_service.app.create_app(settings)` builds the FastAPI app; the
``glassllm-sandbox`` command (`glassllm_service.sandbox_cli`) serves it.
"""
