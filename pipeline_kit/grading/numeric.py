"""A numeric reading of everyday answer LaTeX (integers, + - * ^, \\frac, \\sqrt, \\pi, e, letters as variables,
implicit products): two such answers are compared by value at two points instead of through sympy's slow parser."""

from __future__ import annotations

import cmath
import re

_TOKEN = re.compile(r"\d+|\\[A-Za-z]+|[A-Za-z]|[-+*^(){}\[\]]|\s+")  # no "/": a/bc reads two ways
_COMMANDS = {"\\frac", "\\sqrt", "\\pi", "\\cdot", "\\times"}
# values the letters take: irrational-looking, positive and negative, not small integers
POINTS = ((0.5377, -1.8339, 2.2588, 0.8622, -0.3188, 1.3077), (-1.4172, 0.6715, 1.2075, -0.7172, 1.6302, 0.4889))
_TOLERANCE = 1e-9


class _Unsupported(Exception):
    pass


def compare(a: str, b: str) -> bool | None:
    """True when canonical answers `a` and `b` have the same value at two points of their letters, False when they
    differ at both, None when either is outside this grammar (decimals, which are compared to 6 digits elsewhere,
    functions, relations, sets, ±, ∞, ...) or a value is not finite."""
    ta, tb = _tokens(a), _tokens(b)
    if ta is None or tb is None:
        return None
    letters = sorted({t for t in ta + tb if len(t) == 1 and t.isalpha() and t != "e"})  # e: Euler's, as in sympy
    if len(letters) > len(POINTS[0]):
        return None
    verdicts = set()
    for point in POINTS:
        env = dict(zip(letters, point, strict=False))
        try:
            x, y = _Parser(ta, env).value(), _Parser(tb, env).value()
        except (_Unsupported, ArithmeticError, ValueError):
            return None
        if not (finite(x) and finite(y)):
            return None
        verdicts.add(abs(x - y) <= _TOLERANCE * max(1.0, abs(x), abs(y)))
    return verdicts.pop() if len(verdicts) == 1 else None


def finite(z: complex) -> bool:
    return z == z and abs(z) != float("inf")


def _tokens(s: str) -> list[str] | None:
    if len(s) > 200 or "." in s:
        return None
    tokens, pos = [], 0
    while pos < len(s):
        m = _TOKEN.match(s, pos)
        if not m:
            return None
        pos = m.end()
        token = m.group()
        if token.isspace():
            continue
        if (token.startswith("\\") and token not in _COMMANDS) or token in ("E", "I"):
            return None  # other commands; E and I, which latex2sympy reads its own ways
        tokens.append(token)
    return tokens or None


class _Parser:
    """Recursive descent over the tokens, evaluating as it goes (complex arithmetic, principal branches)."""

    def __init__(self, tokens: list[str], env: dict[str, float]):
        self.tokens, self.env, self.pos = list(tokens), env, 0

    def value(self) -> complex:
        v = self.expr()
        if self.pos != len(self.tokens):
            raise _Unsupported
        return v

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token != expected):
            raise _Unsupported
        self.pos += 1
        return token

    def expr(self) -> complex:
        v = self.term()
        while self.peek() in ("+", "-"):
            v = v + self.term() if self.take() == "+" else v - self.term()
        return v

    def term(self) -> complex:
        v = self.unary()
        while True:
            token = self.peek()
            if token in ("*", "\\cdot", "\\times"):
                self.take()
                v *= self.unary()
            elif token is not None and (token[0].isalnum() or token in ("(", "{", "\\frac", "\\sqrt", "\\pi")):
                v *= self.power()  # implicit product: 5r^5, 2\sqrt{3}, (a+5)(b+2)
            else:
                return v

    def unary(self) -> complex:
        if self.peek() in ("-", "+"):
            return -self.unary() if self.take() == "-" else self.unary()
        return self.power()

    def power(self) -> complex:
        base = self.atom()
        if self.peek() == "^":
            self.take()
            exponent = -self.argument() if self.peek() == "-" and self.take() else self.argument()
            if abs(exponent) > 64:
                raise _Unsupported  # 10^{10^{10}}: not for floats
            return base**exponent
        return base

    def argument(self) -> complex:
        """A braced group, or a single token: \\frac12, x^2, \\sqrt3."""
        if self.peek() == "{":
            self.take()
            v = self.expr()
            self.take("}")
            return v
        token = self.take()
        if token.isdigit():
            return complex(int(token[0])) if len(token) == 1 else self._split_digits(token)
        return self._letter_or_constant(token)

    def _split_digits(self, token: str) -> complex:
        """\\frac12 is \\frac{1}{2}: a single-token argument takes one digit, the rest stays for what follows."""
        self.tokens[self.pos - 1 : self.pos] = [token[0], token[1:]]
        return complex(int(token[0]))

    def atom(self) -> complex:
        token = self.take()
        if token.isdigit():
            return complex(int(token))
        if token in ("(", "{"):
            v = self.expr()
            self.take(")" if token == "(" else "}")
            return v
        if token == "\\frac":
            numerator = self.argument()
            return numerator / self.argument()
        if token == "\\sqrt":
            if self.peek() == "[":
                self.take()
                index = self.expr()
                self.take("]")
                return self.argument() ** (1 / index)
            return cmath.sqrt(self.argument())
        return self._letter_or_constant(token)

    def _letter_or_constant(self, token: str) -> complex:
        if token == "\\pi":
            return complex(cmath.pi)
        if token == "e":
            return complex(cmath.e)
        if len(token) == 1 and token.isalpha():
            return complex(self.env[token])
        raise _Unsupported
