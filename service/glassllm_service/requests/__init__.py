"""One module per kind of request: its envelope, its prepare step (every check, no work)
and its run step (compute only, inside a compute slot). No module here imports a route.
"""
