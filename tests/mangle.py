"""Mutations of sample texts for parser fuzz tests: truncation, deletion, insertion, glue, shuffle."""

from __future__ import annotations

import random


def mangle(rng: random.Random, text: str, alphabet: str, glue: tuple[str, ...] = ()) -> str:
    """One random damage to ``text``: what real pastes and bad captures do to tool output.

    ``alphabet`` feeds insertions and pure noise; ``glue`` lists separators that a paste may
    swallow (tabs, runs of spaces), removed all at once when chosen.
    """
    ops = 5 + bool(glue)
    op = rng.randrange(ops)
    if op == 0:
        return text[: rng.randrange(len(text) + 1)]
    if op == 1:
        for _ in range(rng.randrange(1, 12)):
            i = rng.randrange(len(text) + 1)
            text = text[:i] + text[i + 1 :]
        return text
    if op == 2:
        for _ in range(rng.randrange(1, 12)):
            i = rng.randrange(len(text) + 1)
            text = text[:i] + rng.choice(alphabet) + text[i:]
        return text
    if op == 3:
        lines = text.split("\n")
        rng.shuffle(lines)
        return "\n".join(lines)
    if op == 4:
        return "".join(rng.choice(alphabet) for _ in range(rng.randrange(200)))
    return text.replace(rng.choice(glue), "")
