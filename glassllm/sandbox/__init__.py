"""The sandbox's request machinery, with no web framework: what turns a request into the
book's ops and back.

- `glassllm.sandbox.registry`: the op table (inputs, shape plan, cost, examples) and the
  one request path (`prepare`: every check, no work; `run`: compute only);
- `glassllm.sandbox.expr`: expressions of registry ops, parsed with a whitelisted `ast`,
  every node's value and gradient;
- `glassllm.sandbox.wire`: arrays as JSON or exact base64, both ways;
- `glassllm.sandbox.compare`: a claimed array against the sandbox's own, element by element;
- `glassllm.sandbox.examples`: Part L's examples as ready requests for the page (the
  lessons' are `glassllm.course.lesson_requests`, read from the course's files);
- `glassllm.sandbox.limits`, `glassllm.sandbox.runtime`, `glassllm.sandbox.float_warnings`:
  the size limits of one request, the allocator tuning, NumPy's warnings per request.

The book never imports from here; the HTTP service (`glassllm_service`) and a notebook do.
"""
