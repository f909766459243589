"""``plan --format slurm``: ``gres.conf`` lines, one per GPU.

``Cores=`` is in the numbering Slurm documents for gres.conf: *logical* core indices, core 0
being the first core of the first socket -- the "Core L#" of ``lstopo -l`` -- not Linux CPU
ids (slurm.schedmd.com/gres.conf.html, "Cores").  So the line lists the logical indices of the
whole cores that hold the GPU's planned CPUs.  ``Links=`` (NVLink counts to every GPU in PCI
order, ``-1`` for the GPU itself) is written only where NVML reported the links.
``File=/dev/nvidiaN`` uses NVML's minor number where known, else the PCI-order index, which is
the nvidia driver's usual minor numbering (say so in a comment).
"""

from __future__ import annotations

from typing import Any

from topoagent.advice.cores import logical_cores
from topoagent.advice.plan import Plan
from topoagent.digits import is_decimal
from topoagent.outputs.escape import shown
from topoagent.outputs.plan_common import plan_of
from topoagent.result import ScanResult
from topoagent.topology import Device


def gres_type(d: Device, nvml_name: str | None) -> str | None:
    """A short ``Type=``: the first word of the model name that holds a digit (``h100``,
    ``a100``, ``4090``), lowercase: a substring of the name Slurm's NVML autodetection uses."""
    for name in (nvml_name, d.name):
        for word in (name or "").replace("-", " ").split():
            if any(is_decimal(ch) for ch in word) and word.lower() != "nvidia":
                return word.lower()
    return None


def render(result: ScanResult, plan: Plan | None = None, **_: Any) -> str:
    """One ``Name=gpu`` line per GPU with File=, Cores= and (with NVML) Links=."""
    p = plan_of(result, plan)
    topo = result.topology
    nvml = {g.bdf: g for g in topo.snapshot.nvml_gpus}
    has_links = any(g.nvlinks for g in nvml.values())
    lines = [f"# gres.conf for {shown(topo.snapshot.hostname or 'this host')}: topoagent plan --format slurm",
             "# Cores= are Slurm's logical core indices (lstopo -l 'Core L#'), not Linux CPU ids."]
    if p.allowed is not None:
        lines.append(f"# CPUs were limited to those allowed to the caller: {p.allowed}")
    guessed = False
    for g in p.gpus:
        d = topo.by_id(g.gpu)
        assert d is not None
        nv = nvml.get(g.bdf) if g.bdf else None
        minor = nv.minor if nv is not None and nv.minor is not None else g.cuda_index
        guessed = guessed or nv is None or nv.minor is None
        words = ["Name=gpu"]
        kind = gres_type(d, nv.name if nv is not None else None)
        if kind:
            words.append(f"Type={kind}")
        words.append(f"File=/dev/nvidia{minor}")
        cores = logical_cores(p.cores, g.cpus) if g.cpus else None
        if cores:
            words.append(f"Cores={cores}")
        if has_links:
            links = []
            for other in p.gpus:
                if other.gpu == g.gpu:
                    links.append("-1")
                else:
                    path = result.path(g.gpu, other.gpu)
                    links.append(str(path.nvlinks if path is not None else 0))
            words.append(f"Links={','.join(links)}")
        line = " ".join(words)
        if not cores:
            line += f"  # {g.gpu}: no allowed CPU of its own, Cores= left out"
        lines.append(line)
    if guessed and p.gpus:
        lines.append("# /dev/nvidiaN numbers are the PCI-order indices (NVML not asked): check nvidia-smi -q | grep Minor")
    return "\n".join(lines) + "\n"
