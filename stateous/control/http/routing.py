"""A request looked up in the route table (`routes.ROUTES`): whether its path takes its
method, the rule the guard checks, and the resource Falcon routes its path to."""

from __future__ import annotations

from stateous.control.http import resources
from stateous.control.http.access import Rule
from stateous.control.http.routes import ROUTES

#: The rule of each route, by method and path template.
RULES: dict[tuple[str, str], Rule | None] = {
    (route.method, route.path): route.rule for route in ROUTES
}


def _route(method: str, template: str) -> tuple[str, str]:
    """The key of a request's route in `RULES`: `HEAD` is the `GET` of its path."""
    return ("GET" if method == "HEAD" else method, template)


def has_rule(method: str, template: str) -> bool:
    """Whether the path takes the method."""
    return _route(method, template) in RULES


def methods_of(template: str) -> list[str]:
    """The methods that a path takes, for the `Allow` header of a 405: `HEAD` beside `GET`."""
    methods = {method for method, path in RULES if path == template}
    return sorted(methods | {"HEAD"} if "GET" in methods else methods)


def rule_of(method: str, template: str) -> Rule | None:
    """The rule of a route; every route the app serves has one, by the table."""
    return RULES[_route(method, template)]


def paths() -> dict[str, tuple[type[resources.Resource], str | None]]:
    """The resource and responder suffix of each path, in the table's order. Falcon routes
    a path to one resource and suffix for all its methods, so the table gives each path
    one; `ValueError` names a path that it gives two, or a route declared twice."""
    found: dict[str, tuple[type[resources.Resource], str | None]] = {}
    for route in ROUTES:
        served = (route.resource, route.suffix)
        if found.setdefault(route.path, served) != served:
            raise ValueError(f"{route.path} is served by two resources or suffixes")
    if len(RULES) != len(ROUTES):
        raise ValueError("a route is declared twice")
    return found
