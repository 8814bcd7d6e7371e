"""The sizes Stateous enforces, and the lease, each written once for every side.

The control plane refuses what passes one of these; the supervisor and the client
check the same number before they send, so a routine learns of its mistake where
it made it. Where two limits look alike but mean different things (a supervisor's
name in a claim and in `stateous.yaml`), each has its own name. Every size here is
on docs/reference/limits.md, which a test reads against this module.
"""

from __future__ import annotations

from typing import Final

KIB: Final = 1024
MIB: Final = 1024 * KIB

# What a request may carry.

#: The largest body of a request, in bytes (a chunked one counted with its framing).
BODY_LIMIT: Final = 1 * MIB
#: The deepest nesting of a body's JSON; the body object itself is level 1.
BODY_DEPTH_LIMIT: Final = 64
#: The largest request line and headers, in bytes.
REQUEST_HEAD_LIMIT: Final = 64 * KIB

# Names, ids and texts, in characters.

#: A workflow's, a state's or an event's name.
NAME_LIMIT: Final = 64
#: A state's name as a claim lists it: `<state>` or `<workflow>/<state>`.
CLAIM_NAME_LIMIT: Final = 2 * NAME_LIMIT + 1
#: A token id, a child's included.
TOKEN_ID_LIMIT: Final = 128
#: A supervisor's name as the API takes it: in a claim, a report, a credential's binding.
SUPERVISOR_NAME_LIMIT: Final = 256
#: A supervisor's name as its folder's `stateous.yaml` gives it.
SETTINGS_NAME_LIMIT: Final = 128
#: The idempotency key of an event or a start.
IDEMPOTENCY_KEY_LIMIT: Final = 256
#: The request id of a claim.
REQUEST_ID_LIMIT: Final = 64
#: The text of a note.
NOTE_LIMIT: Final = 500
#: A key of a token's memory.
MEMORY_KEY_LIMIT: Final = 128

# Counts.

#: A supervisor label's name or value, and a state's need's, in characters.
LABEL_LIMIT: Final = 64
#: The most labels of a supervisor, and needs of a state.
LABELS_LIMIT: Final = 32
#: The largest priority of a token either way: from -PRIORITY_LIMIT to PRIORITY_LIMIT.
PRIORITY_LIMIT: Final = 100

#: The largest whole number the database keeps (a signed 64-bit integer): the bound of
#: task ids, attempts and visits.
INTEGER_LIMIT: Final = 2**63 - 1
#: The states one claim names, the tasks one heartbeat names (and its answer's lost ones).
BATCH_LIMIT: Final = 1000
#: The rows one page of a listing holds at most.
LIST_LIMIT: Final = 1000
#: The rows a listing gives when it asks for no number.
LIST_DEFAULT: Final = 100
#: The routines one supervisor runs at once (`tasks` in `stateous.yaml`).
TASKS_LIMIT: Final = 1000
#: The timers one report may set.
TIMERS_PER_REPORT: Final = 100
#: The timers one token may have pending, its state's timeout among them.
PENDING_TIMERS: Final = 1000

# Answers.

#: The bytes of answers a client may leave unread: past them its next request waits, and a
#: live stream's client is cut.
UNREAD_LIMIT: Final = 256 * KIB
#: The bytes of answers one connection may hold unsent while its client reads nothing
#: (an answer may be larger: what counts is what waits on a client that stopped).
CONNECTION_UNSENT_LIMIT: Final = 8 * MIB
#: The bytes of answers all connections together may hold unsent while their clients read
#: nothing.
TOTAL_UNSENT_LIMIT: Final = 64 * MIB
#: The longest answer a supervisor reads, in bytes: a grant carries a context and the
#: payload of an event (up to a body's limit each) and the memory of the state.
ANSWER_LIMIT: Final = 4 * MIB
#: The deepest answer a supervisor reads: a body's nesting, and the two levels that a
#: grant wraps memory values and payloads in.
ANSWER_DEPTH_LIMIT: Final = BODY_DEPTH_LIMIT + 2

# Time.

#: The lease of a claimed task, in seconds, when `serve` is given no `--lease`: 2 minutes,
#: the fixed lease of Stateous 0.2.2, so a grant that does not say its lease means this one.
LEASE: Final = 120
