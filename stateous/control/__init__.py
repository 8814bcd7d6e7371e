"""The control plane: engine, store, HTTP API and clock.

It never imports the supervisor; the two sides meet only over HTTP.
"""
