"""The supervisor: the folder, the routines, the outbox and the loops.

It never imports the control plane; the two sides meet only over HTTP.
"""
