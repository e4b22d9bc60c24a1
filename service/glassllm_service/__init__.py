"""The gradient sandbox: glassllm's ops over HTTP (SPEC Part H).

`service.app.create_app(settings)` builds the FastAPI app; `glassllm-sandbox` serves it.
"""
