"""The root error of a workflow definition.

A `DefinitionError` is raised the moment `flow.py` misuses the model (a bad name,
a duplicate state, a bad duration), so the message can name the mistake while the
line that made it is still on the stack.
"""


class DefinitionError(ValueError):
    """A workflow was defined in a way that Stateous cannot accept."""


class Failure(Exception):
    """An expected failure: its message is one sentence for the person who ran the command.

    The command line prints it as `error: <sentence>` and exits 1, never with a
    traceback; every part raises its own subclass.
    """
