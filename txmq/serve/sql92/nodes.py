"""The expressions of upstream's SQL92 filter (``filter/.../expression``), evaluated as upstream does
against a message's properties (``MessageEvaluationContext``: a property is its string, a missing one
null).

Three values: a comparison with null is null, AND and OR are SQL's (``LogicExpression``: FALSE AND null is
FALSE, TRUE OR null is TRUE, and the right side is not evaluated when the left decides), NOT null is null.
Only TRUE matches (``ExpressionMessageFilter.isMatchedByCommitLog``). A Java exception while evaluating
(``JavaError``: a property that does not convert to the literal's number class) makes the message not
match, as upstream logs it and answers false."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from txmq.serve.sql92.java import JavaError, Value, compare, double_of, java_equals, negate

Properties = Mapping[str, str]


class Node:
    """An expression. ``boolean`` marks upstream's ``BooleanExpression`` (what AND, OR and NOT take)."""

    boolean = False

    def evaluate(self, props: Properties) -> Value:
        raise NotImplementedError


@dataclass(frozen=True)
class Constant(Node):
    """A literal; TRUE, FALSE and NULL are ``BooleanConstantExpression``, the others are not."""

    value: Value
    boolean: bool = False

    def evaluate(self, props: Properties) -> Value:
        return self.value


@dataclass(frozen=True)
class Property(Node):
    """``PropertyExpression``: the message's property of that name (``TAGS`` is the tag)."""

    name: str

    def evaluate(self, props: Properties) -> Value:
        return props.get(self.name)


@dataclass(frozen=True)
class Negate(Node):
    """``UnaryExpression.createNegate``: a number negated, null for anything else."""

    operand: Node

    def evaluate(self, props: Properties) -> Value:
        return negate(self.operand.evaluate(props))


def _as_boolean(value: Value) -> bool | None:
    """Java's ``(Boolean)`` cast of a value a boolean expression gave."""
    if value is None or isinstance(value, bool):
        return value
    raise JavaError(f"ClassCastException: {value!r} is not a Boolean")


@dataclass(frozen=True)
class BooleanCast(Node):
    """``UnaryExpression.createBooleanCast``: a property where a boolean is wanted; a string (every
    present property) is FALSE."""

    operand: Node
    boolean = True

    def evaluate(self, props: Properties) -> Value:
        value = self.operand.evaluate(props)
        return None if value is None else value is True


@dataclass(frozen=True)
class Not(Node):
    """``UnaryExpression.createNOT``."""

    operand: Node
    boolean = True

    def evaluate(self, props: Properties) -> Value:
        value = _as_boolean(self.operand.evaluate(props))
        return None if value is None else not value


@dataclass(frozen=True)
class Logic(Node):
    """``LogicExpression.createAND`` (``decisive`` False: a FALSE side decides) and ``createOR``
    (``decisive`` True: a TRUE side decides); the right side is evaluated only if the left did not
    decide, and a null side without a decisive one makes the result null."""

    left: Node
    right: Node
    decisive: bool
    boolean = True

    def evaluate(self, props: Properties) -> Value:
        lv = _as_boolean(self.left.evaluate(props))
        if lv is self.decisive:
            return self.decisive
        rv = _as_boolean(self.right.evaluate(props))
        if rv is self.decisive:
            return self.decisive
        return None if lv is None or rv is None else not self.decisive


@dataclass(frozen=True)
class Equal(Node):
    """``ComparisonExpression.doCreateEqual`` (``=``, and IS NULL against the NULL constant): null with
    null is TRUE, null with a value is null (value with null: FALSE), equal values are TRUE, others are
    compared after conversion (``__compare``)."""

    left: Node
    right: Node
    boolean = True

    def evaluate(self, props: Properties) -> Value:
        lv, rv = self.left.evaluate(props), self.right.evaluate(props)
        if (lv is None) != (rv is None):
            return None if lv is None else False
        if lv is None or java_equals(lv, rv):
            return True
        return compare(lv, rv) == 0


ORDERINGS: dict[str, Callable[[int], bool]] = {
    ">": lambda c: c > 0, ">=": lambda c: c >= 0, "<": lambda c: c < 0, "<=": lambda c: c <= 0}


@dataclass(frozen=True)
class Ordered(Node):
    """``>``, ``>=``, ``<``, ``<=`` (``ComparisonExpression.evaluate``): null on either side is null; two
    strings (two properties) compare as doubles (``Double.valueOf``, a failure is an exception); other
    pairs as ``__compare`` converts them."""

    left: Node
    right: Node
    operator: str
    boolean = True

    def evaluate(self, props: Properties) -> Value:
        lv = self.left.evaluate(props)
        if lv is None:
            return None
        rv = self.right.evaluate(props)
        if rv is None:
            return None
        if isinstance(lv, str) and isinstance(rv, str):
            lv, rv = double_of(lv), double_of(rv)
        return ORDERINGS[self.operator](compare(lv, rv))


@dataclass(frozen=True)
class InList(Node):
    """``UnaryExpression.createInExpression``: a property among string literals; null if the property is
    missing (so NOT IN does not match a message without it)."""

    operand: Property
    items: frozenset[str]
    negated: bool
    boolean = True

    def evaluate(self, props: Properties) -> Value:
        value = self.operand.evaluate(props)
        if not isinstance(value, str):
            return None
        return (value in self.items) != self.negated


TEXT_TESTS: dict[str, Callable[[str, str], bool]] = {
    "CONTAINS": lambda v, s: s in v, "STARTSWITH": str.startswith, "ENDSWITH": str.endswith}


@dataclass(frozen=True)
class TextTest(Node):
    """CONTAINS, STARTSWITH, ENDSWITH and their NOT forms (``ComparisonExpression.ContainsExpression``
    and its siblings): FALSE, not null, for an empty search, a missing property or a value that is not
    a string, in the NOT forms too."""

    operand: Node
    search: str
    operator: str
    negated: bool
    boolean = True

    def evaluate(self, props: Properties) -> Value:
        if not self.search:
            return False
        value = self.operand.evaluate(props)
        if not isinstance(value, str):
            return False
        return TEXT_TESTS[self.operator](value, self.search) != self.negated
