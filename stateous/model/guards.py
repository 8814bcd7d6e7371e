"""The guard language: the small conditions in `when=` that route an event.

This module reads a guard: it is parsed by hand (tokens, then recursive descent)
into a tree of frozen nodes, with what the guard reads listed for the compiler.
`guard_eval` decides a parsed guard over a token's data. It must never hand guard
text to Python's eval, compile or ast; `parse` is the only function that raises.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_COMPARISONS = ("<", "<=", ">", ">=", "==", "!=")
_PAIRS = frozenset(("<=", ">=", "==", "!="))
_SINGLES = frozenset("<>=()[],.")
_DIGITS = frozenset("0123456789")
_NAME_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_NAME_REST = _NAME_START | _DIGITS
_MAX_NUMBER = 300  # so that every number converts to a finite float
_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "n": "\n", "t": "\t"}
_CONSTANTS = {"true": True, "false": False, "null": None}
_BRANCH_FIELDS = ("workflow", "token", "status", "final")
#: The field of a branch that is read whole or as result.a.b: what ended the child.
_RESULT = "result"
_CHARACTER_HINTS = {
    "!": "'!' is not an operator; write 'not', or '!=' to compare",
    "&": "'&' is not an operator; write 'and'",
    "|": "'|' is not an operator; write 'or'",
}
_PYTHON_NAMES = {"True": "true", "False": "false", "None": "null"}


class GuardSyntaxError(ValueError):
    """A guard that does not parse, with the 1-based column of the offending token."""

    def __init__(self, message: str, column: int) -> None:
        super().__init__(f"at column {column}: {message}")
        self.message = message
        self.column = column


@dataclass(frozen=True, slots=True)
class CtxRef:
    """A field of the token's context, read as ctx['a']['b']."""

    path: tuple[str, ...]
    column: int = field(default=0, compare=False)

    @property
    def label(self) -> str:
        return "ctx" + "".join(f"[{key!r}]" for key in self.path)


@dataclass(frozen=True, slots=True)
class PayloadRef:
    """A field of the event's payload, read as payload.a.b."""

    path: tuple[str, ...]
    column: int = field(default=0, compare=False)

    @property
    def label(self) -> str:
        return ".".join(("payload", *self.path))


@dataclass(frozen=True, slots=True)
class CountRef:
    """How many times the token accepted an event, read as count('event')."""

    event: str
    column: int = field(default=0, compare=False)

    @property
    def label(self) -> str:
        return f"count({self.event!r})"


@dataclass(frozen=True, slots=True)
class BranchRef:
    """A field of one entry of `branches`, readable only inside branches.all/any(...)."""

    path: tuple[str, ...]
    column: int = field(default=0, compare=False)

    @property
    def label(self) -> str:
        return ".".join(self.path)


@dataclass(frozen=True, slots=True)
class Literal:
    """A constant JSON value written in the guard; a list literal holds a Python list."""

    value: Any = field(hash=False)


@dataclass(frozen=True, slots=True)
class Compare:
    """A comparison; `op` is one of < <= > >= == != in, or 'not in'."""

    op: str
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Not:
    operand: Node


@dataclass(frozen=True, slots=True)
class And:
    items: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Or:
    items: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Truth:
    """A bare reference used as a condition: true only when the value is exactly true."""

    operand: Ref


@dataclass(frozen=True, slots=True)
class Branches:
    """branches.all(body) or branches.any(body), over the entries of the join."""

    quantifier: str
    body: Node


Ref = CtxRef | PayloadRef | CountRef | BranchRef
Node = Literal | Compare | Not | And | Or | Truth | Branches | Ref
_REFS = (CtxRef, PayloadRef, CountRef, BranchRef)


@dataclass(frozen=True, slots=True)
class Guard:
    """A parsed guard, with what it reads so the compiler can check it."""

    text: str
    root: Node
    refs: tuple[Ref, ...]
    uses_branches: bool
    counted: tuple[str, ...]
    #: The fields of branches read inside branches.all/any(...), each once.
    branch_refs: tuple[BranchRef, ...] = ()


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "number", "string", "name", "op" or "end"
    text: str
    value: Any
    column: int

    def describe(self) -> str:
        return "the end of the guard" if self.kind == "end" else repr(self.text)

    def is_word(self, *words: str) -> bool:
        return self.kind == "name" and self.text in words

    def is_op(self, *ops: str) -> bool:
        return self.kind == "op" and self.text in ops


def parse(text: str) -> Guard:
    """Parse guard text once, so that a bad guard fails at compile time with its column."""
    parser = _Parser(_tokenize(text))
    try:
        root = parser.guard()
    except RecursionError as ex:
        raise GuardSyntaxError("the guard is nested too deeply", 1) from ex
    return Guard(
        text=text,
        root=root,
        refs=tuple(parser.refs),
        uses_branches=parser.uses_branches,
        counted=tuple(parser.counted),
        branch_refs=tuple(parser.branch_refs),
    )


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char.isspace():
            index += 1
            continue
        if char in _DIGITS or (char == "-" and text[index + 1 : index + 2] in _DIGITS):
            token = _number(text, index)
        elif char in "'\"":
            token = _string(text, index)
        elif char in _NAME_START:
            end = index + 1
            while end < len(text) and text[end] in _NAME_REST:
                end += 1
            token = _Token("name", text[index:end], None, index + 1)
        else:
            pair = text[index : index + 2]
            op = pair if pair in _PAIRS else char if char in _SINGLES else None
            if op is None:
                hint = _CHARACTER_HINTS.get(char, f"unexpected character {char!r}")
                raise GuardSyntaxError(hint, index + 1)
            token = _Token("op", op, None, index + 1)
        tokens.append(token)
        index += len(token.text)
    tokens.append(_Token("end", "", None, len(text) + 1))
    return tokens


def _number(text: str, start: int) -> _Token:
    end = start + 1
    while end < len(text) and text[end] in _DIGITS:
        end += 1
    fraction = end + 1 < len(text) and text[end] == "." and text[end + 1] in _DIGITS
    if fraction:
        end += 1
        while end < len(text) and text[end] in _DIGITS:
            end += 1
    raw = text[start:end]
    if len(raw) > _MAX_NUMBER:
        raise GuardSyntaxError(f"a number has at most {_MAX_NUMBER} characters", start + 1)
    return _Token("number", raw, float(raw) if fraction else int(raw), start + 1)


def _string(text: str, start: int) -> _Token:
    quote = text[start]
    chars: list[str] = []
    index = start + 1
    while index < len(text) and text[index] != quote:
        if text[index] == "\\" and index + 1 < len(text):
            escape = text[index + 1 : index + 2]
            if escape not in _ESCAPES:
                raise GuardSyntaxError(
                    f"unknown escape '\\{escape}' in a string; use \\\\, \\', \\\", \\n or \\t",
                    index + 1,
                )
            chars.append(_ESCAPES[escape])
            index += 2
        else:
            chars.append(text[index])
            index += 1
    if index >= len(text):
        raise GuardSyntaxError(f"the string has no closing {quote}", start + 1)
    return _Token("string", text[start : index + 1], "".join(chars), start + 1)


class _Parser:
    """Recursive descent over the tokens; collects what the guard reads on the way."""

    def __init__(self, tokens: list[_Token]) -> None:
        self.tokens = tokens
        self.position = 0
        self.in_branches = False
        self.refs: list[Ref] = []
        self.branch_refs: list[BranchRef] = []
        self.counted: list[str] = []
        self.uses_branches = False

    @property
    def token(self) -> _Token:
        return self.tokens[self.position]

    def advance(self) -> _Token:
        token = self.token
        self.position += 1
        return token

    def expect_op(self, op: str, what: str) -> _Token:
        if not self.token.is_op(op):
            raise GuardSyntaxError(
                f"expected {what}, found {self.token.describe()}", self.token.column
            )
        return self.advance()

    def guard(self) -> Node:
        if self.token.kind == "end":
            raise GuardSyntaxError("the guard is empty; write a condition", 1)
        root = self.condition()
        if self.token.kind != "end":
            raise GuardSyntaxError(
                f"unexpected {self.token.describe()}; expected 'and', 'or' or the end of the guard",
                self.token.column,
            )
        return root

    def condition(self) -> Node:
        """Parse an or_expr that must be a condition, wrapping a bare reference in Truth."""
        column = self.token.column
        return _as_condition(self.or_expr(), column)

    def or_expr(self) -> Node:
        return self._chain("or", Or, self.and_expr)

    def and_expr(self) -> Node:
        return self._chain("and", And, self.not_expr)

    def _chain(self, word: str, make: type[And] | type[Or], item: Callable[[], Node]) -> Node:
        column = self.token.column
        first = item()
        if not self.token.is_word(word):
            return first
        items = [_as_condition(first, column)]
        while self.token.is_word(word):
            self.advance()
            column = self.token.column
            items.append(_as_condition(item(), column))
        return make(tuple(items))

    def not_expr(self) -> Node:
        if not self.token.is_word("not"):
            return self.comparison()
        self.advance()
        column = self.token.column
        return Not(_as_condition(self.not_expr(), column))

    def comparison(self) -> Node:
        left = self.operand()
        op = self.comparison_operator()
        if op is None:
            return left
        column = self.token.column
        right = self.operand()
        if op in ("in", "not in"):
            _check_container(op, right, column)
        column = self.token.column
        if self.comparison_operator() is not None:
            raise GuardSyntaxError("comparisons cannot be chained; join them with 'and'", column)
        return Compare(op, left, right)

    def comparison_operator(self) -> str | None:
        """Consume and return the operator at the cursor, if there is one."""
        token = self.token
        if token.is_op("="):
            raise GuardSyntaxError("'=' is not an operator; write '=='", token.column)
        if token.is_op(*_COMPARISONS) or token.is_word("in"):
            self.advance()
            return token.text
        if token.is_word("not") and self.tokens[self.position + 1].is_word("in"):
            self.position += 2
            return "not in"
        return None

    def operand(self) -> Node:
        token = self.token
        if token.kind in ("number", "string"):
            self.advance()
            return Literal(token.value)
        if token.is_op("["):
            return Literal(self.list_literal())
        if token.is_op("("):
            self.advance()
            node = self.or_expr()
            self.expect_op(")", f"')' to close the '(' at column {token.column}")
            return node
        if token.kind != "name":
            raise GuardSyntaxError(f"expected a value, found {token.describe()}", token.column)
        if token.text in _CONSTANTS:
            self.advance()
            return Literal(_CONSTANTS[token.text])
        reader = {
            "ctx": self.ctx_ref,
            "payload": self.payload_ref,
            "count": self.count_ref,
            "branches": self.branches,
        }.get(token.text)
        if reader is not None:
            return reader()
        if token.text in _BRANCH_FIELDS or token.text == _RESULT:
            return self.branch_field()
        raise GuardSyntaxError(_unknown_name(token.text), token.column)

    def remember(self, ref: Ref) -> Ref:
        """List what the guard reads, each once: the branches' fields apart from the rest."""
        if isinstance(ref, BranchRef):
            if ref not in self.branch_refs:
                self.branch_refs.append(ref)
        elif ref not in self.refs:
            self.refs.append(ref)
        return ref

    def ctx_ref(self) -> Ref:
        start = self.advance()
        if self.token.is_op("."):
            name = self.tokens[self.position + 1]
            if name.is_word("memory"):
                message = "a guard cannot read ctx.memory; it reads only context fields"
            elif name.kind == "name":
                message = f"write ctx[{name.text!r}], not ctx.{name.text}"
            else:
                message = "write ctx['key'] to read a context field"
            raise GuardSyntaxError(message, self.token.column)
        path: list[str] = []
        while self.token.is_op("[") or not path:
            self.expect_op("[", "'[' after ctx; write ctx['key']")
            if self.token.kind != "string":
                raise GuardSyntaxError(
                    f"expected a quoted key, found {self.token.describe()}; write ctx['key']",
                    self.token.column,
                )
            path.append(self.advance().value)
            self.expect_op("]", "']' to close ctx[...]")
        return self.remember(CtxRef(tuple(path), start.column))

    def payload_ref(self) -> Ref:
        start = self.advance()
        path = self.dotted_names("payload")
        if self.in_branches:
            return self.remember(BranchRef(("payload", *path), start.column))
        return self.remember(PayloadRef(path, start.column))

    def dotted_names(self, owner: str) -> tuple[str, ...]:
        path: list[str] = []
        while self.token.is_op(".") or not path:
            self.expect_op(".", f"'.' after {owner}; write {owner}.field")
            if self.token.kind != "name":
                raise GuardSyntaxError(
                    f"expected a field name, found {self.token.describe()}", self.token.column
                )
            path.append(self.advance().text)
        return tuple(path)

    def count_ref(self) -> Ref:
        start = self.advance()
        self.expect_op("(", "'(' after count; write count('event')")
        if self.token.kind != "string":
            raise GuardSyntaxError(
                f"expected a quoted event name, found {self.token.describe()}; "
                "write count('event')",
                self.token.column,
            )
        event = self.advance().value
        self.expect_op(")", "')' to close count(...)")
        if event not in self.counted:
            self.counted.append(event)
        return self.remember(CountRef(event, start.column))

    def branches(self) -> Node:
        start = self.advance()
        if self.in_branches:
            raise GuardSyntaxError("branches cannot be used inside branches(...)", start.column)
        self.expect_op(".", "'.' after branches; write branches.all(...) or branches.any(...)")
        quantifier = self.token
        if not quantifier.is_word("all", "any"):
            raise GuardSyntaxError(
                f"expected 'all' or 'any', found {quantifier.describe()}", quantifier.column
            )
        self.advance()
        opening = self.expect_op("(", f"'(' after branches.{quantifier.text}")
        self.uses_branches = True
        self.in_branches = True
        body = self.condition()
        self.in_branches = False
        self.expect_op(")", f"')' to close the '(' at column {opening.column}")
        return Branches(quantifier.text, body)

    def branch_field(self) -> Node:
        token = self.advance()
        if not self.in_branches:
            raise GuardSyntaxError(
                f"{token.text!r} can be read only inside branches.all(...) or branches.any(...)",
                token.column,
            )
        path: tuple[str, ...] = (token.text,)
        if token.text == _RESULT and self.token.is_op("."):
            path += self.dotted_names(_RESULT)
        return self.remember(BranchRef(path, token.column))

    def list_literal(self) -> list[Any]:
        opening = self.advance()
        items: list[Any] = []
        while not self.token.is_op("]"):
            items.append(self.list_item())
            if not self.token.is_op(","):
                break
            self.advance()
        self.expect_op("]", f"',' or ']' to close the '[' at column {opening.column}")
        return items

    def list_item(self) -> Any:
        token = self.token
        if token.kind in ("number", "string"):
            return self.advance().value
        if token.kind == "name" and token.text in _CONSTANTS:
            return _CONSTANTS[self.advance().text]
        if token.is_op("["):
            return self.list_literal()
        raise GuardSyntaxError(
            f"a list holds only numbers, strings, true, false, null and lists; "
            f"found {token.describe()}",
            token.column,
        )


def _unknown_name(name: str) -> str:
    if name in _PYTHON_NAMES:
        return f"unknown name {name!r}; write {_PYTHON_NAMES[name]!r}"
    if name in ("and", "or", "not", "in"):
        return f"expected a value, found {name!r}"
    return f"unknown name {name!r}; a guard reads ctx['key'], payload.field or count('event')"


def _as_condition(node: Node, column: int) -> Node:
    """Make a bare reference a condition; refuse a constant that cannot be one."""
    if isinstance(node, _REFS):
        return Truth(node)
    if isinstance(node, Literal) and not isinstance(node.value, bool):
        raise GuardSyntaxError(
            f"{_show(node.value)} is not a condition; compare it with something", column
        )
    return node


def _check_container(op: str, right: Node, column: int) -> None:
    if isinstance(right, _REFS) or (isinstance(right, Literal) and isinstance(right.value, list)):
        return
    if isinstance(right, Literal) and isinstance(right.value, str):
        message = f"a string cannot be on the right of {op!r}; use a list, e.g. ['a', 'b']"
    else:
        message = f"the right of {op!r} must be a list, or a value from ctx, payload or count"
    raise GuardSyntaxError(message, column)


def _show(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, list):
        return "a list"
    return repr(value)
