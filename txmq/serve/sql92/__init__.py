"""Upstream's SQL92 message filter (module ``filter``: ``SqlFilter``, ``SelectorParser.jj`` and the
expression classes), for the filters ``txmq serve`` applies to consumers (docs/serve.md, "SQL92 filters").

``compile_selector`` is ``SqlFilter.compile``: it parses as upstream's generated parser does and refuses
what upstream refuses (``SelectorError``); ``Selector.matches`` is ``ExpressionMessageFilter
.isMatchedByCommitLog``: TRUE matches, FALSE, null and an exception while evaluating do not. Hand-written
rather than built on a parser library: no package on the index parses this grammar, and what decides
upstream's answers is JavaCC's (longest-match tokens, the parse stopping at the first token that cannot
continue) and Java's number conversions, which a generic parser would have to be bent to anyway."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from txmq.serve.sql92.java import JavaError
from txmq.serve.sql92.lexer import SelectorError
from txmq.serve.sql92.nodes import Node
from txmq.serve.sql92.parser import parse

__all__ = ["Selector", "SelectorError", "compile_selector"]


@dataclass(frozen=True)
class Selector:
    """A compiled filter."""

    expression: str
    tree: Node

    def matches(self, properties: Mapping[str, str]) -> bool:
        """Whether a message with these properties is delivered: only a TRUE value is."""
        try:
            return self.tree.evaluate(properties) is True
        except (JavaError, RecursionError):  # upstream logs the exception and does not deliver
            return False


def compile_selector(expression: str) -> Selector:
    """``SqlFilter.compile``: the selector, or ``SelectorError`` for what upstream refuses (an
    expression nested deeper than Python's recursion allows is refused too: Java's stack is deeper)."""
    try:
        return Selector(expression, parse(expression))
    except RecursionError:
        raise SelectorError("the expression is nested too deeply") from None
