"""The built-in detectors: a regular expression that finds candidates, and for some a check
that a candidate really is one (a card number passes Luhn, an IP address parses).

Each pattern is written to be joined with others in one alternation (no groups of its own
that capture, no anchors but lookarounds), so that a string is searched once for all rules.

Searching a string costs about 40 ns a character per pattern that does not begin with a
literal; nearly every string holds nothing to redact. So ``features`` first tells, with one
pass over a short string's bytes or a few substring tests, which detectors could match: an
email needs an ``@``, a card a digit, a phone number a digit beside a space, a dash, a
``+`` or a bracket, an IPv4 address two dots between digits, an IPv6 address a colon beside
a hex digit or another colon, a token one of its prefixes. Only those are searched for.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable

# Local part and domain of an address as people write them (ASCII). Begun only where a
# local part can begin: otherwise each word is scanned again from each of its letters.
EMAIL = r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"

# An international or national number with some structure: a leading +, a bracketed area
# code or separators between groups (a bare run of digits is far more often an id, a count
# or a timestamp than a phone number). 9 to 15 digits, checked after the match; never a
# part of a longer group of numbers (a card that failed its check is not a phone).
_GROUPS = r"(?:[ -]\d{2,4}){1,4}(?!\w)(?![ -]\d)"
PHONE = (  # (each branch begins with the character it needs: searched fast)
    rf"\+(?<![\w+]\+)\d{{1,3}}[ -]?(?:\(\d{{1,4}}\)[ -]?)?\d{{2,4}}{_GROUPS}"
    rf"|\((?<![\w+]\()\d{{1,4}}\)[ -]?\d{{2,4}}{_GROUPS}"
    rf"|\d(?<![\w+]\d)(?<!\d[ -]\d)\d{{1,3}}{_GROUPS}"
    r"|\+(?<![\w+]\+)\d{8,14}(?!\w)"
)

# 13 to 19 digits, optionally grouped by spaces or dashes; Luhn-checked after the match.
# Never the digits of a decimal fraction (0.14471564784405389).
CARD = r"\d(?<![\d.,-]\d)(?:[ -]?\d){12,18}(?!\d)(?![.,]\d)"

BITS: dict[str, int] = {"email": 1, "card": 2, "phone": 4, "ip": 8, "token": 16}

# Bearer credentials and the common API key shapes: OpenAI/Anthropic (sk-), GitHub
# (ghp_, gho_, ghu_, ghs_, ghr_, github_pat_), GitLab (glpat-), AWS access keys (AKIA,
# ASIA), Slack (xox?-), Google (AIza), Stripe (sk_live_, rk_test_...), and JWTs.
TOKEN = (
    r"(?:Bearer|bearer|BEARER)\s+[A-Za-z0-9\-._~+/]{8,}=*"
    r"|\bsk-[A-Za-z0-9_-]{16,}"
    r"|\bgh[pousr]_[A-Za-z0-9]{20,}"
    r"|\bgithub_pat_[A-Za-z0-9_]{20,}"
    r"|\bglpat-[A-Za-z0-9_-]{20,}"
    r"|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"
    r"|\bxox[abposr]-[A-Za-z0-9-]{10,}"
    r"|\bAIza[0-9A-Za-z_-]{35}"
    r"|\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}"
    r"|\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
)

# IPv4: four groups of 1-3 digits (their range is the check's: ``ipaddress`` parses it).
_HEX = "[0-9A-Fa-f]"
IP = (
    r"\d(?<![\w.]\d)\d{0,2}(?:\.\d{1,3}){3}(?!\.?\d)(?!\w)"
    rf"|{_HEX}(?<![\w:.]{_HEX}){_HEX}{{0,3}}:(?:{_HEX}{{1,4}}:){{0,6}}"
    rf"(?::|(?::?{_HEX}{{1,4}}){{1,7}})(?![\w:])"
    rf"|::(?<![\w:]::)(?:{_HEX}{{1,4}}(?::{_HEX}{{1,4}}){{0,6}})?(?![\w:])"
)

PATTERNS: dict[str, str] = {
    "email": EMAIL,
    "phone": PHONE,
    "card": CARD,
    "token": TOKEN,
    "ip": IP,
}


# Every token shape holds one of these. Each branch begins with a character that is rare in
# text (- _ A J B b) and looks behind for the rest, so the search only stops there; the
# substring tests before it spare most strings even that.
_TOKEN_PREFIX = re.compile(
    r"-(?<=sk-)|-(?<=glpat-)|-(?<=xox[abposr]-)"
    r"|_(?<=gh[pousr]_)|_(?<=github_)|_live_|_test_"
    r"|AKIA|ASIA|AIza|J(?<=eyJ)|Bearer|BEARER|bearer"
)


# What a phone number, an IPv4 or an IPv6 address cannot do without: looked for only in a
# string that has a digit (or a colon), so that JSON numbers in text (0.0910377069570938)
# are searched for cards alone. Each begins with its rarest character and looks behind for
# the one before it (``\d[ -]\d`` written as ``[ -](?<=\d[ -])\d``): the search then stops
# only at that character, where one beginning with a digit or a hex digit tried a match at
# each, 4-8x as long on a tool result's JSON.
_PHONE_HINT = re.compile(r"[ -](?<=\d[ -])\d")
_PHONE_OPENING = re.compile(r"[+(]\d")
_IPV4_HINT = re.compile(r"\.(?<=\d\.)\d{1,3}\.\d")
_IPV6_HINT = re.compile(r":(?<=[0-9A-Fa-f]:)|::")


# The characters that some detector or hint below needs (a digit, ``@``, ``:``, and those
# of the token prefixes but "Bearer"'s) as 0xFF, every other byte as 0. Nearly every
# string has none: its UTF-8 mapped through this table tells so in one pass (UTF-8 never
# encodes another character with an ASCII byte), where the substring tests below take a
# dozen. In a long string those stop at their first find and cost less than a pass.
_SIGNALS = bytes(0xFF if chr(i) in "0123456789@:_AJ-" else 0 for i in range(256))
_SHORT = 128  # characters


def features(s: str) -> int:
    """The detectors (``BITS``) that could match in ``s``: a superset, never fewer."""
    if len(s) <= _SHORT:
        try:
            mapped = s.encode().translate(_SIGNALS)
        except UnicodeEncodeError:  # a lone surrogate
            mapped = s.encode("utf-8", "surrogatepass").translate(_SIGNALS)
        if 0xFF not in mapped:  # then only a bearer token could be there
            if ("earer" in s or "EARER" in s) and _TOKEN_PREFIX.search(s):
                return BITS["token"]
            return 0
    found = 1 if "@" in s else 0
    if (
        "0" in s
        or "1" in s
        or "2" in s
        or "3" in s
        or "4" in s
        or "5" in s
        or "6" in s
        or "7" in s
        or "8" in s
        or "9" in s
    ):
        found |= BITS["card"]
        if _PHONE_HINT.search(s) or (("+" in s or "(" in s) and _PHONE_OPENING.search(s)):
            found |= BITS["phone"]
        if "." in s and _IPV4_HINT.search(s):
            found |= BITS["ip"]
    if ":" in s and _IPV6_HINT.search(s):
        found |= BITS["ip"]
    if ("-" in s or "_" in s or "A" in s or "J" in s or "earer" in s or "EARER" in s) and (
        _TOKEN_PREFIX.search(s)
    ):
        found |= BITS["token"]
    return found


def luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def is_card(text: str) -> bool:
    digits = text.replace(" ", "").replace("-", "")
    return 13 <= len(digits) <= 19 and luhn(digits)


def is_phone(text: str) -> bool:
    digits = sum(ch.isdigit() for ch in text)
    return 9 <= digits <= 15


def is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


CHECKS: dict[str, Callable[[str], bool]] = {
    "card": is_card,
    "phone": is_phone,
    "ip": is_ip,
}
