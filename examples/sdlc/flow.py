"""The `sdlc` example: a ticket is coded, then tested, and coded again when tests fail.

Compile it with `stateous compile examples/sdlc/flow.py`.
"""

from schemas import Tests, Ticket

from stateous import END, START, Workflow

flow = Workflow("sdlc", context=Ticket)

coding = flow.state("coding", timeout="6h", retries=2)  # an agent writes the change
testing = flow.state("testing", timeout="1h")  # a routine runs the test suite

done = flow.event("done")
stuck = flow.event("stuck")
passed = flow.event("passed", payload=Tests)
failed = flow.event("failed", payload=Tests)

flow.transition(START, coding)
flow.transition(coding, testing, on=done)
flow.transition(coding, END, on=stuck)
flow.transition(testing, END, on=passed)
# Two failed runs go back to coding; the third ends the token.
flow.transition(testing, coding, on=failed, when="count('failed') < 3")
flow.transition(testing, END, on=failed, otherwise=True)
