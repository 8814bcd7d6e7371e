"""The starter workflow that `stateous init workflow NAME` writes.

It is the `orders` example (draft, then review, with a guard on the verdict) under
the name the user chose, with msgspec models, and it compiles as written.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from string import Template

from stateous._version import __version__

_TEMPLATES = files("stateous.compiler.templates")

#: The files of a starter workflow's folder, and the template of each.
FILES = {
    "flow.py": "flow.py.tmpl",
    "schemas.py": "schemas.py.tmpl",
    "pyproject.toml": "workflow-pyproject.toml.tmpl",
}


def uv_sources(stateous_path: Path | None) -> str:
    """Return the pyproject table that points `stateous` at a local checkout, or ''."""
    if stateous_path is None:
        return ""
    return (
        "\n# A local checkout of Stateous: delete this table to use the released package.\n"
        "[tool.uv.sources]\n"
        f'stateous = {{ path = "{stateous_path.resolve().as_posix()}", editable = true }}\n'
    )


def render(file_name: str, name: str, folder: str, stateous_path: Path | None = None) -> str:
    """Return the text of one starter file."""
    template = Template(_TEMPLATES.joinpath(FILES[file_name]).read_text(encoding="utf-8"))
    text = template.substitute(
        name=name, folder=folder, version=__version__, sources=uv_sources(stateous_path)
    )
    return text.rstrip("\n") + "\n"
