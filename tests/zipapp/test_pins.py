"""The wheels that the pyz ships lie within pyproject.toml's ranges, bounds included."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import build_zipapp

PYPROJECT = Path(build_zipapp.__file__).resolve().parent / "pyproject.toml"


def test_every_pinned_wheel_is_within_the_range_that_pyproject_allows() -> None:
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    required = [*project["dependencies"], *project["optional-dependencies"]["postgres"]]
    ranges = {canonicalize_name(req.name): req.specifier for req in map(Requirement, required)}
    ranges[canonicalize_name("psycopg-binary")] = ranges[canonicalize_name("psycopg")]
    pins = {
        **build_zipapp.COMPILED,
        **build_zipapp.PURE,
        **build_zipapp.PURE_PART,
        **build_zipapp.POSTGRES_COMPILED,
        **build_zipapp.POSTGRES_PURE,
    }
    outside = [
        f"build_zipapp.py ships {name} {pinned}, outside pyproject.toml's {name}{allowed}"
        for name, pinned in pins.items()
        if (allowed := ranges.get(canonicalize_name(name))) is not None
        and not allowed.contains(pinned)
    ]
    assert not outside, "\n".join(outside)
