"""The control plane, in two wings: the engine's (engine, moves, checks, store, clock, and
the operations beside them) and `http/` (the server, the app, its route table, access,
streams, metrics, OpenAPI and the dashboard); `serve` joins them into one process.

It never imports the supervisor; the two sides meet only over HTTP.
"""
