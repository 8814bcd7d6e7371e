"""The Prometheus text exposition format (version 0.0.4), written by hand.

A family is one metric: its name, its type, a line of help, and its samples,
each with its labels. `render` writes the families as a scrape expects them:
`# HELP` and `# TYPE` lines, then one line per sample; a histogram becomes its
cumulative `_bucket` lines (up to `le="+Inf"`), `_sum` and `_count`. Label values
and help texts are escaped as the format says, so any text (a state's name)
can go out. Names are checked when a family is made: a bad one is a mistake of
the code, not of the data.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from stateous.control.histogram import Reading

#: The answer's media type, as Prometheus asks for the text format.
MEDIA_TYPE = "text/plain; version=0.0.4; charset=utf-8"
KINDS = ("counter", "gauge", "histogram")
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
Labels = dict[str, str]


@dataclass
class Family:
    """One metric and its samples: values for a counter or gauge, readings for a histogram."""

    name: str
    kind: str
    help: str
    values: list[tuple[Labels, float]] = field(default_factory=list)
    readings: list[tuple[Labels, Reading]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name) or self.kind not in KINDS:
            raise ValueError(f"{self.name!r} ({self.kind}) is no metric name and type")

    def add(self, value: float, **labels: str) -> None:
        self.values.append((labels, value))

    def add_reading(self, reading: Reading, **labels: str) -> None:
        self.readings.append((labels, reading))


def escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def escape_value(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def number(value: float) -> str:
    """A sample value: whole numbers without a point, infinities and NaN as the format
    spells them."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(float(value))


def sample(name: str, labels: Labels, value: float) -> str:
    """One sample line."""
    if not labels:
        return f"{name} {number(value)}"
    for label in labels:
        if not _LABEL.fullmatch(label) or label.startswith("__"):
            raise ValueError(f"{label!r} is no label name")
    listed = ",".join(f'{label}="{escape_value(text)}"' for label, text in labels.items())
    return f"{name}{{{listed}}} {number(value)}"


def histogram_lines(name: str, labels: Labels, reading: Reading) -> list[str]:
    """The lines of one histogram: its cumulative buckets, then its sum and count."""
    lines = [
        sample(f"{name}_bucket", {**labels, "le": number(bound)}, count)
        for bound, count in zip(reading.bounds, reading.cumulative, strict=True)
    ]
    lines.append(sample(f"{name}_bucket", {**labels, "le": "+Inf"}, reading.count))
    lines.append(sample(f"{name}_sum", labels, reading.total))
    lines.append(sample(f"{name}_count", labels, reading.count))
    return lines


def render(families: list[Family]) -> str:
    """The whole exposition of `families`, each line ended by a newline."""
    lines: list[str] = []
    for family in families:
        lines.append(f"# HELP {family.name} {escape_help(family.help)}")
        lines.append(f"# TYPE {family.name} {family.kind}")
        lines.extend(sample(family.name, labels, value) for labels, value in family.values)
        for labels, reading in family.readings:
            lines.extend(histogram_lines(family.name, labels, reading))
    return "".join(line + "\n" for line in lines)
