"""``topoagent vms``: virtual machines with passthrough GPUs and NICs against the host's NUMA.

Read: :mod:`.libvirt` (virsh), :mod:`.domain` (libvirt domain XML), :mod:`.esxcli` and
:mod:`.vmx` (ESXi's saved text), all pure but the virsh runner.  Advise: :mod:`.advice` (the
host and each VM's verdicts), :mod:`.libvirt_advice`, :mod:`.vmware_advice`.  Render:
:mod:`.text`, :mod:`.report` (the JSON contract), :mod:`.libvirt_xml` (the domain ``--apply``
defines).  Act: :mod:`.backup` (the domain XML kept for ``--undo``).  :mod:`.command` is the CLI.
"""

from __future__ import annotations

from topoagent.core.render import Render, for_people
from topoagent.features.vms import report, text

__all__ = ["FORMATS"]

#: ``vms --format`` name -> renderer.
FORMATS: dict[str, Render] = {"text": for_people(text.render), "json": report.render}
