"""NVLink as NVML reports it: NVLINK_P2P_DISABLED and NVLINK_FABRIC_NOT_READY (their words and
rules: :mod:`~topoagent.core.findings.catalogue`)."""

from __future__ import annotations

from topoagent.core.findings.context import Context
from topoagent.core.findings.finding import Evidence, Finding, Severity


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


def check_nvlink_fabric(c: Context) -> list[Finding]:
    """NVLINK_FABRIC_NOT_READY: GPUs whose NVLink fabric registration is not complete, or failed
    (NVML's ``nvmlDeviceGetGpuFabricInfoV``: state and status)."""
    out = []
    for g in c.topo.gpus:
        fabric = g.nvml.fabric if g.nvml is not None else None
        if fabric is None or fabric.ready:
            continue
        failed = fabric.state == "completed"
        out.append(
            c.finding(
                "NVLINK_FABRIC_NOT_READY",
                [g.id],
                [
                    Evidence(
                        f"nvml:nvmlDeviceGetGpuFabricInfoV({g.bdf})",
                        f"state {fabric.state}" + (f", status {fabric.status}" if fabric.status else ""),
                    )
                ],
                say="failed" if failed else "",
                severity=Severity.CRITICAL if failed else None,
                gpu=g.id,
                state=fabric.state.replace("_", " "),
                status=fabric.status,
            )
        )
    return out
