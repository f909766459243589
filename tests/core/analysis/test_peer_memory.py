"""GPUDirect RDMA's peer memory: one predicate (``Snapshot.peer_memory``) that the finding,
the fingerprint and ``fix peermem`` all use, so they never disagree."""

from __future__ import annotations

import msgspec
import pytest

from topoagent.core.analysis.fingerprint import peer_memory
from topoagent.core.analysis.peermem import peermem_need
from topoagent.core.result import analyse
from topoagent.core.snapshot import Snapshot

#: (root, modules, memory_peers) -> peer memory present (None: unknown)
CASES = [
    ("/", (), (), False),
    ("/", ("nvidia", "mlx5_core"), (), False),
    ("/", ("nvidia", "nvidia_peermem"), (), True),
    ("/", ("nv_peer_mem",), (), True),
    ("/", (), ("nv_mem",), True),
    ("/", ("nvidia_uvm", "nvidia_peermemx"), (), False),  # whole names only
    (None, ("nvidia_peermem",), (), None),  # pasted output: modules unknown
    (None, (), (), None),
]


@pytest.mark.parametrize(("root", "modules", "peers", "want"), CASES)
def test_peer_memory_table(root, modules, peers, want):
    assert Snapshot(root=root, modules=modules, memory_peers=peers).peer_memory is want


@pytest.mark.parametrize(("root", "modules", "peers", "want"), [c for c in CASES if c[0] is not None])
def test_finding_fingerprint_and_fix_agree(fixture_root, root, modules, peers, want):
    """dgx-h100 has NVIDIA GPUs beside RDMA NICs: each consumer follows the one predicate."""
    from topoagent.core.api import read_host

    snap = msgspec.structs.replace(read_host(fixture_root("dgx-h100"), nvml=False), modules=modules, memory_peers=peers)
    result = analyse(snap)
    assert peer_memory(result.topology) is want
    assert any(f.code == "NO_PEER_MEMORY" for f in result.findings) is (not want)
    need = peermem_need(result.topology, result.rails, dmabuf=False)
    assert need.needed is (not want), need.why
