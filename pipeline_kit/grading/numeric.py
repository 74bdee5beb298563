"""A numeric reading of everyday answer LaTeX (integers, + - * ^, \\frac, \\sqrt, \\pi, e, i, |x|, \\sin and the
other functions of LaTeX's math operators, letters as variables, implicit products): two such answers are compared
by value at two points instead of through sympy's slow parser. i is the imaginary unit, as in complex-number
answers; math-verify would read it as a variable."""

from __future__ import annotations

import cmath
import re
from fractions import Fraction

_TOKEN = re.compile(r"\d+|\\[A-Za-z]+|[A-Za-z]|[-+*^(){}\[\]|]|\s+")  # no "/": a/bc reads two ways
# the functions of LaTeX's math operators, at their principal branches; \log is base 10, as math-verify reads it
_FUNCTIONS = {
    "\\sin": cmath.sin, "\\cos": cmath.cos, "\\tan": cmath.tan,
    "\\sec": lambda z: 1 / cmath.cos(z), "\\csc": lambda z: 1 / cmath.sin(z), "\\cot": lambda z: 1 / cmath.tan(z),
    "\\arcsin": cmath.asin, "\\arccos": cmath.acos, "\\arctan": cmath.atan,
    "\\sinh": cmath.sinh, "\\cosh": cmath.cosh, "\\tanh": cmath.tanh,
    "\\ln": cmath.log, "\\log": cmath.log10, "\\exp": cmath.exp,
}  # fmt: skip
_COMMANDS = {"\\frac", "\\sqrt", "\\pi", "\\cdot", "\\times", *_FUNCTIONS}
_CONSTANTS = {"e", "i"}  # Euler's number and the imaginary unit, never variables
# values the letters take: irrational-looking, positive and negative, not small integers
POINTS = ((0.5377, -1.8339, 2.2588, 0.8622, -0.3188, 1.3077), (-1.4172, 0.6715, 1.2075, -0.7172, 1.6302, 0.4889))
_TOLERANCE = 1e-9
_ODD_ROOTS = 15  # the largest denominator of an exponent read as a real odd root: (-8)^{2/3} is 4


class _Unsupported(Exception):
    pass


def compare(a: str, b: str) -> bool | None:
    """True when canonical answers `a` and `b` have the same value at two points of their letters, False when they
    differ at both, None when either is outside this grammar (decimals, which are compared to 6 digits elsewhere,
    relations, sets, ±, ∞, ...) or a value is not finite."""
    found = values([a, b])
    if found is None:
        return None
    verdicts = {close(x, y) for x, y in found}
    return verdicts.pop() if len(verdicts) == 1 else None


def values(exprs: list[str], points: tuple[tuple[float, ...], ...] = POINTS) -> list[list[complex]] | None:
    """The values of `exprs` (canonical answers) at each of `points` (one value per letter, the same letters for
    all), as one list per point; None when one is outside the grammar or a value is not finite."""
    token_lists = [_tokens(x) for x in exprs]
    if any(t is None for t in token_lists):
        return None
    letters = sorted({t for ts in token_lists for t in ts if len(t) == 1 and t.isalpha() and t not in _CONSTANTS})
    if len(letters) > len(points[0]):
        return None
    out = []
    for point in points:
        env = dict(zip(letters, point, strict=False))
        try:
            row = [_Parser(ts, env).value() for ts in token_lists]
        except (_Unsupported, ArithmeticError, ValueError):
            return None
        if not all(finite(v) for v in row):
            return None
        out.append(row)
    return out


def real_constant(s: str) -> float | None:
    """The value of canonical answer `s` when it is a real constant in this grammar (\\sqrt{2}, 2\\pi, e^2, \\ln 2):
    the same at both points, and real; else None."""
    found = values([s])
    if found is None:
        return None
    (first,), (second,) = found
    if not close(first, second) or abs(first.imag) > _TOLERANCE * max(1.0, abs(first)):
        return None
    return first.real


def _real_side(z: complex) -> complex:
    """A real number with +0.0 as its imaginary part: a minus sign leaves -0.0, which puts a branch cut's functions
    (sqrt, log, powers, the inverse trigonometric ones) on its other side."""
    return complex(z.real, 0.0) if z.imag == 0 else z


def _power(base: complex, exponent: complex | float, real_odd: bool = False) -> complex:
    """A power or root as an answer means it: principal, on the same side of the branch cut as the real base itself
    (\\sqrt{-4} is 2i; see _real_side); with `real_odd` (a base that holds no letter), a negative number to a
    fraction of odd denominator is the real power (\\sqrt[3]{-8} and (-8)^{1/3} are -2, (-8)^{2/3} is 4, not the
    principal 1+1.73i). A base with letters stays principal, so that \\sqrt[3]{x} and x^{1/3} agree at every point."""
    base = _real_side(base)
    if real_odd and base.imag == 0 and base.real < 0 and exponent.imag == 0:
        ratio = Fraction(exponent.real).limit_denominator(_ODD_ROOTS)
        if ratio.denominator % 2 == 1 and close(complex(ratio), complex(exponent)):
            size = (-base.real) ** exponent.real
            return complex(-size if ratio.numerator % 2 else size)
    return cmath.sqrt(base) if exponent == 0.5 else base**exponent


def close(x: complex, y: complex) -> bool:
    return abs(x - y) <= _TOLERANCE * max(1.0, abs(x), abs(y))


def finite(z: complex) -> bool:
    return z == z and abs(z) != float("inf")


def _on_unit_circle(base: complex, exponent: complex) -> bool:
    """i^{2023}, (-1)^{100}: an integer power of a number of modulus 1 stays on the circle, however large (up to a
    million, where the angle still holds 9 digits); other large powers overflow or vanish to 0."""
    whole = exponent.imag == 0 and exponent.real == int(exponent.real) and abs(exponent.real) <= 1e6
    return whole and abs(abs(base) - 1) <= 1e-15


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
        self.letters_read = 0  # letters evaluated so far: a base that read none is a number (see _power)

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
            elif token is not None and (token[0].isalnum() or token in _COMMANDS or token in ("(", "{")):
                v *= self.power()  # implicit product: 5r^5, 2\sqrt{3}, (a+5)(b+2), 2\sin x
            else:
                return v

    def unary(self) -> complex:
        if self.peek() in ("-", "+"):
            return -self.unary() if self.take() == "-" else self.unary()
        return self.power()

    def power(self) -> complex:
        letters = self.letters_read
        base = self.atom()
        if self.peek() == "^":
            self.take()
            exponent = -self.argument() if self.peek() == "-" and self.take() else self.argument()
            if abs(exponent) > 64 and not _on_unit_circle(base, exponent):
                raise _Unsupported  # 10^{10^{10}}: not for floats
            return _power(base, exponent, real_odd=self.letters_read == letters)
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
        if token in ("(", "{", "|"):
            v = self.expr()
            self.take({"(": ")", "{": "}"}.get(token, "|"))
            return abs(v) if token == "|" else v
        if token in _FUNCTIONS:
            return self._function(_FUNCTIONS[token])
        if token == "\\frac":
            numerator = self.argument()
            return numerator / self.argument()
        if token == "\\sqrt":
            if self.peek() == "[":
                self.take()
                index = self.expr()
                self.take("]")
                letters = self.letters_read
                radicand = self.argument()
                return _power(radicand, 1 / index, real_odd=self.letters_read == letters)
            return _power(self.argument(), 0.5)
        return self._letter_or_constant(token)

    def _function(self, f) -> complex:
        """\\sin^2 x, \\sin(x)^2, \\ln 2x: an optional power, then a parenthesized or braced argument, or else the
        product of the numbers and letters that follow (\\sin 2x is sin(2x), \\sin x\\cos x two factors)."""
        exponent = None
        if self.peek() == "^":
            self.take()
            exponent = self.argument()
            if exponent.real < 0:
                raise _Unsupported  # \sin^{-1} x: the inverse function, not a power
        if self.peek() in ("(", "{"):
            argument = self.atom()
        else:
            argument = self.power()
            while (token := self.peek()) is not None and (token[0].isalnum() or token == "\\pi"):
                argument *= self.power()
        v = f(_real_side(argument))  # \ln(-2) is ln 2 + πi, as for -2 itself, not its -0.0 imaginary part's -πi
        return v if exponent is None else _power(v, exponent)

    def _letter_or_constant(self, token: str) -> complex:
        if token == "\\pi":
            return complex(cmath.pi)
        if token == "e":
            return complex(cmath.e)
        if token == "i":
            return 1j
        if len(token) == 1 and token.isalpha():
            self.letters_read += 1
            return complex(self.env[token])
        raise _Unsupported
