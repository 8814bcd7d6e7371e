"""The dashboard at `/ui/`: which files it has, their bytes, and the headers they go out with.

The files ship inside the package (also inside the pyz), so they are read with
`importlib.resources`, once each. They hold no data and are open to every caller,
as `/health` is; the page's script asks the API for everything, with the user's
secret when authentication is on. Every file goes out with a Content-Security-Policy
that allows only this origin's own script and style (no inline script, no other
site, no framing), so that a value shown on the page cannot run as code. Only the
names of `FILES` are served; any other name is not found. Nothing here speaks HTTP.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

PACKAGE = "stateous.control.http.dashboard"
#: The page that `/ui/` answers.
INDEX = "index.html"
#: Every file of the dashboard by its name under `/ui/`, with its media type.
FILES = {
    INDEX: "text/html; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "draw.js": "text/javascript; charset=utf-8",
    "plans.js": "text/javascript; charset=utf-8",
    "icon.svg": "image/svg+xml",
}
POLICY = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    )
)
#: The headers of every file: the policy, no guessing of media types, no framing, no
#: referrer sent elsewhere, and a check with the server before a kept copy is used.
HEADERS = {
    "Content-Security-Policy": POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


@cache
def content(name: str) -> bytes | None:
    """The bytes of a file of the dashboard, or None when it has no file of that name."""
    if name not in FILES:
        return None
    return resources.files(PACKAGE).joinpath(name).read_bytes()
