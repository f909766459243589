"""NVLink as NVML reports it: NVLINK_P2P_DISABLED (its words and rules:
:mod:`~topoagent.core.findings.catalogue`)."""

from __future__ import annotations

from topoagent.core.findings.context import Context
from topoagent.core.findings.finding import Evidence, Finding


def check_nvlink_p2p(c: Context) -> list[Finding]:
    """NVLINK_P2P_DISABLED: NVLinked GPUs whose NVML P2P status is not OK."""
    out = []
    for p in c.paths:
        if not p.nvlinks:
            continue
        a, b = c.dev(p.a), c.dev(p.b)
        rec = a.nvml
        if rec is not None and b.bdf in rec.p2p_not_ok:
            out.append(
                c.finding(
                    "NVLINK_P2P_DISABLED",
                    [a.id, b.id],
                    [Evidence(f"nvml:nvmlDeviceGetP2PStatus({a.bdf},{b.bdf},READ)", "not OK")],
                    gpu=a.id,
                    peer=b.id,
                    nvlinks=p.nvlinks,
                )
            )
    return out
