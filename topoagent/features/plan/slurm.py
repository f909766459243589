"""``plan --format slurm``: ``gres.conf`` lines, one per GPU, as Slurm itself would accept them.

``Cores=`` is in the numbering Slurm documents for gres.conf: *abstract* core indices, core 0
being the first core of the first socket -- the "Core L#" of ``lstopo -l`` -- not Linux CPU
ids (slurm.schedmd.com/gres.conf.html, "Cores").  By default the line lists every core of the
GPU's socket(s): Slurm allocates GRES cores by socket anyway, and since 24.05.5 slurmd refuses
a ``Cores=`` range that does not cover whole sockets (``_check_core_range_matches_sock`` in
src/interfaces/gres.c) and the node goes invalid.  ``cores="numa"`` writes the GPU's NUMA
node's cores instead, numbered with each NUMA node as a socket, which is right only with
``SlurmdParameters=numa_node_as_socket`` in slurm.conf *and* a NodeName line that counts the
NUMA nodes as sockets: with the line ``slurmd -C`` prints (its two real sockets) Slurm 22.05
keeps allocating by its 2-socket view and gives a GPU the cores of another NUMA node.  The
output prints both lines for slurm.conf, and refuses a host whose NUMA nodes hold different
numbers of cores (no ``Sockets=``/``CoresPerSocket=`` pair describes it).  ``cores="l3cache"``
writes each GPU's own core complexes (the L3 domains a ``--bind core-complex`` plan gives it,
whole), numbered with each L3 as a socket: slurmd counts hwloc's L3 objects as sockets under
``SlurmdParameters=l3cache_as_socket`` (src/slurmd/common/xcpuinfo.c, ``CONF_FLAG_L3CSOCK``),
so these ranges cover whole sockets in its eyes, and ``--gres-flags=enforce-binding`` keeps a
GPU's tasks on its CCDs -- with a NodeName line counting the L3s as sockets, printed beside it
as for ``numa`` (with the line ``slurmd -C`` prints, 2 x 64 on a Genoa, Slurm 22.05 placed 4 of
14 jobs on another GPU's CCDs).

``Type=`` is Slurm's NVML name of the GPU -- ``nvmlDeviceGetName`` lower-cased with spaces as
underscores (``gpu_common_underscorify_tolower``, src/plugins/gpu/common/gpu_common.c) -- and
is left out where NVML did not name the GPU: a PCI database name (``GH100 [H200 ...]``, ``3D
controller``) is not what slurmd detects.  ``Links=`` follows ``_nvml_get_nvlink_info``
(src/plugins/gpu/nvml/gpu_nvml.c): per GPU in NVML (PCI) order, the NVLinks whose remote end
*is that GPU*, ``-1`` for itself; links to an NVSwitch count for nothing, so an NVSwitch system
has all zeros.  Written only where NVML reported every GPU.  ``File=/dev/nvidiaN`` uses NVML's
minor number where known, else the PCI-order index, the nvidia driver's usual minor numbering
(a comment says so).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from topoagent.core import pci
from topoagent.core.advice.plan import GpuPlan, Plan, rocm_index
from topoagent.core.cpuset import CpuSet
from topoagent.core.errors import InputError, TopoagentError
from topoagent.core.render.escape import shown
from topoagent.core.render.verdict import unusable_words
from topoagent.core.result import ScanResult
from topoagent.core.snapshot import NvmlGpu
from topoagent.core.topology import Topology
from topoagent.features.plan.common import plan_of

#: ``--gres-cores`` choices: whole sockets (the default), NUMA nodes as sockets, L3 caches as sockets.
CORE_MODES = ("socket", "numa", "l3cache")


def slurm_type(nvml_name: str | None) -> str | None:
    """Slurm's GRES type of a GPU NVML names: the name lower-cased, spaces as underscores
    (``NVIDIA H100 80GB HBM3`` -> ``nvidia_h100_80gb_hbm3``); None without a usable name."""
    if not nvml_name or not nvml_name.strip():
        return None
    name = nvml_name.strip().lower().replace(" ", "_")
    # gres.conf is a key=value list split on blanks and '#': anything else would end the value.
    if not all(ch.isprintable() and ch not in "#=\t" for ch in name):
        return None
    return name


def slurm_links(gpu_bdf: str | None, nv: NvmlGpu | None, order: Sequence[str | None]) -> str | None:
    """``Links=`` as slurmd's NVML detection computes it: for each GPU of ``order`` (PCI order)
    the NVLinks whose remote end is that GPU, ``-1`` for the GPU itself; None without NVML."""
    if nv is None or gpu_bdf is None:
        return None
    out = []
    for bdf in order:
        if bdf == gpu_bdf:
            out.append("-1")
        else:
            out.append(str(sum(link.count for link in nv.nvlinks if bdf is not None and link.peer_bdf == bdf)))
    return ",".join(out)


def socket_cores(cores: Sequence[CpuSet], package: Mapping[int, int | None], sockets: set[int]) -> CpuSet:
    """Abstract indices of every core of ``sockets`` (``cores`` in Slurm's order)."""
    return CpuSet(i for i, core in enumerate(cores) if package.get(core.first or 0) in sockets)


def numa_order(cores: Sequence[CpuSet], node_of: Mapping[int, int]) -> tuple[CpuSet, ...]:
    """The cores in Slurm's order when each NUMA node (or L3 cache) is a socket: by node (or L3
    domain), then first thread."""
    big = 1 << 30
    return tuple(sorted(cores, key=lambda k: (node_of.get(k.first or 0, big), k.first or 0)))


def numa_node_line(host: str, cores: Sequence[CpuSet], node_of: Mapping[int, int], mode: str = "numa") -> str:
    """slurm.conf's NodeName line with each NUMA node (``mode`` "l3cache": each L3 domain, as
    ``node_of`` numbers them) counted as a socket; InputError where they hold different numbers
    of cores (a Sockets= x CoresPerSocket= grid cannot say it)."""
    per_node: dict[int, int] = {}
    for core in cores:
        node = node_of.get(core.first or 0)
        if node is not None:
            per_node[node] = per_node.get(node, 0) + 1
    counts = sorted(set(per_node.values()))
    threads = sorted({len(core) for core in cores})
    if len(counts) != 1 or len(threads) != 1:
        what = "L3 caches" if mode == "l3cache" else "NUMA nodes"
        shape = ", ".join(f"{'L3' if mode == 'l3cache' else 'node'} {n}: {c}" for n, c in sorted(per_node.items()))
        raise InputError(
            f"--gres-cores {mode}: the {what} hold different numbers of cores ({shape}) or threads "
            "per core; Slurm's NodeName line cannot count them as sockets: use --gres-cores socket"
        )
    name = host.split(".")[0]
    cpus = sum(len(core) for core in cores)
    return f"NodeName={name} CPUs={cpus} Sockets={len(per_node)} CoresPerSocket={counts[0]} ThreadsPerCore={threads[0]}"


def _l3_header(host: str, cores: Sequence[CpuSet], l3_of: Mapping[int, int]) -> list[str]:
    """The comment lines of ``--gres-cores l3cache``: the slurm.conf lines it needs.  Slurm 22.05's
    ``slurmd -C`` still prints the real sockets (2 x 64 on a 2-socket Genoa), and with that
    NodeName line slurmctld keeps its socket view and places a GPU's job on another GPU's CCDs:
    the line counting each L3 as a socket is printed, as for ``numa``."""
    return [
        "# Cores= are each GPU's own core complexes (CPUs sharing one L3 cache, whole), each L3 counted",
        "# as a socket (cores numbered L3 by L3): right only with these lines in slurm.conf (not here),",
        "# for every such node (the NodeName line slurmd -C prints counts real sockets: Slurm then",
        "# keeps that view):",
        "#   SlurmdParameters=l3cache_as_socket",
        f"#   {numa_node_line(host, cores, l3_of, 'l3cache')}",
    ]


def _gpu_cores(
    topo: Topology,
    g: GpuPlan,
    mode: str,
    order: Sequence[CpuSet],
    package: Mapping[int, int | None],
    l3: Sequence[CpuSet],
) -> CpuSet:
    """One GPU's ``Cores=``: its sockets' cores, its NUMA node's, or its core complexes' (whole)."""
    if mode == "socket":
        sockets = _gpu_sockets(topo, g, package)
        return socket_cores(order, package, sockets) if sockets else CpuSet()
    if mode == "numa":
        return CpuSet(i for i, core in enumerate(order) if g.cpus and core & g.cpus)
    mine = CpuSet().union(*g.rank_cpus) if g.rank_cpus else CpuSet()
    own = CpuSet().union(*(d for d in l3 if d & mine)) if mine else CpuSet()
    return CpuSet(i for i, core in enumerate(order) if core & own)


def _gpu_sockets(topo: Topology, g: GpuPlan, package: Mapping[int, int | None]) -> set[int]:
    """The sockets a GPU's ``Cores=`` covers: its own, else those its planned CPUs touch."""
    if g.socket is not None:
        return {g.socket}
    d = topo.by_id(g.gpu)
    if d is not None and d.socket is not None:
        return {d.socket}
    return {p for c in (g.cpus or CpuSet()) if (p := package.get(c)) is not None}


def _amd_only(topo: Topology) -> bool:
    return bool(topo.gpus) and all(g.vendor_id == pci.AMD_ATI for g in topo.gpus)


def rsmi_links(index: int, count: int) -> str:
    """``Links=`` as slurmd's ROCm SMI detection writes it: ``gres_links_create_empty`` -- -1 for
    the GPU itself, 0 for every other (src/plugins/gpu/rsmi/gpu_rsmi.c records no XGMI links,
    only the PCI bus order)."""
    return ",".join("-1" if j == index else "0" for j in range(count))


def _usable_gpus(result: ScanResult, p: Plan, lines: list[str]) -> list[GpuPlan]:
    """The GPUs gres.conf lists: the usable ones (slurmd's autodetection cannot see one that fell
    off the bus either); a comment line in ``lines`` for each left out."""
    for g in p.gpus:
        state = unusable_words(result, g.gpu)
        if state is not None:
            lines.append(f"# {g.gpu} ({shown(g.bdf or g.key or '?')}) left out: {state}")
    return [g for g in p.gpus if g.usable]


def _amd_lines(
    result: ScanResult,
    p: Plan,
    mode: str,
    order: Sequence[CpuSet],
    package: Mapping[int, int | None],
    l3: Sequence[CpuSet],
) -> list[str]:
    """One line per AMD GPU as slurmd's gpu/rsmi autodetection makes it
    (``_get_system_gpu_list_rsmi``): ``File=/dev/dri/renderD<minor>`` (the DRM render minor,
    ``rsmi_dev_drm_render_minor_get``; KFD's ``drm_render_minor``), ``Links=`` in ROCm's device
    order, and ``Cores=``; ``Type=`` (ROCm SMI's brand string) is left out, no file here names it."""
    lines = [
        "# AMD GPUs: lines as AutoDetect=rsmi detects them (File= is the GPU's DRM render node).",
        "# Links= as gpu/rsmi writes them: -1 for the GPU itself, 0 for every other -- Slurm records the",
        "# GPUs' order there, not their XGMI links (src/plugins/gpu/rsmi/gpu_rsmi.c); the XGMI links are",
        "# in topoagent scan --format matrix.",
    ]
    topo = result.topology
    guessed = False
    gpus = _usable_gpus(result, p, lines)
    for g in gpus:
        d = topo.by_id(g.gpu)
        index = rocm_index(topo, d) if d is not None else None
        index = index if index is not None else g.cuda_index
        minor = d.amd.drm_render_minor if d is not None and d.amd is not None else None
        if minor is None:
            minor, guessed = 128 + index, True
        words = ["Name=gpu", f"File=/dev/dri/renderD{minor}"]
        cores = _gpu_cores(topo, g, mode, order, package, l3)
        if cores:
            words.append(f"Cores={cores}")
        words.append(f"Links={rsmi_links(index, len(gpus))}")
        line = " ".join(words)
        if not cores:
            line += (
                f"  # {g.gpu}: no {'socket known' if mode == 'socket' else 'allowed CPU of its own'}, Cores= left out"
            )
        lines.append(line)
    lines.append("# Type= left out: slurmd names AMD GPUs by ROCm SMI's brand string, which sysfs does not give")
    if guessed:
        lines.append("# renderD numbers are 128 + the ROCm index (KFD not read): check ls -l /dev/dri/by-path")
    return lines


def render(result: ScanResult, plan: Plan | None = None, gres_cores: str = "socket", **_: Any) -> str:
    """One ``Name=gpu`` line per GPU with Type= and Links= (with NVML), File= and Cores=."""
    if gres_cores not in CORE_MODES:
        raise ValueError(f"gres_cores must be one of {CORE_MODES}")
    p = plan_of(result, plan)
    topo = result.topology
    nvml = {g.bdf: g for g in topo.nvml_gpus}
    package = {c.id: c.package for c in topo.cpus}
    host = shown(topo.hostname or "this host")
    lines = [
        f"# gres.conf for {host}: topoagent plan --format slurm --gres-cores {gres_cores}",
        "# For AutoDetect=off (add that line where gres.conf sets AutoDetect for all nodes). Beside",
        "# AutoDetect=nvml (rsmi on AMD GPUs) every value must equal what slurmd detects, or slurmd",
        "# ignores the line.",
        "# Cores= are Slurm's abstract core indices (lstopo -l 'Core L#'), not Linux CPU ids.",
    ]
    l3 = topo.l3_domains
    if gres_cores == "socket":
        lines.append("# Cores= cover whole sockets: Slurm >= 24.05.5 rejects a range that splits one.")
        order = list(p.cores)
    elif gres_cores == "numa":
        lines += [
            "# Cores= are the GPU's NUMA node, each NUMA node counted as a socket (cores numbered node",
            "# by node): right only with these lines in slurm.conf (not here), for every such node",
            "# (the NodeName line slurmd -C prints counts real sockets: Slurm then keeps that view):",
            "#   SlurmdParameters=numa_node_as_socket",
        ]
        node_of = {c: n.id for n in topo.nodes for c in n.cpus}
        order = list(numa_order(p.cores, node_of))
        lines.append(f"#   {numa_node_line(host, p.cores, node_of)}")
    else:
        if not l3 or p.bind != "core-complex":
            raise TopoagentError(
                "--gres-cores l3cache: the kernel names no L3 cache domains on this host "
                "(cpu*/cache/index3/shared_cpu_list), so there are no core complexes to count as sockets"
            )
        l3_of = {c: i for i, d in enumerate(l3) for c in d}
        order = list(numa_order(p.cores, l3_of))
        lines += _l3_header(host, p.cores, l3_of)
    if gres_cores != "socket" and p.allowed is not None:
        lines.append(f"# CPUs were limited to those allowed to the caller: {p.allowed}")
    if _amd_only(topo):
        return "\n".join(lines + _amd_lines(result, p, gres_cores, order, package, l3)) + "\n"
    gpus = _usable_gpus(result, p, lines)
    every_nvml = bool(gpus) and all(g.bdf in nvml for g in gpus)
    bdfs = [g.bdf for g in gpus]
    guessed = False
    for g in gpus:
        nv = nvml.get(g.bdf) if g.bdf else None
        minor = nv.minor if nv is not None and nv.minor is not None else g.cuda_index
        guessed = guessed or nv is None or nv.minor is None
        words = ["Name=gpu"]
        kind = slurm_type(nv.name if nv is not None else None)
        if kind:
            words.append(f"Type={kind}")
        words.append(f"File=/dev/nvidia{minor}")
        cores = _gpu_cores(topo, g, gres_cores, order, package, l3)
        if cores:
            words.append(f"Cores={cores}")
        links = slurm_links(g.bdf, nv, bdfs) if every_nvml else None
        if links is not None:
            words.append(f"Links={links}")
        line = " ".join(words)
        if not cores:
            missing = "socket known" if gres_cores == "socket" else "allowed CPU of its own"
            line += f"  # {g.gpu}: no {missing}, Cores= left out"
        lines.append(line)
    if p.gpus and not every_nvml:
        lines.append(
            "# Type= and Links= left out: NVML did not name every GPU (slurmd's names and link counts come from NVML)"
        )
    if guessed and p.gpus:
        lines.append(
            "# /dev/nvidiaN numbers are the PCI-order indices (NVML not asked): check nvidia-smi -q | grep Minor"
        )
    return "\n".join(lines) + "\n"
