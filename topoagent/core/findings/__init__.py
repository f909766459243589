"""Findings: what is wrong with a host's placement, with evidence, a severity and a remedy.

One catalogue, the checks by family, evidence chosen once:

- :mod:`~topoagent.core.findings.finding`: the types (:class:`Severity`, :class:`Evidence`,
  :class:`Finding`) and the one order (:func:`sort_findings`);
- :mod:`~topoagent.core.findings.catalogue`: one entry per code (severity rule, what proves it,
  what it means, message and remedy templates per case and host kind, examples);
- :mod:`~topoagent.core.findings.context`: what every check shares, and the one place
  evidence is spelled (a sysfs file, a pasted token, a path);
- the families of checks: :mod:`~topoagent.core.findings.placement` (GPU-NIC placement),
  :mod:`~topoagent.core.findings.rails` (the GPU-NIC pairing, DRA), :mod:`~topoagent.core.findings.peer`
  (ACS, IOMMU, peer memory), :mod:`~topoagent.core.findings.pcie` (links, AER, fallen off
  the bus), :mod:`~topoagent.core.findings.numa` (NUMA, guests), :mod:`~topoagent.core.findings.nvml`
  (NVLink P2P); :mod:`~topoagent.core.findings.checks` runs them (:func:`find_all`);
- the comparisons: :mod:`~topoagent.core.findings.crosscheck` (other tools' output) and
  :mod:`~topoagent.core.findings.expect` (an expected topology);
- :mod:`~topoagent.core.findings.doc`: ``docs/findings.md`` from the catalogue
  (``python -m topoagent.core.findings`` writes it).
"""

from __future__ import annotations

from topoagent.core.findings.catalogue import CATALOGUE, Entry
from topoagent.core.findings.checks import find_all
from topoagent.core.findings.finding import Evidence, Finding, Severity, sort_findings

__all__ = ["CATALOGUE", "Entry", "Evidence", "Finding", "Severity", "find_all", "sort_findings"]
