"""The pure shared model: workflows, durations, names, the guard language, the graph file.

Both sides of Stateous read these types: the compiler writes the graph file from
them, the control plane serves it, the supervisor's contract mirrors it. This
package imports no other part of `stateous` and does no I/O beyond JSON text.
"""
