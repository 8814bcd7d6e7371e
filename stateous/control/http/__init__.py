"""The HTTP wing of the control plane: everything that speaks HTTP, over the engine."""
