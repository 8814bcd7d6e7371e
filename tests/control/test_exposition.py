"""The Prometheus text format as `exposition.py` writes it, read back by Prometheus's own
parser: escapes, numbers, histograms, and the names it refuses."""

from __future__ import annotations

import math

import pytest
from prometheus_client.parser import text_string_to_metric_families

from stateous.control.histogram import Histogram
from stateous.control.http.exposition import Family, number, render


def test_any_label_text_and_help_come_back_as_they_were() -> None:
    odd = 'a "quoted" \\ back\nslash é/state'
    gauge = Family("stateous_things", "gauge", "Things, with a \\ and a\nnew line.")
    gauge.add(3, state=odd, status="active")
    gauge.add(0.25, state="plain", status="paused")
    [family] = text_string_to_metric_families(render([gauge]))
    assert (family.name, family.type) == ("stateous_things", "gauge")
    assert family.documentation == "Things, with a \\ and a\nnew line."
    assert [(sample.labels, sample.value) for sample in family.samples] == [
        ({"state": odd, "status": "active"}, 3.0),
        ({"state": "plain", "status": "paused"}, 0.25),
    ]


def test_a_counter_keeps_its_total_name() -> None:
    counter = Family("stateous_done_total", "counter", "Done.")
    counter.add(7)
    text = render([counter])
    assert "# TYPE stateous_done_total counter\nstateous_done_total 7\n" in text
    [family] = text_string_to_metric_families(text)
    assert [(sample.name, sample.value) for sample in family.samples] == [
        ("stateous_done_total", 7.0)
    ]


def test_a_histogram_is_cumulative_up_to_inf_with_its_sum_and_count() -> None:
    histogram = Histogram((0.1, 1.0))
    for seconds in (0.05, 0.1, 0.5, 3.0):
        histogram.observe(seconds)
    family = Family("stateous_wait_seconds", "histogram", "Waits.")
    family.add_reading(histogram.read(), route="/x")
    [parsed] = text_string_to_metric_families(render([family]))
    assert parsed.type == "histogram"
    found = {(sample.name, sample.labels.get("le")): sample.value for sample in parsed.samples}
    assert found == {
        ("stateous_wait_seconds_bucket", "0.1"): 2,
        ("stateous_wait_seconds_bucket", "1"): 3,
        ("stateous_wait_seconds_bucket", "+Inf"): 4,
        ("stateous_wait_seconds_sum", None): pytest.approx(3.65),
        ("stateous_wait_seconds_count", None): 4,
    }


def test_numbers_are_spelt_as_the_format_wants() -> None:
    assert [number(value) for value in (3, 3.0, 0.5, math.inf, -math.inf)] == [
        "3",
        "3",
        "0.5",
        "+Inf",
        "-Inf",
    ]
    assert number(math.nan) == "NaN"


@pytest.mark.parametrize("name", ["1st", "with-dash", ""])
def test_a_bad_metric_name_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="no metric name"):
        Family(name, "gauge", "x")


def test_a_bad_label_name_is_refused() -> None:
    family = Family("stateous_x", "gauge", "x")
    family.add(1, **{"__reserved": "y"})
    with pytest.raises(ValueError, match="no label name"):
        render([family])
