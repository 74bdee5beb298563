"""Quantities written with what the bare number leaves out: a number followed by its unit (`9.8 m/s^2`, `10cm`,
`5\\,\\mathrm{kg}`), the units being the symbols of the SI (BIPM's SI Brochure, 9th edition: base and derived units,
their decimal prefixes, and the non-SI units accepted for use with it) and a few customary ones; and clock times,
with or without seconds or a 12-hour suffix (`3:00 PM` is `15:00`, `9:30` is `9:30:00`)."""

from __future__ import annotations

import re
from typing import NamedTuple

_PREFIXES = ("Y", "Z", "E", "P", "T", "G", "M", "k", "h", "da", "d", "c", "m", "u", "µ", "μ", "n", "p", "f")
# SI base and derived units, and the non-SI units accepted for use with the SI (SI Brochure, tables 2, 4 and 8)
_SI = {
    "m", "g", "s", "A", "K", "mol", "cd", "Hz", "N", "Pa", "J", "W", "C", "V", "F", "Ω", "ohm", "S", "Wb", "T", "H",
    "lm", "lx", "Bq", "Gy", "Sv", "kat", "L", "l", "eV", "t", "Da", "bar", "atm", "rad", "sr",
}  # fmt: skip
_UNPREFIXED = {"min", "h", "d", "ha", "au", "°C", "°F", "°", "ft", "in", "mi", "yd", "lb", "oz", "mph", "kph", "hr"}
_SEPARATOR = re.compile(r"\s*(?:/|\*|·|\\cdot)\s*|\s+")
_UNIT_POWER = re.compile(r"(.+?)(?:\^\{?(-?\d)\}?)?")
_NUMBER = (
    r"[+-]?(?:\d[\d,]*(?:\.\d+)?|\.\d+)(?:\s*(?:\\times|\\cdot|×)\s*10\^\{?-?\d+\}?)?|[+-]?\\[dt]?frac\{\d+\}\{\d+\}"
)
_QUANTITY = re.compile(rf"({_NUMBER})(\s*)(.+)")
_LATEX_SPACE = re.compile(r"\\[,;:! ]|~|\\q?quad(?![A-Za-z])")
_LATEX_TEXT = re.compile(r"\\(?:text|mathrm|textrm|mbox|operatorname)\s*\{([^{}]*)\}")

_CLOCK = re.compile(r"(\d{1,2})(?::(\d{2})(?::(\d{2}))?)?\s*(?:([ap])\.?\s?m\.?)?", re.I)


def _plain(s: str) -> str:
    """`s` without LaTeX spacing and with \\text{}/\\mathrm{} bodies as plain text: 5\\,\\mathrm{m/s} → 5 m/s."""
    s = _LATEX_TEXT.sub(r" \1 ", _LATEX_SPACE.sub(" ", s))
    return re.sub(r"\s+", " ", s.replace("^\\circ", "°").replace("\\Omega", "Ω").replace("\\mu ", "µ")).strip()


def number_with_unit(s: str) -> str | None:
    """The number of `s` when `s` is a number followed by a unit (every factor of it a unit symbol, optionally with
    a power: m/s^2, kg\\cdot m^{2}, km/h), else None. A one-letter unit needs a space before it (10 m; 10m may be
    ten times m); a number without a unit is None."""
    m = _QUANTITY.fullmatch(_plain(s))
    if not m:
        return None
    number, space, unit = m.groups()
    factors = [f for f in _SEPARATOR.split(unit.strip()) if f]
    if not factors or not all(_is_unit(f) for f in factors):
        return None
    if not space and len(factors) == 1 and len(_UNIT_POWER.fullmatch(factors[0]).group(1)) == 1:
        return None
    return number


def _is_unit(factor: str) -> bool:
    symbol = _UNIT_POWER.fullmatch(factor).group(1).strip("{}")
    if symbol in _SI or symbol in _UNPREFIXED:
        return True
    return any(symbol.startswith(p) and symbol[len(p) :] in _SI for p in _PREFIXES)


class Clock(NamedTuple):
    seconds: int  # since midnight
    suffixed: bool  # a 12-hour suffix (am, p.m.) was written
    hour: int  # as written
    with_seconds: bool  # seconds were written


def clock_time(s: str) -> Clock | None:
    """The clock time `s` states: 9:30, 09:30:00, 3:00 PM, 3 p.m., 12:15\\text{ a.m.}; None otherwise. A bare hour needs its suffix."""
    m = _CLOCK.fullmatch(_plain(s))
    if not m:
        return None
    hour, minute, second, half = int(m.group(1)), m.group(2), m.group(3), m.group(4)
    if minute is None and half is None:
        return None
    minute, second = int(minute or 0), int(second or 0)
    if minute > 59 or second > 59 or hour > (12 if half else 23) or (half and hour == 0):
        return None
    if half:
        hour = hour % 12 + (12 if half.lower() == "p" else 0)
    return Clock(hour * 3600 + minute * 60 + second, bool(half), int(m.group(1)), m.group(3) is not None)


def same_time(a: str, b: str) -> bool | None:
    """Whether two clock times are the same time of day, None unless both are clock times. A time with a 12-hour
    suffix equals its 24-hour form, and a bare time with the same clock digits (the suffix left out: 3:00 PM and
    3:00); 3:00 AM and 3:00 PM differ, and so do 3:00:00 and 15:00. Two times written h:mm alone are left to the
    other rules (10:20 and 20:40 may be ratios)."""
    if ":" not in a + b and not re.search(r"\d\s*(?:\\text\{\s*)?[ap]\.?\s?m", a + b, re.I):
        return None
    ta, tb = clock_time(a), clock_time(b)
    if ta is None or tb is None or not (ta.suffixed or tb.suffixed or ta.with_seconds or tb.with_seconds):
        return None  # 10:20 and 20:40 without seconds or a suffix may as well be ratios
    if ta.seconds == tb.seconds:
        return True
    if ta.suffixed == tb.suffixed:
        return False
    suffixed, bare = (ta, tb) if ta.suffixed else (tb, ta)
    return bare.seconds % 3600 == suffixed.seconds % 3600 and bare.hour == suffixed.hour
