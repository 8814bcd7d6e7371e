"""The compiler: a `flow.py` in, a checked graph document out.

It loads the user's workflow, checks every rule (reachability, guards, parallel
states), proves that guards on one state and event never overlap, and builds the
graph file. It needs neither the control plane nor the supervisor.
"""
