"""Control characters: which ones a name or key may not hold, and how a log line shows them.

One set serves both rules: C0 (including CR and LF), DEL, C1 (U+0080 to U+009F, where
U+0085 is a line break to some readers) and the Unicode line and paragraph separators
(U+2028, U+2029), which start a new line in many viewers.
"""

import re

CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def has_control(text: str) -> bool:
    """Whether `text` holds a control character of the set above."""
    return CONTROL.search(text) is not None


def _escaped(match: re.Match[str]) -> str:
    code = ord(match[0])
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """`text` with each control character written as an escape (`\\x0a`, `\\u2028`), so
    that a value from a request stays on its log line and cannot forge another."""
    return CONTROL.sub(_escaped, text)
