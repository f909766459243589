"""What a scan is asked to read: the inputs every command hands to :func:`topoagent.core.api.run`.

Plain data, no I/O: the CLI fills it from its options (reading pasted files itself), the daemon
from its config, an API user directly.
"""

from __future__ import annotations

from typing import Any

import msgspec

from topoagent.core.tree import Root

__all__ = ["Inputs", "NVML_AUTO", "NVML_OFF"]

#: Ask NVML only when scanning the live host (``/``): NVML always describes the machine it
#: runs on, never a fake or captured root.
NVML_AUTO = "auto"
#: Never ask NVML.
NVML_OFF = "off"


class Inputs(msgspec.Struct, frozen=True):
    """The inputs of one scan.

    ``root`` is the host tree to read: a directory (``/``, a fake or captured root) or a capture
    archive read into memory (:func:`topoagent.core.read.archive.resolve_root` turns a path into
    either), named in reports by the archive's path.  ``nvml`` is
    :data:`NVML_AUTO`, :data:`NVML_OFF`, or a module-like stand-in for ``pynvml`` (a recording,
    in tests).  The three ``*_text`` fields hold pasted tool output; when any is set the scan is
    *offline*: sysfs and NVML are not read.  ``cross_check`` runs this host's ``nvidia-smi`` and
    ``lspci`` too (live host only); ``runners`` replaces those tools (tests).
    ``paste_texts`` are whole pastes (``--paste``), read by :func:`topoagent.core.paste.whole.read_pastes`.
    Equality and hashing ignore ``runners`` and ``origins``.
    """

    root: Root = "/"
    nvml: Any = NVML_AUTO
    nvidia_smi_topo_text: str | None = None
    lspci_tree_text: str | None = None
    lspci_verbose_text: str | None = None
    #: Whole pastes (``--paste``): texts in which every tool output is found and read.
    paste_texts: tuple[str, ...] = ()
    cross_check: bool = False
    tool_timeout: float = 10.0
    runners: Any = None
    #: Where each pasted text came from (``{"nvidia_smi_topo_text": "--nvidia-smi-topo t.txt"}``),
    #: for error messages.
    origins: Any = None

    def _compared(self) -> tuple[Any, ...]:
        # What a scan reads; ``runners`` (test stand-ins) and ``origins`` (labels for messages)
        # change how, not what, so equality and hashing leave them out.
        return (
            self.root,
            self.nvml,
            self.nvidia_smi_topo_text,
            self.lspci_tree_text,
            self.lspci_verbose_text,
            self.paste_texts,
            self.cross_check,
            self.tool_timeout,
        )

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._compared() == other._compared()

    def __hash__(self) -> int:
        return hash(self._compared())

    @property
    def offline(self) -> bool:
        """Pasted tool output instead of a host tree."""
        return bool(self.paste_texts) or any(
            t is not None for t in (self.nvidia_smi_topo_text, self.lspci_tree_text, self.lspci_verbose_text)
        )
