"""One router per resource, each route a few lines (FastAPI "Bigger Applications"):

- `ops`: ``/api/v1/ops`` — the registry, one op, and running one (its POST);
- `expressions`: ``/api/v1/eval``, ``/api/v1/examples``, ``/api/v1/lessons``;
- `tools`: ``/api/v1/batch`` and ``/api/v1/check``;
- `train`: ``/api/v1/train`` and ``/api/v1/model/attention``;
- `health`: ``/healthz``, ``/readyz``, ``/metrics``;
- `pages`: the playground at ``/`` and Swagger UI at ``/docs``; `contract`: the contract
  at ``/docs/contract/``; `dist`: the sandbox's own wheel at ``/dist/``.

A route receives its input read and its services given (`glassllm_service.deps`) and hands
the work to its kind of request (`glassllm_service.requests`); no route imports another.
"""
