"""The `testing` state of `sdlc`: run pytest in the ticket's checkout and count the results."""

import subprocess
import sys
import tempfile
from pathlib import Path
from xml.etree import ElementTree

from stateous import on_state

from contract import Tests, TicketContext, events, states


def run_pytest(checkout: Path, report: Path) -> None:
    """Run the checkout's tests in a session of their own, out of reach of Ctrl-C."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    subprocess.run(
        [*command, f"--junitxml={report}"],
        cwd=checkout,
        capture_output=True,
        check=False,
        start_new_session=True,
    )


def count_tests(repo: str) -> Tests:
    """Count the tests of the checkout `repo` that pass and fail."""
    checkout = Path(repo)
    if not checkout.is_dir():
        raise FileNotFoundError(f"no checkout at {checkout.resolve()}")
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "report.xml"
        run_pytest(checkout, report)
        if not report.is_file():
            raise RuntimeError(f"pytest wrote no report for {checkout}")
        root = ElementTree.parse(report).getroot()
    suite = root if root.tag == "testsuite" else root[0]
    failed = int(suite.get("failures", "0")) + int(suite.get("errors", "0"))
    passed = int(suite.get("tests", "0")) - failed - int(suite.get("skipped", "0"))
    return Tests(passed=passed, failed=failed)


@on_state(states.testing)
def testing(ctx: TicketContext) -> events.passed | events.failed:
    result = count_tests(ctx["repo"])
    ctx.note(f"{result.passed} passed, {result.failed} failed")
    return events.passed(result) if result.failed == 0 else events.failed(result)
