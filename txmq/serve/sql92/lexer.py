"""The tokens of upstream's SQL92 filter grammar (``filter/.../parser/SelectorParser.jj``), read one at a
time as the parser asks for them, as JavaCC's token manager does.

JavaCC takes the longest token that matches at a position (a keyword over an identifier of the same
length, since keywords are declared first); keywords, identifiers and number suffixes ignore case;
identifiers are ASCII (``[a-z_$][a-z0-9_$]*``); a string is quoted with ``'`` and doubles it inside;
whitespace, ``--`` comments ended by a line break and ``/* */`` comments are skipped. A character that
starts no token is a lexical error, but only once the parser reaches it: upstream's parser stops at the
first token that cannot continue the expression and never reads further (``SelectorParser.JmsSelector``
does not require the end of input), so ``a = 1 garbage`` is the filter ``a = 1``."""

from __future__ import annotations

import re
from dataclasses import dataclass

KEYWORDS = frozenset({"NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS", "CONTAINS",
                      "STARTSWITH", "ENDSWITH"})
EOF = "EOF"
ID, DECIMAL, FLOAT, STRING = "ID", "DECIMAL", "FLOAT", "STRING"
_OPERATORS = ("<>", "<=", ">=", "=", ">", "<", "(", ")", ",", "+", "-")
_SPACE = " \t\n\r\f"
_LINE_COMMENT = re.compile(r"--[^\n\r]*(?:\r\n|\n|\r)")
_BLOCK_COMMENT = re.compile(r"/\*[^*]*\*+(?:[^*/][^*]*\*+)*/")
_WORD = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_DECIMAL = re.compile(r"0|[1-9][0-9]*[lL]?")
_EXPONENT = r"(?:[eE][+-]?[0-9]+)"
_FLOAT = re.compile(rf"[0-9]+\.[0-9]*{_EXPONENT}?|\.[0-9]+{_EXPONENT}?|[0-9]+{_EXPONENT}")
_STRING = re.compile(r"'(?:[^']|'')*'")


class SelectorError(Exception):
    """An expression upstream refuses to compile (``MQFilterException`` "Invalid MessageSelector")."""


@dataclass(frozen=True)
class Token:
    """``kind`` is a keyword in upper case, an operator's text, ID, DECIMAL, FLOAT, STRING or EOF."""

    kind: str
    image: str
    position: int


class Lexer:
    """Tokens on demand, with the two-token lookahead the grammar's ``LOOKAHEAD(2)`` needs."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._at = 0
        self._ahead: list[Token] = []

    def peek(self, depth: int = 1) -> Token:
        """The ``depth``-th token not yet consumed."""
        while len(self._ahead) < depth:
            self._ahead.append(self._read())
        return self._ahead[depth - 1]

    def take(self) -> Token:
        """Consume the next token."""
        token = self.peek()
        self._ahead.pop(0)
        return token

    def _read(self) -> Token:
        text = self._text
        while True:
            while self._at < len(text) and text[self._at] in _SPACE:
                self._at += 1
            comment = _LINE_COMMENT.match(text, self._at) or _BLOCK_COMMENT.match(text, self._at)
            if comment is None:
                break
            self._at = comment.end()
        start = self._at
        if start >= len(text):
            return Token(EOF, "", start)
        kind, end = self._longest(start)
        self._at = end
        image = text[start:end]
        return Token(image.upper() if kind == ID and image.upper() in KEYWORDS else kind, image, start)

    def _longest(self, start: int) -> tuple[str, int]:
        text = self._text
        candidates: list[tuple[int, str]] = []
        for kind, pattern in ((ID, _WORD), (DECIMAL, _DECIMAL), (FLOAT, _FLOAT), (STRING, _STRING)):
            found = pattern.match(text, start)
            if found:
                candidates.append((found.end(), kind))
        for operator in _OPERATORS:
            if text.startswith(operator, start):
                candidates.append((start + len(operator), operator))
                break
        if not candidates:
            raise SelectorError(f"Lexical error at position {start}: encountered {text[start]!r}")
        end = max(c[0] for c in candidates)
        return next(kind for stop, kind in candidates if stop == end), end  # the first declared wins a tie
