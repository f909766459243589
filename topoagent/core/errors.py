"""The project's errors: every exception topoagent raises on purpose derives from
:class:`TopoagentError`, so a caller (the CLI, the daemon, an API user) can catch them all
with one clause and let real bugs through.
"""

from __future__ import annotations

__all__ = ["InputError", "OfflineInputError", "TopoagentError"]


class TopoagentError(Exception):
    """Base of every error topoagent raises on purpose (bad input, nothing to scan, refusal)."""


class InputError(TopoagentError, ValueError):
    """Input that cannot be used: text a parser rejects, bytes that are not a config space,
    a CPU list that is not one.  Also a :class:`ValueError`, as parsers' callers expect."""


class OfflineInputError(InputError):
    """Pasted output that cannot be used: text a parser rejects, or outputs that cannot
    describe one host together (counts that disagree).

    ``input`` names the argument at fault (``nvidia_smi_topo``, ``lspci_tree``,
    ``lspci_verbose``), None when the fault lies between them.
    """

    def __init__(self, message: str, input: str | None = None) -> None:
        super().__init__(message)
        self.input = input
