"""A scan as ``nvidia-smi topo -m`` prints it: :func:`matrix_of` makes the matrix, :func:`render_topo_matrix`
the text.

The layout is the current driver's (the one with a ``GPU NUMA ID`` column): a header row of
tab-separated labels with a leading tab, one row per device with `` X `` on the diagonal and
tabs between cells, the affinity values on GPU rows only, a blank line, the ``Legend:`` block,
and a ``NIC Legend:`` block when NICs are named ``NIC<n>``.  The text parses back to an equal matrix with
:func:`~topoagent.core.parse.nvsmi_topo.parse_topo_matrix` (warnings aside).

Which affinity columns are printed: ``CPU Affinity`` always (every driver generation has it);
``NUMA Affinity`` and ``GPU NUMA ID`` together, when any device has a value in either of them --
as a modern driver prints them -- and neither otherwise, as older drivers did.  A column that
holds only ``N/A`` reads back the same as a column that is absent, so dropping it loses nothing.
Unknown values print as ``N/A``.
"""

from __future__ import annotations

from typing import Any

from topoagent.core.analysis.paths import NIC_PAIR_LIMIT, pair_path, path_index
from topoagent.core.parse.nvsmi_topo import TopoDevice, TopoMatrix
from topoagent.core.pathclass import XGMI, PathClass
from topoagent.core.render.escape import shown
from topoagent.core.result import ScanResult

__all__ = [
    "LEGEND",
    "XGMI_LEGEND",
    "matrix_of",
    "matrix_rows",
    "nic_rows",
    "render",
    "render_topo_matrix",
    "verdict_notes",
]

#: The legend block as current nvidia-smi prints it, word for word (older drivers said
#: "PCIe switches" where it now says "PCIe bridges", and had ``SOC`` instead of ``SYS``).
LEGEND = """\
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
"""


#: The legend line of an AMD host's matrix: its GPU pairs print as rocm-smi's ``Link Type``
#: names them (``XGMI``: AMD Infinity Fabric).
XGMI_LEGEND = "  XGMI = Connection traversing AMD Infinity Fabric (XGMI), as rocm-smi --showtopo names it\n"


def _na(value: object) -> str:
    return "N/A" if value is None else str(value)


def _affinity(device: TopoDevice, numa_columns: bool) -> str:
    cpu = _na(device.cpu_affinity)
    if not numa_columns:
        return cpu
    # nvidia-smi pads the NUMA Affinity value with two tabs (its header title is wider than a
    # tab stop); the parser accepts one or more.
    return f"{cpu}\t{_na(device.numa_affinity)}\t\t{_na(device.gpu_numa_id)}"


def render_topo_matrix(m: TopoMatrix) -> str:
    """Text of ``m`` in the layout of ``nvidia-smi topo -m`` (ends with a newline)."""
    numa_columns = any(d.numa_affinity is not None or d.gpu_numa_id is not None for d in m.devices)
    titles = ["CPU Affinity"] + (["NUMA Affinity", "GPU NUMA ID"] if numa_columns else [])
    lines = ["\t" + "\t".join([d.label for d in m.devices] + titles)]
    for device, row in zip(m.devices, m.cells, strict=True):
        cells = [" X " if c == "X" else c for c in row]
        line = device.label + "\t" + "\t".join(cells)
        has_values = (
            device.cpu_affinity is not None or device.numa_affinity is not None or device.gpu_numa_id is not None
        )
        # GPU rows always carry the affinity columns; NIC rows never do in nvidia-smi, so a NIC
        # gets them only when it has values to show.
        if device.kind == "gpu" or has_values:
            line += "\t" + _affinity(device, numa_columns)
        lines.append(line)
    text = "\n".join(lines) + "\n\n" + LEGEND
    if any(c == XGMI for row in m.cells for c in row):
        text += XGMI_LEGEND
    named = [d for d in m.devices if d.kind == "nic" and d.rdma_name and d.label != d.rdma_name]
    if named:
        text += "\nNIC Legend:\n\n" + "".join(f"  {d.label}: {d.rdma_name}\n" for d in named)
    return text


def matrix_of(result: ScanResult, rows: tuple[tuple[str, TopoDevice], ...] | None = None) -> TopoMatrix:
    """The GPU/NIC matrix of a scan, as the value ``nvidia-smi topo -m`` prints (rows: GPUs in
    PCI bus order, then one NIC per RDMA device, as nvidia-smi lists them).  ``rows``: the
    scan's :func:`matrix_rows`, where the caller has them already."""
    topo = result.topology
    idx = path_index(result.paths)
    if rows is None:
        rows = matrix_rows(result)
    behind = [topo.physical(topo.index.by_id[ident]) for ident, _ in rows]

    def cell(i: int, j: int) -> str:
        if i == j:
            return PathClass.X.token
        a, b = behind[i], behind[j]
        # two RDMA devices of one function (or its VF); a NIC-NIC pair the scan left out is computed now
        return PathClass.PIX.token if a is b else pair_path(topo, idx, a, b).cell

    cells = tuple(tuple(cell(i, j) for j in range(len(rows))) for i in range(len(rows)))
    return TopoMatrix(devices=tuple(d for _, d in rows), cells=cells)


def nic_rows(result: ScanResult) -> int:
    """How many NIC rows the full matrix has: one per RDMA device (or RDMA NIC without a name)."""
    return sum(len(nic.rdma_devices) or (1 if nic.rdma else 0) for nic in result.topology.nics)


def matrix_rows(result: ScanResult) -> tuple[tuple[str, TopoDevice], ...]:
    """The matrix's rows, each with the id of the device behind it.  Past
    :data:`~topoagent.core.analysis.paths.NIC_PAIR_LIMIT` NIC rows, the GPU rows only: a matrix
    thousands of columns wide is no use to a person (:func:`render` says so)."""
    topo = result.topology
    cpus = {p.gpu: p.cpus for p in result.plan.gpus}
    rows: list[tuple[str, TopoDevice]] = []
    for g in topo.gpus:
        # Offline (a pasted matrix): a GPU's CPU Affinity and GPU NUMA ID are printed as given.
        given_cpus = not topo.from_host_tree and g.label is not None and g.local_cpus is not None
        rows.append(
            (
                g.id,
                TopoDevice(
                    label=f"GPU{len(rows)}",
                    kind="gpu",
                    cpu_affinity=g.local_cpus if given_cpus else cpus.get(g.id),
                    numa_affinity=str(g.numa_node) if g.numa_node is not None else None,
                    gpu_numa_id=g.memory_node,
                ),
            )
        )
    n = 0
    for nic in topo.nics if nic_rows(result) <= NIC_PAIR_LIMIT else ():
        # A NIC the source calls RDMA-capable without naming its RDMA device still has a row.
        for rdma in nic.rdma_devices or ((None,) if nic.rdma else ()):
            rows.append(
                (nic.id, TopoDevice(label=f"NIC{n}", kind="nic", rdma_name=None if rdma is None else shown(rdma)))
            )
            n += 1
    return tuple(rows)


def verdict_notes(result: ScanResult, rows: tuple[tuple[str, TopoDevice], ...]) -> str:
    """The lines below the legend that say what the cells cannot: GPU pairs whose NVLinks are
    unknown (their cells print ``?``, where ``nvidia-smi`` may print ``NV18``) and the GPUs that
    are unusable, by their matrix labels.  Empty when there is nothing to say.  A parser of
    nvidia-smi's text reads them as legend lines and skips them."""
    label = {ident: d.label for ident, d in rows}
    lines = []
    links = next((u for u in result.unknown if u.fact == "nvlinks"), None)
    if links is not None and any(s in label for s in links.subjects):
        named = " ".join(label[s] for s in links.subjects if s in label)
        lines.append(f"  ?    = Unknown: NVLinks between {named}: {links.why}; nvidia-smi prints NV# where they join")
    for gpu, codes in result.unusable.items():
        if gpu in label:
            lines.append(f"  {label[gpu]} ({gpu}) is unusable: {', '.join(codes)}")
    return "\n" + "".join(line + "\n" for line in lines) if lines else ""


def render(result: ScanResult, **_: Any) -> str:
    """``scan --format matrix``: the scan's GPU/NIC matrix in nvidia-smi's layout, then what it
    cannot show (:func:`verdict_notes`); past :data:`~topoagent.core.analysis.paths.NIC_PAIR_LIMIT`
    NICs, the GPUs' and one line saying so."""
    rows = matrix_rows(result)
    text = render_topo_matrix(matrix_of(result, rows)) + verdict_notes(result, rows)
    nics = nic_rows(result)
    if nics > NIC_PAIR_LIMIT:
        text += (
            f"\nNICs left out: {nics} RDMA devices, more than {NIC_PAIR_LIMIT} columns; each GPU's path to "
            "every NIC is in scan --format json, its rail NICs in plan --format rails.\n"
        )
    return text
