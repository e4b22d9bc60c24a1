"""Cases the page's tests and bench/page.py share, built the same way every time."""

from __future__ import annotations

import numpy as np

CAUSAL = [[False, True, True], [False, False, True], [False, False, False]]


def forty_node_case() -> dict:
    """A transformer block written out, as a permalink's case: two causal heads, a residual,
    a gated MLP and the loss; 42 nodes, of which two constants fold into their consumers'
    labels (× 0.5), so 40 boxes."""
    rng = np.random.default_rng(0)

    def var(*shape):
        return {"value": np.round(rng.normal(size=shape) * 0.5, 2).tolist()}

    def head(q, k, v):
        return f"softmax(masked_fill((x @ {q}) @ (x @ {k}).T * 0.5, m, -inf)) @ (x @ {v})"

    y = f"({head('qa', 'ka', 'va')} + {head('qb', 'kb', 'vb')}) @ wo + x"
    variables = {"x": var(3, 4), "qa": var(4, 2), "ka": var(4, 2), "va": var(4, 4),
                 "qb": var(4, 2), "kb": var(4, 2), "vb": var(4, 4), "wo": var(4, 4),
                 "w1": var(4, 6), "w3": var(4, 6), "w2": var(6, 4),
                 "t": {"value": [1, 3, 0]}, "m": {"value": CAUSAL}}
    return {"mode": "expr", "expression": f"cross_entropy((silu(({y}) @ w1) * (x @ w3)) @ w2, t)",
            "variables": variables}
