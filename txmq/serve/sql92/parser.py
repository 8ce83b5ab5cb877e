"""A recursive-descent parser of upstream's SQL92 filter grammar, one function per production of
``SelectorParser.jj`` (orExpression, andExpression, equalityExpression, comparisonExpression, unaryExpr,
primaryExpr, literal), with the checks its semantic actions make while building (``ComparisonExpression
.createEqual``, ``createGreaterThan``..., ``createBetween``, ``createInFilter``, ``ConstantExpression
.createFromDecimal`` / ``createFloat``, ``SelectorParser.asBooleanExpression``): an expression upstream
refuses to compile raises ``SelectorError``.

Precedence is the grammar's: OR below AND below ``=``, ``<>``, IS [NOT] NULL below the other comparisons
below unary ``+``, ``-`` and NOT; so ``NOT a = 1`` is ``(NOT a) = 1`` and ``NOT a IN ('x')`` is refused
(IN takes a property, not ``NOT a``)."""

from __future__ import annotations

from txmq.serve.sql92 import lexer as lx
from txmq.serve.sql92.java import DOUBLE_MAX, DOUBLE_MIN, INT_MAX, INT_MIN, LONG_MAX, JavaError, Long, compare
from txmq.serve.sql92.lexer import Lexer, SelectorError, Token
from txmq.serve.sql92.nodes import (
    BooleanCast,
    Constant,
    Equal,
    InList,
    Logic,
    Negate,
    Node,
    Not,
    Ordered,
    Property,
    TextTest,
)

NULL = Constant(None, boolean=True)
_ORDERED = frozenset({">", ">=", "<", "<="})
_TEXT = frozenset({"CONTAINS", "STARTSWITH", "ENDSWITH"})
_COMPARISON_START = _ORDERED | _TEXT | {"NOT", "BETWEEN", "IN"}
_LITERALS = frozenset({lx.STRING, lx.DECIMAL, lx.FLOAT, "TRUE", "FALSE", "NULL"})


def parse(text: str) -> Node:
    """``SelectorParser.JmsSelector``: the expression, as a boolean one."""
    return _Parser(Lexer(text)).selector()


class _Parser:
    def __init__(self, tokens: Lexer) -> None:
        self.tokens = tokens

    def _expect(self, kind: str) -> Token:
        token = self.tokens.take()
        if token.kind != kind:
            raise SelectorError(f"Encountered {token.image or '<EOF>'!r} at position {token.position}, "
                                f"expecting {kind}")
        return token

    def _at(self, *kinds: str) -> bool:
        return self.tokens.peek().kind in kinds

    def selector(self) -> Node:
        return _as_boolean(self.or_expression())

    def or_expression(self) -> Node:
        left = self.and_expression()
        while self._at("OR"):
            self.tokens.take()
            left = Logic(_as_boolean(left), _as_boolean(self.and_expression()), decisive=True)
        return left

    def and_expression(self) -> Node:
        left = self.equality_expression()
        while self._at("AND"):
            self.tokens.take()
            left = Logic(_as_boolean(left), _as_boolean(self.equality_expression()), decisive=False)
        return left

    def equality_expression(self) -> Node:
        left = self.comparison_expression()
        while self._at("=", "<>", "IS"):
            kind = self.tokens.take().kind
            if kind == "=":
                left = _equal(left, self.comparison_expression())
            elif kind == "<>":
                left = Not(_equal(left, self.comparison_expression()))
            elif self._at("NULL"):  # LOOKAHEAD(2): IS NULL
                self.tokens.take()
                left = Equal(left, NULL)
            else:
                self._expect("NOT")
                self._expect("NULL")
                left = Not(Equal(left, NULL))
        return left

    def comparison_expression(self) -> Node:
        left = self.unary()
        while self._at(*_COMPARISON_START):
            negated = self._at("NOT")
            if negated:
                if self.tokens.peek(2).kind not in _TEXT | {"BETWEEN", "IN"}:  # no LOOKAHEAD(2) matches
                    raise SelectorError(f"Encountered NOT at position {self.tokens.peek().position}")
                self.tokens.take()
            kind = self.tokens.take().kind
            if kind in _ORDERED:
                left = _ordered(left, self.unary(), kind)
            elif kind in _TEXT:
                left = TextTest(left, self._string(), kind, negated)
            elif kind == "BETWEEN":
                low = self.unary()
                self._expect("AND")
                high = self.unary()
                left = _not_between(left, low, high) if negated else _between(left, low, high)
            else:
                left = _in_list(left, self._string_list(), negated)
        return left

    def _string(self) -> str:
        """``stringLitteral``: the quotes off, a doubled quote single."""
        return self._expect(lx.STRING).image[1:-1].replace("''", "'")

    def _string_list(self) -> list[str]:
        self._expect("(")
        items = [self._string()]
        while self._at(","):
            self.tokens.take()
            items.append(self._string())
        self._expect(")")
        return items

    def unary(self) -> Node:
        if self._at("+"):
            self.tokens.take()
            return self.unary()
        if self._at("-"):
            self.tokens.take()
            return Negate(self.unary())
        if self._at("NOT"):
            self.tokens.take()
            return Not(_as_boolean(self.unary()))
        return self.primary()

    def primary(self) -> Node:
        token = self.tokens.peek()
        if token.kind in _LITERALS:
            return _literal(self.tokens.take())
        if token.kind == lx.ID:
            return Property(self.tokens.take().image)
        if token.kind == "(":
            self.tokens.take()
            inner = self.or_expression()
            self._expect(")")
            return inner
        raise SelectorError(f"Encountered {token.image or '<EOF>'!r} at position {token.position}")


def _literal(token: Token) -> Constant:
    """``literal``: ``createFromDecimal`` keeps Integer where it fits, Long up to Long's range (an L suffix
    is dropped); ``createFloat`` refuses infinity and anything below Double.MIN_VALUE, zero included."""
    if token.kind == lx.STRING:
        return Constant(token.image[1:-1].replace("''", "'"))
    if token.kind == lx.DECIMAL:
        value = int(token.image.rstrip("lL"))
        if value > LONG_MAX:
            raise SelectorError(f'NumberFormatException: For input string: "{token.image}"')
        return Constant(value if INT_MIN <= value <= INT_MAX else Long(value))
    if token.kind == lx.FLOAT:
        number = float(token.image)
        if number > DOUBLE_MAX:
            raise SelectorError(f"{token.image} is greater than {DOUBLE_MAX}")
        if number < DOUBLE_MIN:
            raise SelectorError(f"{token.image} is less than {DOUBLE_MIN}")
        return Constant(number)
    return Constant(token.kind == "TRUE", boolean=True) if token.kind in ("TRUE", "FALSE") else NULL


def _as_boolean(node: Node) -> Node:
    """``asBooleanExpression``: a property becomes a boolean cast; other non-boolean values are refused."""
    if node.boolean:
        return node
    if isinstance(node, Property):
        return BooleanCast(node)
    raise SelectorError(f"Expression will not result in a boolean value: {node}")


def _equal(left: Node, right: Node) -> Node:
    """``createEqual``: no NULL literal on either side, and TRUE/FALSE not against another literal."""
    for side in (left, right):
        if isinstance(side, Constant) and side.value is None:
            raise SelectorError("'NULL' cannot be compared.")
    if isinstance(left, Constant) and isinstance(right, Constant) and left.boolean and not right.boolean:
        raise SelectorError(f"'{left.value}' cannot be compared with '{right.value}'")
    return Equal(left, right)


def _ordered(left: Node, right: Node, operator: str) -> Node:
    """``createGreaterThan`` and siblings (``checkLessThanOperand``): a literal must be a number, and no
    side may be a boolean expression."""
    for side in (left, right):
        number = isinstance(side, Constant) and type(side.value) in (int, Long, float)
        if side.boolean or (isinstance(side, Constant) and not number):
            raise SelectorError(f"Value '{side}' cannot be compared.")
    return Ordered(left, right, operator)


def _between(value: Node, low: Node, high: Node) -> Node:
    """``createBetween``: two literal bounds must not be null and low must not exceed high."""
    if isinstance(low, Constant) and isinstance(high, Constant):
        if low.value is None or high.value is None:
            raise SelectorError("Illegal values of between, values can not be null!")
        try:
            backwards = compare(high.value, low.value) < 0
        except JavaError as exc:
            raise SelectorError(str(exc)) from None
        if backwards:
            raise SelectorError(f"Illegal values of between, left value({low.value}) must less than or "
                                f"equal to right value({high.value})")
    return Logic(_ordered(value, low, ">="), _ordered(value, high, "<="), decisive=False)


def _not_between(value: Node, low: Node, high: Node) -> Node:
    """``createNotBetween``: below low or above high, without the bound checks."""
    return Logic(_ordered(value, low, "<"), _ordered(value, high, ">"), decisive=True)


def _in_list(left: Node, items: list[str], negated: bool) -> Node:
    """``createInFilter``: IN takes a property."""
    if not isinstance(left, Property):
        raise SelectorError(f"Expected a property for In expression, got: {left}")
    return InList(left, frozenset(items), negated)
