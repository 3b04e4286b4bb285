"""What a runtime schedule's JSON may hold: only what PostgreSQL's `jsonb`, the workflow
payloads and every JSON reader take, each refusal naming the field.

A JSON line or a `--params` is read by `read_json`: a number of 5,000 digits is a value
the checks refuse, not the interpreter's `ValueError`, and a line nested 100,000 deep is
named by its field, not a `RecursionError`. Then `json_problem` names the first part of a
value that cannot be stored: a string holding NUL (`jsonb` refuses `\\u0000`) or a lone
surrogate (not UTF-8), an integer outside 64 bits, a number that is not finite, an object
or array nested deeper than `MAX_DEPTH`. `parse_json` does both.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

MAX_DEPTH = 32  # params nest at most this deep
MAX_INTEGER = 2**63 - 1  # what a bigint, and most JSON readers, hold exactly
_LOG10_2 = math.log10(2)
# A JSON string (escapes and all) or a bracket: enough to follow the nesting of a text
# `json.loads` could not read for its depth.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')
_SURROGATE = re.compile("[\ud800-\udfff]")


class JsonTextError(ValueError):
    """A JSON text that cannot be read; the message names where, or the field."""


class Huge:
    """An integer read from JSON with more digits than anything stored holds (`_integer`):
    kept as its count of digits, which `json_problem` reports."""

    def __init__(self, digits: int) -> None:
        self.digits = digits

    def __repr__(self) -> str:
        return f"<an integer of {self.digits} digits>"


def _integer(text: str) -> int | Huge:
    digits = len(text.lstrip("-"))
    return Huge(digits) if digits > 19 else int(text)


def read_json(text: str) -> Any:
    """`text` as JSON, a huge integer as a `Huge`; or `JsonTextError`: not JSON (where),
    or nested too deep for the reader (under which top-level field, for an object)."""
    try:
        return json.loads(text, parse_int=_integer)
    except json.JSONDecodeError as exc:
        raise JsonTextError(f"not JSON: {exc.msg} at column {exc.colno}") from None
    except RecursionError:
        field = _too_deep(text)
        where = f"{field}: " if field else ""
        raise JsonTextError(f"{where}nested deeper than {MAX_DEPTH} levels") from None


def parse_json(text: str) -> Any:
    """`text` as JSON that can be stored (`read_json`, then `json_problem`), or one
    `JsonTextError` naming the part that cannot."""
    value = read_json(text)
    if (problem := json_problem(value)) is not None:
        raise JsonTextError(problem_text(*problem))
    return value


def problem_text(path: str, problem: str) -> str:
    """`params.label: must hold no NUL character`, the path cut to a readable length."""
    if not path:
        return problem
    return f"{path if len(path) <= 100 else path[:100] + '...'}: {problem}"


def _too_deep(text: str) -> str | None:
    """The top-level field of a JSON object `text` whose value nests too deep (None: not
    an object's field)."""
    depth, key = 0, None
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token[0] == '"':
            key = token if depth == 1 else key
        elif token in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return _shown_key(key) if key else None
        else:
            depth -= 1
    return None


def _shown_key(token: str) -> str:
    try:
        return str(json.loads(token))[:80]
    except ValueError:
        return token[:80]


def json_problem(value: Any, path: str = "", depth: int = MAX_DEPTH) -> tuple[str, str] | None:
    """The first part of `value` (JSON as Python reads it) that cannot be stored, as
    (its path below `path`, e.g. `params.label`, and what is wrong); None if all can.
    Iterative: a value nested 100,000 deep is refused, not a `RecursionError`."""
    stack: list[tuple[Any, str, int]] = [(value, path, 0)]
    while stack:
        item, where, level = stack.pop()
        if isinstance(item, dict | list | tuple):
            if level >= depth:
                return where, f"nested deeper than {depth} levels"
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            for key, inner in pairs:
                if isinstance(item, dict) and (problem := _key_problem(key)):
                    return where, problem
                stack.append((inner, _below(where, key), level + 1))
        elif (problem := _scalar_problem(item)) is not None:
            return where, problem
    return None


def _below(path: str, key: Any) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key[:80]}" if path else key[:80]


def _key_problem(key: Any) -> str | None:
    if not isinstance(key, str):
        return f"object keys are text, got {type(key).__name__}"
    problem = _text_problem(key)
    return f"key {key[:80]!r}: {problem}" if problem else None


def _text_problem(text: str) -> str | None:
    if "\x00" in text:
        return "must hold no NUL character (\\u0000)"
    if _SURROGATE.search(text):
        return "must be Unicode text: it holds a lone surrogate (\\ud800-\\udfff)"
    return None


def _scalar_problem(item: Any) -> str | None:
    if isinstance(item, str):
        return _text_problem(item)
    if isinstance(item, Huge):
        return f"must be an integer within +-{MAX_INTEGER}, got one of {item.digits} digits"
    if isinstance(item, bool):
        return None
    if isinstance(item, int) and abs(item) > MAX_INTEGER:
        digits = int(item.bit_length() * _LOG10_2) + 1
        return f"must be an integer within +-{MAX_INTEGER}, got one of about {digits} digits"
    if isinstance(item, float) and not math.isfinite(item):
        return f"must be a finite number, got {item}"
    return None
