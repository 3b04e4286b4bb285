"""Text that reaches an operator's terminal: what stored text may hold, and how it is shown.

An operator's note, a tenant's name or a `--by` is printed by `list`, `show` and `describe`;
a control character in it (an escape sequence that retitles the window or clears the
screen) would act on the terminal of whoever reads it. Writes refuse such text
(`unprintable`), and the commands that print stored text escape what is not printable
anyway (`printable`), for rows written before the check or by another tool.
"""

from __future__ import annotations


def unprintable(text: str) -> str | None:
    """The first character of `text` that is not printable (a control, format or
    separator character other than the space, a lone surrogate), or None."""
    if text.isprintable():
        return None
    return next(ch for ch in text if not ch.isprintable())


def printable(text: str) -> str:
    """`text` with every character that is not printable shown as its escape
    (`\\x1b`, `\\n`, `\\u202e`), so printing it cannot act on a terminal."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)
