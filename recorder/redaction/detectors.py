"""The built-in detectors: a regular expression that finds candidates, and for some a check
that a candidate really is one (a card number passes Luhn, an IP address parses).

Each pattern is written to be joined with others in one alternation (no groups of its own
that capture, no anchors but lookarounds), so that a string is searched once for all rules.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

# Local part and domain of an address as people write them (ASCII).
EMAIL = (
    r"[A-Za-z0-9._%+-]+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"
)

# An international or national number with some structure: a leading +, a bracketed area
# code or separators between groups (a bare run of digits is far more often an id, a count
# or a timestamp than a phone number). 9 to 15 digits, checked after the match; never a
# part of a longer group of numbers (a card that failed its check is not a phone).
PHONE = (
    r"(?<![\w+])(?<!\d[ .-])(?:\+\d{1,3}[ .-]?)?(?:\(\d{1,4}\)[ .-]?)?\d{2,4}"
    r"(?:[ .-]\d{2,4}){1,4}(?!\w)(?![ .-]\d)"
    r"|(?<![\w+])\+\d{8,14}(?!\w)"
)

# 13 to 19 digits, optionally grouped by spaces or dashes; Luhn-checked after the match.
CARD = r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d])"

# Bearer credentials and the common API key shapes: OpenAI/Anthropic (sk-), GitHub
# (ghp_, gho_, ghu_, ghs_, ghr_, github_pat_), GitLab (glpat-), AWS access keys (AKIA,
# ASIA), Slack (xox?-), Google (AIza), Stripe (sk_live_, rk_test_...), and JWTs.
TOKEN = (
    r"(?i:bearer)\s+[A-Za-z0-9\-._~+/]{8,}=*"
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

_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
IP = (
    rf"(?<![\w.]){_OCTET}(?:\.{_OCTET}){{3}}(?!\.?\d)(?!\w)"
    r"|(?<![\w:.])(?:[0-9A-Fa-f]{1,4}:){1,7}(?::|(?::?[0-9A-Fa-f]{1,4}){1,7})(?![\w:])"
    r"|(?<![\w:])::(?:[0-9A-Fa-f]{1,4}(?::[0-9A-Fa-f]{1,4}){0,6})?(?![\w:])"
)

PATTERNS: dict[str, str] = {
    "email": EMAIL,
    "phone": PHONE,
    "card": CARD,
    "token": TOKEN,
    "ip": IP,
}


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
