"""Every check of an analysed host, and :func:`find_all`, the one call that runs them.

A check is a pure function of the :class:`~topoagent.core.findings.context.Context`; each
family module holds the checks of a few related codes.  The cross-check
(:mod:`~topoagent.core.findings.crosscheck`) and the expectation
(:mod:`~topoagent.core.findings.expect`) compare with other inputs and run where those are given.
"""

from __future__ import annotations

from collections.abc import Callable

from topoagent.core.analysis.paths import Path
from topoagent.core.analysis.rails import Rails
from topoagent.core.findings.context import Context
from topoagent.core.findings.finding import Finding, sort_findings
from topoagent.core.findings.numa import check_numa, check_switch_node, check_vm_flat
from topoagent.core.findings.nvml import check_nvlink_fabric, check_nvlink_p2p
from topoagent.core.findings.pasted import (
    check_aer_logged,
    check_gpu_activity,
    check_nvlink_inactive,
    check_p2p,
    check_ports,
)
from topoagent.core.findings.pcie import check_aer, check_fell_off_bus, check_links
from topoagent.core.findings.peer import check_acs, check_iommu, check_peer_memory
from topoagent.core.findings.placement import check_gpu_nic_placement, check_no_rdma_nic
from topoagent.core.findings.platform import (
    check_platform_acs,
    check_platform_ats,
    check_platform_iommu,
    check_platform_unrecognised,
)
from topoagent.core.findings.rails import check_dra_pcie_root, check_rails
from topoagent.core.topology import Topology

CHECKS: tuple[Callable[[Context], list[Finding]], ...] = (
    check_gpu_nic_placement,
    check_no_rdma_nic,
    check_peer_memory,
    check_acs,
    check_iommu,
    check_platform_acs,
    check_platform_iommu,
    check_platform_ats,
    check_platform_unrecognised,
    check_links,
    check_numa,
    check_switch_node,
    check_rails,
    check_nvlink_p2p,
    check_nvlink_fabric,
    check_vm_flat,
    check_dra_pcie_root,
    check_fell_off_bus,
    check_aer,
    check_gpu_activity,
    check_p2p,
    check_nvlink_inactive,
    check_ports,
    check_aer_logged,
)


def find_all(topo: Topology, paths: tuple[Path, ...], rails: Rails) -> tuple[Finding, ...]:
    """Every finding, most severe first, then by code and subjects (deterministic)."""
    c = Context(topo, paths, rails)
    return sort_findings(f for check in CHECKS for f in check(c))
