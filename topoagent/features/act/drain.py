"""Whether a Slurm node should be drained or resumed, from its findings and its current reason.

Pure: ``topoagent health`` (:mod:`topoagent.features.act.health`) reads the node's reason with
``scontrol show node`` and runs what :func:`decide` says.  The one rule that keeps it safe on
a shared cluster: topoagent marks its own drains with the reason prefix ``topoagent:`` and
touches no node drained for another reason (an operator's, or another health check's).

    findings at/above --fail-on   current reason       action
    yes                           none                 drain
    yes                           topoagent's, same    none (already drained for it)
    yes                           topoagent's, other   drain (the reason is brought up to date)
    yes                           someone else's       none (left alone)
    no                            topoagent's          resume
    no                            none / someone's     none
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from enum import Enum

import msgspec

from topoagent.core.findings import Finding

#: Every reason topoagent sets starts with this; it resumes only nodes whose reason does.
PREFIX = "topoagent:"
#: Longest reason written: ``sinfo -R`` shows reasons in a column, and one line is enough.
MAX_REASON = 100

#: ``scontrol show node`` prints ``Reason=<text> [<user>@<time>]`` (slurm src/api/node_info.c,
#: ``slurm_sprint_node_table``): the reason runs to the end of its line, then who set it, when.
_REASON = re.compile(r"(?:^|\s)Reason=(.*)$", re.MULTILINE)
_SETTER = re.compile(r"\s*\[[^\[\]]*@[^\[\]]*\]\s*$")
#: What a reason may hold: one line of plain printable ASCII, safe inside double quotes in a shell.
_UNSAFE = re.compile(r"[^A-Za-z0-9 _.,:;()+/=@%-]")


class Action(str, Enum):
    """What ``topoagent health`` does to the node."""

    NONE = "none"
    DRAIN = "drain"
    RESUME = "resume"


class Decision(msgspec.Struct, frozen=True):
    """The action, the reason to set (for a drain) and why, in words."""

    action: Action
    reason: str | None
    why: str


class NodeState(msgspec.Struct, frozen=True):
    """What ``scontrol show node`` says of the node that the decision needs: its current reason, if any."""

    reason: str | None


def clean_reason(text: str) -> str:
    """``text`` as a reason scontrol and a shell both take whole: one line, printable ASCII
    without quotes, backslashes or ``$``, at most :data:`MAX_REASON` characters."""
    flat = " ".join(_UNSAFE.sub("?", text).split())
    return flat if len(flat) <= MAX_REASON else flat[: MAX_REASON - 3].rstrip() + "..."


def drain_reason(bad: Sequence[Finding]) -> str | None:
    """The reason to drain for (``topoagent: <CODE> <subject>``), or None when no finding is
    at or above ``--fail-on`` (``bad``: the scan's :meth:`~topoagent.core.result.ScanResult.failing`,
    the one rule every verdict uses).  The worst finding names it (findings come most severe
    first); ``(+N more)`` counts the others."""
    if not bad:
        return None
    worst = max(bad, key=lambda f: f.severity)  # the first of the worst: the scan's own order
    words = [PREFIX, worst.code, *worst.subjects[:1]]
    if len(bad) > 1:
        words.append(f"(+{len(bad) - 1} more)")
    return clean_reason(" ".join(words))


def parse_show_node(text: str) -> NodeState:
    """The reason in ``scontrol show node NAME`` output (without its ``[user@time]`` suffix;
    None when the node has none)."""
    m = _REASON.search(text)
    reason = _SETTER.sub("", m.group(1)).strip() if m else ""
    return NodeState(reason or None)


def is_ours(reason: str | None) -> bool:
    """Whether topoagent set this reason."""
    return reason is not None and reason.startswith(PREFIX)


def decide(wanted: str | None, current: str | None) -> Decision:
    """What to do, given the reason topoagent would drain for (None: healthy) and the node's
    current reason (None: none).  See the module docstring for the table."""
    if current is not None and not is_ours(current):
        return Decision(Action.NONE, None, f"left alone: drained or marked by someone else ({current!r})")
    if wanted is not None:
        if current == wanted:
            return Decision(Action.NONE, None, "already drained by topoagent for this")
        return Decision(Action.DRAIN, wanted, "findings at or above --fail-on")
    if current is not None:
        return Decision(Action.RESUME, None, f"healthy again: resuming topoagent's own drain ({current!r})")
    return Decision(Action.NONE, None, "healthy")


def scontrol_argv(node: str, decision: Decision) -> tuple[str, ...] | None:
    """The ``scontrol`` command line that carries out the decision (None: nothing to run)."""
    if decision.action is Action.DRAIN:
        return ("scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={decision.reason}")
    if decision.action is Action.RESUME:
        return ("scontrol", "update", f"NodeName={node}", "State=RESUME")
    return None


def shell_line(argv: Sequence[str]) -> str:
    """A command line as a person would type it: ``Reason="..."`` quoted (the reason holds no
    character that double quotes leave special; :func:`clean_reason`)."""
    return " ".join(f'{a.partition("=")[0]}="{a.partition("=")[2]}"' if " " in a and "=" in a else a for a in argv)
