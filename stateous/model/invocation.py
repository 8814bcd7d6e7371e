"""How the running `stateous` command was started, so that a hint names a command that works.

A hint such as "then run: stateous supervise box" is wrong for someone who runs the
one-file `stateous.pyz` and has no `stateous` on PATH. `invoked_as` gives the words to
type instead: the installed entry point, `python -m stateous`, a checkout's
`stateous.py`, or the pyz, each as the user gave its path. It lives in `model`, the
part that every other part may import, because hints come from the command line, the
compiler's templates and the supervisor's errors alike. It only reads `sys`.
"""

from __future__ import annotations

import os
import shlex
import sys
import zipimport

#: The words of the installed entry point, and of anything that is none of the others.
INSTALLED = "stateous"
#: The words of `python -m stateous`.
AS_MODULE = "python -m stateous"


def invoked_as() -> str:
    """Return the words that start this command again, e.g. `python3 dist/stateous.pyz`."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name == "stateous.__main__":
        return AS_MODULE
    script = sys.argv[0] if sys.argv else ""
    from_zip = isinstance(getattr(main, "__loader__", None), zipimport.zipimporter)
    if from_zip or os.path.basename(script) == "stateous.py":
        return f"python3 {shlex.quote(script)}"
    return INSTALLED
