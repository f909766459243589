"""The findings catalogue: one entry per code, the one place a finding's words and rules live.

Each :class:`Entry` says, for its stable code: the family of checks that raises it (a module of
this package), its severity rule (:class:`Grade`: the default first, then each other severity
and when it applies), what kind of evidence proves it (:class:`Proof`), what it means (the
prose of ``docs/findings.md``), its messages and remedies (:class:`Wording`: ``str.format``
templates over the fields the check fills in, keyed by the case they are for; a remedy says
which :class:`HostKind` it is written for where that differs), the outputs that carry it
(:class:`Output`: an output that treats some codes apart asks :func:`codes_for` instead of
naming them), the alert that pages on it and real examples.  The checks make every finding
through :func:`finding`, and ``python -m topoagent.core.findings`` writes ``docs/findings.md``
from this module, so the page says what the code does and where it goes.

Codes are stable: never renumber or reuse one.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping
from enum import Enum

import msgspec

from topoagent.core.findings.finding import Evidence, Finding, Severity
from topoagent.core.parse.segment import KINDS

__all__ = [
    "CATALOGUE",
    "FAMILIES",
    "Entry",
    "Example",
    "Family",
    "Grade",
    "PROOF_BOUND",
    "HostKind",
    "Output",
    "Proof",
    "Wording",
    "carries",
    "codes_for",
    "evidence_bound",
    "finding",
    "proof_of",
]


class HostKind(Enum):
    """The kind of host (or input) a remedy is written for."""

    BARE_METAL = "bare metal"
    GUEST = "guest"
    GRACE = "Grace"
    PASTED = "pasted text"


class Proof(Enum):
    """What kind of evidence proves a finding (:func:`proof_of` tells one evidence line's kind
    from its path)."""

    SYSFS = "a file the kernel exports (sysfs, /proc)"
    CONFIG_SPACE = "PCI config space (the sysfs config file)"
    PASTED = "a token of pasted tool output (nvidia-smi, lspci, lstopo, numactl, RDMA tools, AMD SMI, dmesg)"
    NVML = "an NVML query"
    INFERENCE = "an inference from other facts (a path class, a node reached through paths)"
    EXPECTATION = "an expected topology (a baseline, or a fleet's majority)"


class Output(Enum):
    """An output that carries a code (its value: how ``docs/findings.md`` names it).  Every
    finding a scan raises reaches :attr:`FINDINGS`; the others are read by the one consumer
    each names, through :func:`codes_for`, so a new code reaches them by its entry alone."""

    FINDINGS = "every view of a scan's findings (above), the audit's with them where it ran (the daemon's, `audit`)"
    PROCESS_SERIES = "the metric `topoagent_gpu_processes_misplaced{code}` (the daemon's audit)"
    GDR_BLOCKER = "NFD `topoagent.gdr.ready=false`"
    ACS_BLOCKING = "NFD `topoagent.acs.blocking=true`"
    ACS_UNREAD = "NFD `topoagent.acs.blocking=unknown` (unless a redirect was found)"
    DEVICE_FAULT = "the daemon's `device_fault` event (one per device, keyed by its BDF)"
    GPU_UNUSABLE = (
        "the GPU it names is unusable (`ScanResult.unusable`): the plan gives it no rank, gres.conf and the "
        "NCCL topology leave it out, `exec` refuses it, every output marks it"
    )
    DRAWN_ON_RAIL = "`draw`: the GPU-NIC rail drawn in the finding's colour"
    DRAWN_ON_LINK = "`draw`: the device's link drawn degraded"
    DRAWN_ON_BRIDGE = "`draw`: an ACS mark on the bridge"


#: The most severe a finding may be when a line of its evidence is of this kind: a finding is
#: bounded by its weakest link (:func:`finding` clamps to it).  What the kernel, config
#: space, NVML or a tool's own output states can prove a fault; what is inferred from other
#: facts (a node reached through paths, a path class the tree gives) can only suggest one.
PROOF_BOUND: dict[Proof, Severity] = {
    Proof.SYSFS: Severity.CRITICAL,
    Proof.CONFIG_SPACE: Severity.CRITICAL,
    Proof.PASTED: Severity.CRITICAL,
    Proof.NVML: Severity.CRITICAL,
    Proof.EXPECTATION: Severity.CRITICAL,
    Proof.INFERENCE: Severity.WARNING,
}


#: What an evidence line from pasted output starts with (``numactl -H: node 2 cpus``): the paste
#: kinds' ``evidence`` (core/parse/segment.py), whose ``bound`` bounds it.
PASTED_TOOLS = tuple(dict.fromkeys(k.evidence for k in KINDS))


def proof_of(e: Evidence) -> Proof:
    """The kind of an evidence line, from the path its check spelled for it
    (:mod:`~topoagent.core.findings.context` spells them)."""
    path = e.path
    if path.startswith("nvml:"):
        return Proof.NVML
    if path.startswith("slot "):
        return Proof.EXPECTATION
    if path.startswith(("path ", "sysfs: ", "inferred: ")) or " via " in path:
        return Proof.INFERENCE  # a path class the tree gives, a node reached through paths
    if path.startswith(PASTED_TOOLS):
        return Proof.PASTED
    if path.startswith("/"):
        return Proof.CONFIG_SPACE if path.endswith("/config") else Proof.SYSFS
    return Proof.INFERENCE


def _bound(e: Evidence) -> Severity:
    proof = proof_of(e)
    kinds = [Severity.parse(k.bound) for k in KINDS if proof is Proof.PASTED and e.path.startswith(k.evidence)]
    return min([PROOF_BOUND[proof], *kinds])


def evidence_bound(evidence: Iterable[Evidence]) -> Severity:
    """The most severe a finding with this evidence may be: its weakest link's
    :data:`PROOF_BOUND` (and a pasted line's kind's ``bound``; critical where there is no
    evidence line to bound it)."""
    return min((_bound(e) for e in evidence), default=Severity.CRITICAL)


class Grade(msgspec.Struct, frozen=True):
    """A severity a code is raised at, and when (empty: always)."""

    severity: Severity
    when: str = ""


class Wording(msgspec.Struct, frozen=True):
    """A message or remedy: a ``str.format`` template over the check's fields, when it is the
    one said, and the host kind it is written for (None: any)."""

    text: str
    when: str = ""
    host: HostKind | None = None

    def say(self, fields: Mapping[str, object]) -> str:
        """The text with the check's fields filled in."""
        return self.text.format(**fields)


class Example(msgspec.Struct, frozen=True):
    """A real finding as ``docs/findings.md`` shows it (severity, message, subjects, the first
    three evidence lines, remedy): from a fixture's golden scan (``fixture``: the test checks
    it is that fixture's output) or from the test named in ``source``."""

    text: str
    fixture: str | None = None
    source: str = ""


class Family(msgspec.Struct, frozen=True):
    """A family of checks: its name (the module of this package that raises its codes, unless
    ``raised_in`` names another: the audit's checks live in its feature slice), its title."""

    module: str
    title: str
    about: str = ""
    raised_in: str = ""

    @property
    def where(self) -> str:
        """The dotted name of the module whose checks raise the family's codes."""
        return self.raised_in or f"topoagent.core.findings.{self.module}"


class Entry(msgspec.Struct, frozen=True, kw_only=True):
    """One code: its family, severity rule, proof, outputs, the alert (a rule's name in
    ``deploy/prometheus/topoagent-rules.yml``) that pages on it, meaning, wordings and examples."""

    code: str
    family: str
    severity: tuple[Grade, ...]
    proof: tuple[Proof, ...]
    outputs: tuple[Output, ...] = (Output.FINDINGS,)
    alert: str = ""
    about: str
    messages: Mapping[str, Wording]
    remedies: Mapping[str, Wording]
    examples: tuple[Example, ...] = ()

    @property
    def default(self) -> Severity:
        """The severity the code is raised at unless its rule says otherwise."""
        return self.severity[0].severity

    @property
    def worst(self) -> Severity:
        """The most severe its rule ever raises it at."""
        return max(g.severity for g in self.severity)

    def remedy_key(self, fix: str | None, host: HostKind | None) -> str:
        """The remedy to say: ``fix`` where the check chose one, else the one written for
        ``host`` (the kind of host or input the finding is about), else the default."""
        if fix is not None:
            return fix
        if host is not None:
            for key, w in self.remedies.items():
                if w.host is host and not w.when:
                    return key
        return ""


def finding(
    code: str,
    subjects: Iterable[str],
    evidence: Iterable[Evidence],
    *,
    say: str = "",
    fix: str | None = None,
    host: HostKind | None = None,
    severity: Severity | None = None,
    **fields: object,
) -> Finding:
    """A finding of ``code`` as its entry words it: the message ``say`` and the remedy ``fix``
    (keys of :attr:`Entry.messages` and :attr:`Entry.remedies`; without ``fix``, the remedy
    written for ``host``) filled with ``fields``, at ``severity`` or the default -- never above
    what its evidence proves (:func:`evidence_bound`: the weakest link bounds it)."""
    entry, lines = CATALOGUE[code], tuple(evidence)
    wanted = severity if severity is not None else entry.default
    return Finding(
        code,
        min(wanted, evidence_bound(lines)),
        tuple(subjects),
        entry.messages[say].say(fields),
        lines,
        entry.remedies[entry.remedy_key(fix, host)].say(fields),
    )


def carries(f: Finding, output: Output) -> bool:
    """Whether ``output`` carries ``f`` (its code's entry names it)."""
    return output in CATALOGUE[f.code].outputs


def codes_for(output: Output) -> tuple[str, ...]:
    """The codes whose entries name ``output``, in catalogue order: what its consumer reads
    instead of a list of its own."""
    return tuple(code for code, e in CATALOGUE.items() if output in e.outputs)


def _prose(text: str) -> str:
    return inspect.cleandoc(text)


_GDR = "GPUDirect RDMA is off by default (NCCL_NET_GDR_LEVEL=PXB): every byte is staged through host memory"

FAMILIES: dict[str, Family] = {
    f.module: f
    for f in (
        Family(
            "placement",
            "GPU and NIC placement",
            _prose("""Where each GPU's nearest RDMA NIC sits.  NCCL uses GPUDirect RDMA by default only
            up to PXB (`NCCL_NET_GDR_LEVEL`; P2C for a Grace GPU's own NIC, NVIDIA/nccl
            `src/graph/paths.cc`, `ncclTopoCheckGdr`): a NIC farther away stages every byte
            through host memory."""),
        ),
        Family("rails", "Rails: the GPU-NIC pairing", "What the pairing of GPUs with compute NICs leaves wrong."),
        Family(
            "peer",
            "Peer-to-peer DMA: ACS, IOMMU, peer memory",
            "What stops GPUs, and GPUs and NICs, from reading each other's memory directly.",
        ),
        Family(
            "platform",
            "NVIDIA GPU platforms: Data Direct, Inline and NUMA complexes",
            _prose("""GB200/GB300 trays and HGX B300 hosts need particular ACS, IOMMU grouping and ATS for
            GPUDirect RDMA, and some of it is what the generic rules call faults.  The host's platform kind and
            complexes are recognised as NVIDIA's own tool does (`rdma_topo` in linux-rdma/rdma-core,
            `kernel-boot/rdma_topo`: a ConnectX-8 Data Direct DMA function paired with its NIC by the VPD `V3`
            keyword; a GPU behind a ConnectX-8 that is its PCIe switch; GPUs and NICs alone on Grace root
            ports), and each port, group and NIC is judged by what `rdma_topo check` requires.  On a recognised
            platform `ACS_REDIRECT` does not judge its ports: a redirect the platform requires is no fault.
            `topoagent fix acs` sets the masks at run time and writes the `pci=config_acs=` boot parameter
            (docs/plan.md)."""),
        ),
        Family("pcie", "PCIe links and faults", "Links trained below their capability, and devices the bus lost."),
        Family("numa", "NUMA and guests", "NUMA facts the host's firmware or hypervisor gets wrong or hides."),
        Family("nvml", "NVLink (NVML)", "What NVML reports of NVLinked GPUs."),
        Family("crosscheck", "Sources that disagree", "`topoagent scan --cross-check` against other tools."),
        Family(
            "audit",
            "Processes away from their GPUs: PROCESS_*",
            _prose("""Raised by `topoagent audit` and the daemon's audit (see [audit.md](audit.md)), never by a
            scan: they judge the processes using the GPUs (NVML's running processes, else the
            `/dev/nvidia*` descriptors of `/proc/PID/fd`) by their threads' allowed CPUs
            (`/proc/PID/task/TID/status`), their memory (`/proc/PID/numa_maps`) and their `NCCL_IB_HCA`
            (`/proc/PID/environ`).  A process reaching across sockets is a warning; one on another node
            of its GPU's socket (AMD NPS, Intel SNC), or where sockets are unknown, is info."""),
            raised_in="topoagent.features.audit.advise",
        ),
        Family(
            "expect",
            "Expected topology: EXPECT_*",
            _prose("""The `EXPECT_*` codes are raised only against an expected topology: `scan --expect FILE` (a
            `topoagent baseline` file or a good host's scan JSON), the daemon's `expect` setting, and
            `topoagent fleet` (the majority of a hardware class, or `--expect`). Each names the *slot*
            (a device's position, `s0.r1/01.0/00.0/01.0/00.0/00.0/00.0`: see [fleet.md](fleet.md)) with the
            expected and the seen value in its evidence; on a live scan the subjects are the device ids where
            the slot exists on this host. The examples are `tests/features/fleet/test_fleet.py`'s faulty copies
            of the `dgx-h100` fixture (tests/fleet_hosts.py) against the baseline of the good one."""),
        ),
        Family(
            "pasted",
            "What pasted tools say beyond the tree",
            _prose("""Facts the tool outputs people paste carry and a PCIe tree does not: `nvidia-smi -q` (a GPU's
            activity when its link was read), `nvidia-smi topo -p2p` (the driver's P2P status of each GPU pair),
            `nvidia-smi nvlink -s` (active and inactive NVLinks), `ibdev2netdev`/`ibv_devinfo` (RDMA port state,
            also read from sysfs on a live host) and `dmesg` (AER events). `topoagent scan --paste` reads them
            (docs/offline.md); each example is the output of the test it names, on a public paste."""),
        ),
    )
}

_ENTRIES = (
    # -- placement --------------------------------------------------------------------------
    Entry(
        code="GPU_NIC_CROSS_SOCKET",
        family="placement",
        severity=(Grade(Severity.CRITICAL),),
        proof=(Proof.SYSFS, Proof.PASTED, Proof.INFERENCE),
        outputs=(Output.FINDINGS, Output.DRAWN_ON_RAIL),
        alert="TopoagentRailCrossesSockets",
        about=_prose("""A GPU whose best RDMA NIC is on another socket (SYS across packages). NCCL refuses
        GPUDirect RDMA beyond PXB by default, and the data also crosses UPI/xGMI. See NCCL's
        `NCCL_NET_GDR_LEVEL` documentation and NVIDIA/nccl issue 1435.

        Raised only where the input proves sockets: a host tree's CPU packages
        (`physical_package_id`), or a matrix of about 2017 whose legend defines its `SOC` cells as
        "the SMP link between CPU sockets" -- and even then not for a NIC that is `SOC` to the GPUs
        of every CPU set (IBM's Minsky printed that for its dual-port NIC: it cannot be on another
        socket than all of them).  Today's legend defines `SYS` as crossing "the SMP interconnect
        between NUMA nodes", which a single-socket AMD EPYC in NPS4 prints between its own nodes:
        from such a paste the finding is `GPU_NIC_CROSS_NUMA`, naming what is unknown.

        On Grace (a GPU on NVLink-C2C: GH200, GB200, GB300, GB10) nvidia-smi prints `SYS` from the GPU to
        every NIC, and so does the scan's path class (sysfs puts the GPU alone under its own root port);
        a NIC of the GPU's own Grace is NCCL's `P2C` path (NVIDIA/nccl src/graph/paths.cc,
        `ncclTopoComputePaths`) when it is one of the GPU's fastest NICs (`ncclTopoGetLocal`; a dual-port
        card's ports count together, as `NCCL_IB_MERGE_NICS` merges them), GPUDirect RDMA on by default
        since NCCL 2.27 (`ncclTopoCheckGdr`: `NCCL_NET_GDR_C2C=1` makes the default GDR level P2C), and
        raises nothing; the rail says so (`rails[].nccl_path` `P2C`, `rails[].gdr` true).  A slower NIC
        of the same Grace stays `PHB` to NCCL, GPUDirect off (`nccl_path` `PHB`, `gdr` false).  A GPU
        whose memory is a NUMA node beside a POWER9 (NVLink 2.0 to the CPU, not C2C) is no Grace GPU.
        The code is raised only for a NIC known to hang off the other CPU ("hangs off the other CPU
        (node 0)"); fixtures `grace-hopper`, `gb200-tray`.  Where NCCL reaches the NIC through an
        NVLinked GPU instead (PXN) the finding is `GPU_NIC_VIA_PXN`."""),
        messages={
            "": Wording(
                "{gpu}'s nearest RDMA NIC {nic} is on socket {nic_socket}, the GPU on socket {gpu_socket}: "
                "traffic crosses the socket interconnect and " + _GDR + ".",
                when="both sockets are known",
            ),
            "soc": Wording(
                "{gpu}'s nearest RDMA NIC {nic} is on the other CPU socket (nvidia-smi's SOC: the SMP link "
                "between CPU sockets): traffic crosses the socket interconnect and " + _GDR + ".",
                when="a matrix of about 2017 printed SOC, which its legend defines by CPU sockets",
            ),
            "grace": Wording(
                "{gpu} reaches its CPU (NUMA node {gpu_node}) over NVLink-C2C, but its nearest RDMA NIC "
                "{nic} hangs off the other CPU (node {nic_node}): the direct path crosses the "
                "CPU-to-CPU link with GPUDirect RDMA off (NCCL's P2C default covers only a NIC of the GPU's own "
                "CPU), so NCCL stages through host memory.",
                when="a GPU on NVLink-C2C whose nearest RDMA NIC is known to hang off another CPU",
            ),
        },
        remedies={
            "": Wording(
                "Move the NIC (or the GPU) to a slot on the same socket, under the GPU's PCIe switch; "
                "until then bind the rank to the NIC's socket only if it is host-memory bound.",
                host=HostKind.BARE_METAL,
            ),
            "grace": Wording(
                "Give each GPU's ranks a NIC of the GPU's own Grace (NCCL_IB_HCA, or the NIC order of the "
                "node's rail plan); a Grace with no RDMA NIC of its own needs one.",
                host=HostKind.GRACE,
            ),
        },
        examples=(
            Example(
                fixture="wrong-socket-nic",
                text=_prose("""
                [critical] gpu0's nearest RDMA NIC nic2 (mlx5_0) is on socket 1, the GPU on socket 0: traffic crosses the socket interconnect and GPUDirect RDMA is off by default (NCCL_NET_GDR_LEVEL=PXB): every byte is staged through host memory.
                    subjects: gpu0, nic2
                    evidence: /sys/bus/pci/devices/0000:17:00.0/numa_node = 0
                    evidence: /sys/bus/pci/devices/0000:99:00.0/numa_node = 1
                    remedy:   Move the NIC (or the GPU) to a slot on the same socket, under the GPU's PCIe switch; until then bind the rank to the NIC's socket only if it is host-memory bound.
                """),  # noqa: E501
            ),
        ),
    ),
    Entry(
        code="GPU_NIC_CROSS_NUMA",
        family="placement",
        severity=(Grade(Severity.WARNING),),
        proof=(Proof.SYSFS, Proof.PASTED, Proof.INFERENCE),
        outputs=(Output.FINDINGS, Output.DRAWN_ON_RAIL),
        about=_prose("""Best NIC on another NUMA node (SYS in nvidia-smi terms): no GDR by default.  On a host
        tree whose sockets are known, another node of the same socket (AMD NPS2/NPS4, Intel SNC),
        where the remedy is the BIOS NUMA setting; from an input that does not show sockets (a pasted
        matrix: its legend's SYS crosses "the SMP interconnect between NUMA nodes", which a
        single-socket EPYC in NPS4 prints between its own nodes -- ALCF's Polaris, a 7543P, is one),
        the same finding with the "socket unknown" message, which names what the input does not
        show; never `GPU_NIC_CROSS_SOCKET`, which only proven sockets raise."""),
        messages={
            "": Wording(
                "{gpu}'s nearest RDMA NIC {nic} is on NUMA node {nic_node}, the GPU on node "
                "{gpu_node} of the same socket: " + _GDR + ".",
                when="both sockets are known and the same",
            ),
            "socket unknown": Wording(
                "{gpu}'s nearest RDMA NIC {nic} is across the SMP interconnect, on {where}: " + _GDR + "; {why}.",
                when="the input shows no sockets (SYS stated by nvidia-smi, NUMA nodes without their sockets)",
            ),
        },
        remedies={
            "": Wording(
                "Place the NIC under the same PCIe switch as the GPU, or use NPS1/SNC off in the BIOS so "
                "both share a NUMA node; set NCCL_NET_GDR_LEVEL=SYS only after measuring."
            ),
            "pasted": Wording(
                "Place the NIC under the GPU's PCIe switch; to tell a cross-socket from a cross-node "
                "placement, check the host's sockets and NUMA setting (lscpu; NPS on AMD, SNC on Intel) "
                "or run topoagent scan on the host.",
                host=HostKind.PASTED,
            ),
        },
        examples=(
            Example(
                fixture="epyc-nps2-mixed",
                text=_prose("""
                [warning] gpu2's nearest RDMA NIC nic0 (mlx5_0) is on NUMA node 0, the GPU on node 1 of the same socket: GPUDirect RDMA is off by default (NCCL_NET_GDR_LEVEL=PXB): every byte is staged through host memory.
                    subjects: gpu2, nic0
                    evidence: /sys/bus/pci/devices/0000:41:00.0/numa_node = 1
                    evidence: /sys/bus/pci/devices/0000:05:00.0/numa_node = 0
                    remedy:   Place the NIC under the same PCIe switch as the GPU, or use NPS1/SNC off in the BIOS so both share a NUMA node; set NCCL_NET_GDR_LEVEL=SYS only after measuring.
                """),  # noqa: E501
            ),
        ),
    ),
    Entry(
        code="GPU_NIC_VIA_HOST_BRIDGE",
        family="placement",
        severity=(Grade(Severity.WARNING),),
        proof=(Proof.SYSFS, Proof.PASTED, Proof.INFERENCE),
        outputs=(Output.FINDINGS, Output.DRAWN_ON_RAIL),
        about=_prose("""Best NIC reachable only through the CPU (PHB or NODE): same NUMA node is not enough for
        GDR (sriov-network-operator#736). Not raised for Grace GPUs, where GPU-NIC through the same
        CPU is NCCL's P2C and GDR is on, nor where NCCL reaches the NIC through an NVLinked peer GPU
        (`GPU_NIC_VIA_PXN`).  Inside a guest whose hypervisor flattened the tree
        (`VM_FLAT_PCI_TREE`) the PHB is the guest's: NCCL in the guest still turns GPUDirect off
        (NVIDIA/nccl-tests#256: 476 -> 27 GB/s), and the remedy is the guest's, not a slot."""),
        messages={
            "": Wording("{gpu} reaches its nearest RDMA NIC {nic} only through the CPU ({path}): " + _GDR + "."),
            "guest": Wording(
                "{gpu} reaches its nearest RDMA NIC {nic} only through the CPU ({path}) in this guest's PCI tree: "
                "NCCL in the guest sees {path} and turns GPUDirect RDMA off; the host's own path is hidden.",
                when="a guest whose hypervisor flattened the tree",
            ),
            "guest suggested": Wording(
                "{gpu} reaches its nearest RDMA NIC {nic} only through the CPU ({path}), as in a guest whose "
                "hypervisor flattened the tree (VM_FLAT_PCI_TREE): NCCL sees {path} and turns GPUDirect RDMA off.",
                when="a pasted matrix that only suggests such a guest",
            ),
        },
        remedies={
            "": Wording(
                "Put GPU and NIC under one PCIe switch for GPUDirect RDMA; NCCL_NET_GDR_LEVEL=PHB forces it "
                "through the host bridge, which is slower than a switch and worth measuring first.",
                host=HostKind.BARE_METAL,
            ),
            "guest": Wording(
                "Give the guest the host's locality: on the hypervisor, topoagent vms shows each "
                "passed-through device's host NUMA node, and NUMA-aware passthrough keeps GPU and NIC "
                "together (QEMU pxb-pcie expander buses with numa_node=, the devices' root ports below "
                "them); or give NCCL in the guest the host's topology (NCCL_TOPO_FILE from topoagent plan "
                "--format nccl-topo on the host, bus ids mapped to the guest's).",
                host=HostKind.GUEST,
            ),
        },
        examples=(
            Example(
                fixture="sriov-nic",
                text=_prose("""
                [warning] gpu0 reaches its nearest RDMA NIC nic1 (mlx5_0) only through the CPU (NODE): GPUDirect RDMA is off by default (NCCL_NET_GDR_LEVEL=PXB): every byte is staged through host memory.
                    subjects: gpu0, nic1
                    evidence: /sys/bus/pci/devices/0000:17:00.0/numa_node = 0
                    evidence: /sys/bus/pci/devices/0000:39:00.0/numa_node = 0
                    remedy:   Put GPU and NIC under one PCIe switch for GPUDirect RDMA; NCCL_NET_GDR_LEVEL=PHB forces it through the host bridge, which is slower than a switch and worth measuring first.
                """),  # noqa: E501
            ),
        ),
    ),
    Entry(
        code="GPU_NIC_VIA_PXN",
        family="placement",
        severity=(Grade(Severity.INFO),),
        proof=(Proof.SYSFS, Proof.PASTED, Proof.NVML, Proof.INFERENCE),
        about=_prose("""A GPU whose own path to its rail NIC crosses the CPU (PHB, NODE or SYS) but which NCCL
        reaches it through instead: the NIC's local GPU, NVLinked to it, sits within one PCIe switch
        hierarchy of the NIC (PXB or better, or a Grace GPU's P2C).  NCCL >= 2.12 (`NCCL_PXN_DISABLE=0`,
        the default) sends the GPU's data over NVLink to that GPU, whose memory the NIC reads with
        GPUDirect RDMA: NVIDIA/nccl src/graph/paths.cc, `ncclTopoComputePaths`, sets the path to
        `PATH_PXN`, which ranks before `PATH_PHB`, so NCCL also prefers such a NIC to one it reaches
        only through the CPU.  The relay is the GPU NCCL takes as the NIC's local GPU
        (`ncclTopoGetLocalGpu`, src/graph/topo.cc: of the GPUs nearest the NIC, the first whose own
        NIC is this one).  The rail says so (`rails[].nccl_path` `PXN`, `rails[].gdr` true, the
        relay in `rails[].pxn_via`).  Nothing to fix for NCCL; traffic that does not go through NCCL
        (UCX, MPI) takes the direct path."""),
        messages={
            "": Wording(
                "{gpu} reaches its rail NIC {nic} through {via} over NVLink ({nvlinks}, NCCL's PXN): {via} is "
                "{peer_path} to it, so GPUDirect RDMA is on from {via}'s memory; {gpu}'s own path is {path}."
            )
        },
        remedies={
            "": Wording(
                "Nothing to do for NCCL >= 2.12 (keep NCCL_PXN_DISABLE unset). Traffic that does not go through "
                "NCCL (UCX, MPI) takes the direct {path} path without GPUDirect RDMA."
            )
        },
        examples=(
            Example(
                source="`tests/core/findings/test_verdicts.py` (a pasted 8x V100 hybrid cube mesh with one mlx5_0, "
                "OneFlow-Inc OneFlow-Benchmark reports)",
                text=_prose("""
                [info] gpu0 reaches its rail NIC nic0 (mlx5_0) through gpu2 over NVLink (NV1, NCCL's PXN): gpu2 is PIX to it, so GPUDirect RDMA is on from gpu2's memory; gpu0's own path is NODE.
                    subjects: gpu0, nic0, gpu2
                    evidence: nvidia-smi topo -m GPU0/mlx5_0 = NODE
                    evidence: nvidia-smi topo -m GPU0/GPU2 = NV1
                    evidence: nvidia-smi topo -m GPU2/mlx5_0 = PIX
                    remedy:   Nothing to do for NCCL >= 2.12 (keep NCCL_PXN_DISABLE unset). Traffic that does not go through NCCL (UCX, MPI) takes the direct NODE path without GPUDirect RDMA.
                """),  # noqa: E501
            ),
        ),
    ),
    Entry(
        code="NO_RDMA_NIC",
        family="placement",
        severity=(Grade(Severity.INFO),),
        proof=(Proof.SYSFS, Proof.PASTED),
        outputs=(Output.FINDINGS, Output.GDR_BLOCKER),
        about=_prose("""GPUs but no RDMA-capable NIC (no RDMA device, no InfiniBand-class function, no ConnectX or
        AWS EFA -- vendor 1d0f, NCCL's network through the aws-ofi-nccl plugin).  An absence is
        claimed only from an input that lists every NIC: a host tree with `/sys/class`, or a whole
        lspci listing.  Never from `lspci | grep`, `lspci -s`, `lspci -d 10de:`, a tree cut or
        elided by its author (`+-...`), a capture without `/sys/class`, or a matrix alone
        (nvidia-smi lists the RDMA NICs it knows, and never EFA)."""),
        messages={
            "": Wording(
                "{gpus} GPU(s) but no RDMA-capable NIC: traffic between hosts goes through host memory over TCP "
                "sockets."
            )
        },
        remedies={
            "": Wording(
                "Fine for a single-node box; for multi-node training add an InfiniBand/RoCE NIC per GPU pair "
                "under the GPUs' PCIe switches."
            ),
            "guest": Wording(
                "Fine for single-node work; for multi-node training pass RDMA NICs (or their SR-IOV VFs) through "
                "to the guest beside the GPUs, or choose an instance type that has them (EFA on AWS, InfiniBand "
                "VMs elsewhere).",
                host=HostKind.GUEST,
            ),
        },
        examples=(
            Example(
                fixture="cloud-vm",
                text=_prose("""
                [info] 4 GPU(s) but no RDMA-capable NIC: traffic between hosts goes through host memory over TCP sockets.
                    subjects: gpu0, gpu1, gpu2, gpu3
                    evidence: /sys/class/infiniband = absent or empty
                    evidence: /sys/bus/pci/devices/0000:00:02.0/class = 0x020000
                    remedy:   Fine for single-node work; for multi-node training pass RDMA NICs (or their SR-IOV VFs) through to the guest beside the GPUs, or choose an instance type that has them (EFA on AWS, InfiniBand VMs elsewhere).
                """),  # noqa: E501
            ),
        ),
    ),
    # -- rails ------------------------------------------------------------------------------
    Entry(
        code="SOCKET_WITHOUT_RAIL",
        family="rails",
        severity=(Grade(Severity.WARNING),),
        proof=(Proof.SYSFS, Proof.PASTED),
        about="A socket with GPUs but no compute NIC.",
        messages={
            "": Wording(
                "Socket {socket} has {gpus} GPU(s) but no compute NIC: its GPUs' network traffic crosses to "
                "another socket."
            )
        },
        remedies={
            "": Wording(
                "Add a NIC on this socket (ideally one per GPU switch) or keep this socket's GPUs to intra-node work."
            )
        },
        examples=(
            Example(
                fixture="wrong-socket-nic",
                text=_prose("""
                [warning] Socket 0 has 4 GPU(s) but no compute NIC: its GPUs' network traffic crosses to another socket.
                    subjects: gpu0, gpu1, gpu2, gpu3
                    evidence: /sys/bus/pci/devices/0000:17:00.0/numa_node = 0
                    evidence: /sys/bus/pci/devices/0000:18:00.0/numa_node = 0
                    evidence: /sys/bus/pci/devices/0000:31:00.0/numa_node = 0
                    remedy:   Add a NIC on this socket (ideally one per GPU switch) or keep this socket's GPUs to intra-node work.
                """),  # noqa: E501
            ),
        ),
    ),
    Entry(
        code="NIC_SHARED_WHILE_IDLE",
        family="rails",
        severity=(Grade(Severity.WARNING),),
        proof=(Proof.INFERENCE,),
        about=_prose("""After pairing (best class, then bandwidth, then spread), a NIC serves two or more GPUs while
        a compute NIC at the same path class to one of them serves none — typically a slower port that
        bandwidth-first selection leaves idle (nccl#820). Both paths must be shown by a source: a cell a
        partial paste does not show has only a placeholder class and raises nothing."""),
        messages={"": Wording("{users} share {nic} while {idle}, as close to {close}, serves no GPU.")},
        remedies={
            "": Wording(
                "Check why {idle} is slower (link width or speed, port rate): NCCL, like this "
                "pairing, prefers the faster NIC. Do not set NCCL_IB_HCA per rank to force it: NCCL needs "
                "the same value on every rank of a node (NVIDIA/nccl#1478)."
            )
        },
        examples=(
            Example(
                source="`tests/core/test_platform.py` (epyc-nps2-mixed without its second NUMA node: on the "
                "whole fixture NCCL gives gpu3 the ConnectX-6 on a tie, so it is not idle there)",
                text=_prose("""
                [warning] gpu0, gpu1 share nic0 (mlx5_0) while nic1 (mlx5_1), as close to gpu0, gpu1, serves no GPU.
                    subjects: gpu0, gpu1, nic0, nic1
                    evidence: path gpu0-nic0 = PIX
                    evidence: path gpu1-nic0 = PIX
                    evidence: path gpu0-nic1 = PIX
                    remedy:   Check why nic1 (mlx5_1) is slower (link width or speed, port rate): NCCL, like this pairing, prefers the faster NIC. Do not set NCCL_IB_HCA per rank to force it: NCCL needs the same value on every rank of a node (NVIDIA/nccl#1478).
                """),  # noqa: E501
            ),
        ),
    ),
    Entry(
        code="DRA_PCIE_ROOT_MISMATCH",
        family="rails",
        severity=(Grade(Severity.INFO),),
        proof=(Proof.SYSFS,),
        about=_prose("""A Kubernetes DRA claim that asks for a GPU and a NIC with `matchAttribute:
        resource.kubernetes.io/pcieRoot` would not give some GPU its rail NIC. `pcieRoot` is the
        standard attribute DRA drivers publish for a PCI device: its root complex as `pci<domain>:<bus>`,
        the root-bus directory above it in sysfs (`topoagent plan --format dra` prints it with
        `pciBusID` and `numaNode` for every GPU and NIC). Two ways it goes wrong, both judged for GPUs
        whose rail is within one NUMA node (NODE or better, or a Grace GPU's P2C) and only from a host tree
        (pasted output does not name every root):

        - the root is too fine: the rail NIC sits under another root than the GPU (Grace
          GH200/GB200/GB300, where the GPU hangs off its own root and the NIC off another, or a NIC in a
          slot of another host bridge), so the match finds no NIC for the GPU, or not its own
          (`its rail NIC nic1 (mlx5_0) is under pci0000:38, the GPU under pci0000:16`);
        - the root is too coarse: the GPU's root also holds compute NICs farther from the GPU than its
          rail (several PCIe switches below one root complex), so the match may hand the GPU one of those.
          From `tests/features/plan/test_plan_schedulers.py` (two root ports on one root bus, each with a
          switch holding a GPU and its NIC): `gpu0: pci0000:10 also holds nic1 (PHB), farther than its rail
          NIC nic0 (PIX)`.

        The message names at most four GPUs (`; ...` for the rest). A host with one GPU and its rail NIC per
        root (DGX H100) raises nothing.

        Info, not warning: it proves a fact about the topology against a consumer the host may never
        have (a DRA claim that matches on `pcieRoot`); nothing on the host is wrong, and a healthy
        Grace or SR-IOV reference host must not warn forever (a Nagios check, the daemon's worst
        severity).  A cluster that does use such claims acts on the message: `topoagent plan
        --format dra --claim` judges a given claim and exits 1 when it is not aligned."""),
        messages={
            "": Wording(
                "A DRA claim matching GPU and NIC on resource.kubernetes.io/pcieRoot would not give {gpus} GPU(s) "
                "their rail NIC: {why}."
            )
        },
        remedies={
            "": Wording(
                "Pair GPU and NIC on another attribute in the claim (resource.kubernetes.io/numaNode, or a "
                "driver attribute naming the PCIe switch), or pick the NIC by its pciBusID from "
                "topoagent plan --format rails; matching on pcieRoot fits hosts with one GPU and its NIC per root."
            )
        },
        examples=(
            Example(
                fixture="sriov-nic",
                text=_prose("""
                [info] A DRA claim matching GPU and NIC on resource.kubernetes.io/pcieRoot would not give 1 GPU(s) their rail NIC: gpu0: its rail NIC nic1 (mlx5_0) is under pci0000:38, the GPU under pci0000:16.
                    subjects: gpu0, nic1
                    evidence: /sys/bus/pci/devices/0000:17:00.0 = ../../../devices/pci0000:16/...
                    evidence: /sys/bus/pci/devices/0000:39:00.0 = ../../../devices/pci0000:38/...
                    remedy:   Pair GPU and NIC on another attribute in the claim (resource.kubernetes.io/numaNode, or a driver attribute naming the PCIe switch), or pick the NIC by its pciBusID from topoagent plan --format rails; matching on pcieRoot fits hosts with one GPU and its NIC per root.
                """),  # noqa: E501
            ),
        ),
    ),
    # -- peer -------------------------------------------------------------------------------
    Entry(
        code="NO_PEER_MEMORY",
        family="peer",
        severity=(Grade(Severity.WARNING),),
        proof=(Proof.SYSFS,),
        outputs=(Output.FINDINGS, Output.GDR_BLOCKER),
        alert="TopoagentGpuDirectBlocked",
        about=_prose("""GPUs that use GPUDirect RDMA by NCCL's defaults (a rail NIC under their PCIe switch, on their
        Grace, or reached through an NVLinked peer GPU: `rails[].gdr` true), but none of
        nvidia_peermem, nv_peer_mem, /sys/kernel/mm/memory_peers (the files NCCL checks, NVIDIA/nccl
        src/transport/net_ib.cc) and no DMA-BUF (Linux >= 5.12 with the open GPU kernel module,
        read from `/proc/sys/kernel/osrelease` and `/proc/driver/nvidia/version`).  It is the verdict
        `topoagent fix peermem` gives (`topoagent.core.analysis.peermem`): one says "needed" exactly
        where the other raises this.  A host whose rails all cross the CPU stages through host memory
        whatever is loaded, and raises nothing here.  Warning, not critical: a recent rdma-core may
        still use DMA-BUF where the module facts are unknown. Offline scans skip it: loaded modules
        are not in pasted text."""),
        messages={
            "": Wording(
                "{gpus} GPU(s) use GPUDirect RDMA by NCCL's defaults but no peer-memory module is loaded "
                "(no nvidia_peermem, nv_peer_mem or memory_peers) and DMA-BUF is not available: NCCL logs "
                "'GPU Direct RDMA Disabled' and inter-node bandwidth drops several-fold.",
                when="DMA-BUF is known to be unavailable (kernel < 5.12 or the proprietary module)",
            ),
            "dmabuf unknown": Wording(
                "{gpus} GPU(s) use GPUDirect RDMA by NCCL's defaults but no peer-memory module is loaded "
                "(no nvidia_peermem, nv_peer_mem or memory_peers): unless DMA-BUF is in use (the kernel "
                "release or GPU kernel module is unknown), NCCL logs 'GPU Direct RDMA Disabled' and "
                "inter-node bandwidth drops several-fold.",
                when="whether DMA-BUF is available is unknown",
            ),
        },
        remedies={
            "": Wording(
                "modprobe nvidia_peermem (and list it in /etc/modules-load.d/), or use DMA-BUF: kernel >= 5.12, "
                "the open GPU kernel module and a recent rdma-core (NCCL uses it when available)."
            )
        },
        examples=(
            Example(
                fixture="faulty-gpu-node",
                text=_prose("""
                [warning] 8 GPU(s) use GPUDirect RDMA by NCCL's defaults but no peer-memory module is loaded (no nvidia_peermem, nv_peer_mem or memory_peers): unless DMA-BUF is in use (the kernel release or GPU kernel module is unknown), NCCL logs 'GPU Direct RDMA Disabled' and inter-node bandwidth drops several-fold.
                    subjects: gpu0, gpu1, gpu2, gpu3, gpu4, gpu5, gpu6, gpu7, nic1, nic2, nic3, nic5, nic6, nic7, nic8
                    evidence: /sys/module/nvidia_peermem = absent
                    evidence: /sys/module/nv_peer_mem = absent
                    evidence: /sys/kernel/mm/memory_peers = absent
                    remedy:   modprobe nvidia_peermem (and list it in /etc/modules-load.d/), or use DMA-BUF: kernel >= 5.12, the open GPU kernel module and a recent rdma-core (NCCL uses it when available).
                """),  # noqa: E501
            ),
        ),
    ),
    Entry(
        code="ACS_REDIRECT",
        family="peer",
        severity=(
            Grade(Severity.CRITICAL),
            Grade(
                Severity.INFO,
                "pasted lspci -vvv: a switch downstream or root port redirects but no GPU path the excerpt shows "
                "turns at it",
            ),
        ),
        proof=(Proof.CONFIG_SPACE, Proof.PASTED),
        outputs=(Output.FINDINGS, Output.GDR_BLOCKER, Output.ACS_BLOCKING, Output.DRAWN_ON_BRIDGE),
        alert="TopoagentGpuDirectBlocked",
        about=_prose("""ACS P2P Request/Completion Redirect or Egress Control enabled on a bridge where GPU peer
        traffic (GPU–GPU or GPU–NIC, PIX/PXB) would turn round. Parsed from the ACS extended capability in config
        space (or `lspci -vvv`'s `ACSCtl`). In pasted `lspci -vvv` a switch downstream or root port that
        redirects is reported even where the excerpt shows no GPU below it, as info: an excerpt may leave the
        GPU out, and what it does not show is not claimed. A port of a recognised NVIDIA platform (see
        `ACS_PLATFORM_MISMATCH`), or in a paste a ConnectX/BlueField-3 switch port or Grace/Vera root port, is
        not judged here: those platforms require some redirects."""),
        messages={
            "": Wording(
                "ACS on {bridge} {bdf} redirects peer-to-peer traffic up to the root complex ({redirects}): "
                "GPUDirect P2P/RDMA below it will hang or crawl.",
                when="{bridge} is the bridge's role (root port, switch downstream ...)",
            ),
            "no gpu seen": Wording(
                "ACS on {bridge} {bdf} redirects peer-to-peer traffic up to the root complex ({redirects}); the "
                "input shows no GPU path through it, but GPUDirect P2P/RDMA below it would hang or crawl.",
                when="pasted lspci -vvv, no GPU path seen through the port",
                host=HostKind.PASTED,
            ),
        },
        remedies={
            "": Wording(
                "Disable ACS redirect in the BIOS, or boot with pci=disable_acs_redir={bdf} (persistent); "
                "for a test only: setpci -s {bdf} ECAP_ACS+6.w=0000 (lost at reboot)."
            )
        },
        examples=(
            Example(
                fixture="faulty-gpu-node",
                text=_prose("""
                [critical] ACS on switch downstream 0000:17:01.0 redirects peer-to-peer traffic up to the root complex (ReqRedir, CmpltRedir): GPUDirect P2P/RDMA below it will hang or crawl.
                    subjects: bridge5, gpu0, gpu1, nic1, nic2
                    evidence: /sys/bus/pci/devices/0000:17:01.0/config = ACSCtl: SrcValid- TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd- EgressCtrl- DirectTrans-
                    remedy:   Disable ACS redirect in the BIOS, or boot with pci=disable_acs_redir=0000:17:01.0 (persistent); for a test only: setpci -s 0000:17:01.0 ECAP_ACS+6.w=0000 (lost at reboot).
                """),  # noqa: E501
            ),
        ),
    ),
    Entry(
        code="ACS_UNKNOWN",
        family="peer",
        severity=(Grade(Severity.INFO),),
        proof=(Proof.CONFIG_SPACE, Proof.PASTED),
        outputs=(Output.FINDINGS, Output.GDR_BLOCKER, Output.ACS_UNREAD),
        about=_prose("""Bridges on GPU paths whose extended config space was not seen: ACS is unknown, never assumed
        fine. A GPU path is every bridge between a GPU and its host bridge (a root port's ACS redirect
        sends a peer's requests up through the root complex), every bridge where a GPU's peer path
        turns, and every port an NVIDIA platform sets: the bridges the scan's unknown `acs` names too.
        The message says why, from the bytes the config file gave: 64 (the kernel gives a reader
        without CAP_SYS_ADMIN the header only: run as root), 256 (the function has no PCIe extended
        space, even for root: conventional PCI, virtio and a VM's emulated bridges; nothing to do on
        this host), or unreadable."""),
        messages={
            "": Wording("ACS state of {bridges} bridge(s) on GPU paths is unknown: {reasons}."),
            "pasted": Wording(
                "ACS state of {bridges} bridge(s) on GPU paths is unknown: lspci -vvv as root shows it "
                "(ACSCtl), and the output given does not.",
                host=HostKind.PASTED,
            ),
        },
        remedies={
            "": Wording(
                "Run topoagent scan as root (or with CAP_SYS_ADMIN) to read ACS control registers.",
                when="the config files were read without CAP_SYS_ADMIN (or not at all)",
            ),
            "no extended space": Wording(
                "Nothing to do on this host: a bridge without PCIe extended config space has no ACS to "
                "set (a VM's emulated bridge: ACS is the hypervisor host's to check).",
                when="every such bridge has no PCIe extended config space",
            ),
            "pasted": Wording(
                "Run sudo lspci -vvv on the host and pass it with --lspci-verbose.", host=HostKind.PASTED
            ),
        },
        examples=(
            Example(
                fixture="unprivileged",
                text=_prose("""
                [info] ACS state of 12 bridge(s) on GPU paths is unknown: the extended config space is readable only with CAP_SYS_ADMIN (64 bytes readable).
                    subjects: bridge1, bridge2, bridge3, bridge4, bridge5, bridge6, bridge8, bridge9, bridge10, bridge11, bridge12, bridge13
                    evidence: /sys/bus/pci/devices/0000:00:01.1/config = 64 bytes readable
                    evidence: /sys/bus/pci/devices/0000:01:00.0/config = 64 bytes readable
                    evidence: /sys/bus/pci/devices/0000:02:00.0/config = 64 bytes readable
                    remedy:   Run topoagent scan as root (or with CAP_SYS_ADMIN) to read ACS control registers.
                """),  # noqa: E501
            ),
        ),
    ),
    Entry(
        code="IOMMU_TRANSLATING",
        family="peer",
        severity=(Grade(Severity.WARNING),),
        proof=(Proof.SYSFS,),
        outputs=(Output.FINDINGS, Output.GDR_BLOCKER),
        alert="TopoagentGpuDirectBlocked",
        about="GPUs or RDMA NICs in IOMMU groups of type DMA/DMA-FQ without iommu=pt (nccl#257, pytorch#84803). "
        "Only on hosts with GPUs.",
        messages={
            "": Wording(
                "The IOMMU translates DMA for {functions} GPU/NIC function(s) and iommu=pt is not set: "
                "peer-to-peer transfers can hang or corrupt data, and every DMA pays a translation."
            )
        },
        remedies={
            "": Wording("Boot with iommu=pt (plus intel_iommu=on or amd_iommu=on if you need VFIO), then reboot.")
        },
        examples=(
            Example(
                fixture="faulty-gpu-node",
                text=_prose("""
                [warning] The IOMMU translates DMA for 16 GPU/NIC function(s) and iommu=pt is not set: peer-to-peer transfers can hang or corrupt data, and every DMA pays a translation.
                    subjects: gpu0, gpu1, nic1, nic2, gpu2, gpu3, nic3, nic4, gpu4, gpu5, nic5, nic6, gpu6, gpu7, nic7, nic8
                    evidence: /proc/cmdline = BOOT_IMAGE=/boot/vmlinuz-5.15.0-105-generic root=UUID=8e7d6c5b-4a39-4281-9f0e-d1c2b3a49586 ro intel_iommu=on
                    evidence: /sys/kernel/iommu_groups/10/type = DMA-FQ
                    evidence: /sys/kernel/iommu_groups/11/type = DMA-FQ
                    remedy:   Boot with iommu=pt (plus intel_iommu=on or amd_iommu=on if you need VFIO), then reboot.
                """),  # noqa: E501
            ),
        ),
    ),
    # -- platform ---------------------------------------------------------------------------
    Entry(
        code="ACS_PLATFORM_MISMATCH",
        family="platform",
        severity=(
            Grade(Severity.CRITICAL, "a port of a Data Direct or Inline complex (its DMA, GPU, NIC or root port)"),
            Grade(Severity.WARNING, "any other ConnectX/BlueField-3 switch port or Grace/Vera root port"),
        ),
        proof=(Proof.CONFIG_SPACE,),
        outputs=(Output.FINDINGS, Output.GDR_BLOCKER),
        alert="TopoagentPlatformMisconfigured",
        about=_prose("""A port whose ACS Control register does not hold the mask its platform requires
        (rdma_topo `compute_acs`): on a Data Direct complex the DMA function's port `xx110x1`, the GPU's
        port `xx101x1`, the root port `xx111x0`; on an Inline complex the NIC's port, the GPU's port and the
        root port `xx000x0` on bare metal, the NIC's port `1x111x1` and the others the kernel default when
        virtualized; every other ConnectX/BlueField-3 switch port and Grace/Vera root port the kernel default
        `xx111x1` (`xx000x0` on Inline bare metal). A mask reads bit 6 (DirectTrans) first, bit 0 (SrcValid)
        last, `x` for a bit left as it is. Critical for a complex's own ports (GPUDirect RDMA between the GPU
        and its NIC breaks or is refused), warning for the others (isolation differs from the platform's).
        `rdma_topo check` fails on exactly these ports."""),
        messages={
            "": Wording(
                "ACS on {port} {bdf} of {where} is {control} ({wrong}); the platform requires {mask}: {why}.",
                when="{port} names the port's part (the DMA function's port, the Grace root port ...), {where} "
                "the complex or the platform",
            ),
        },
        remedies={
            "": Wording(
                "topoagent fix acs sets the mask now and writes it as the pci=config_acs= boot parameter (a grub "
                "drop-in, with --yes); rdma_topo check (rdma-core) confirms it.",
                when="the running kernel takes pci=config_acs= (Linux 6.11 or later), or its release is unknown",
            ),
            "old kernel": Wording(
                "topoagent fix acs sets the mask now (until reboot); the running kernel {release} predates "
                "pci=config_acs= (Linux 6.11): boot one that has it (NVIDIA's guide names the 6.14-nvidia "
                "kernels) to keep the setting, and the IOMMU groups it makes, at boot.",
                when="the running kernel is older than 6.11",
            ),
        },
    ),
    Entry(
        code="IOMMU_GROUP_PLATFORM",
        family="platform",
        severity=(
            Grade(Severity.CRITICAL, "a Data Direct DMA function and its GPU in two IOMMU groups"),
            Grade(Severity.WARNING, "any other grouping the platform does not want, or no IOMMU groups"),
        ),
        proof=(Proof.SYSFS,),
        outputs=(Output.FINDINGS, Output.GDR_BLOCKER),
        alert="TopoagentPlatformMisconfigured",
        about=_prose("""The IOMMU grouping a complex needs (rdma_topo `check`): a Data Direct DMA function and
        its GPU in one group (its root port's Source Validation off at boot: NVIDIA's GPU driver checks it
        before GPUDirect RDMA, or refuses without `NVreg_GrdmaPciTopoCheckOverride=1`); an Inline complex's
        NIC and GPU in one group on bare metal, in two when virtualized; every NIC and GPU of a NUMA complex in
        its own. The kernel forms groups when it enumerates the devices (drivers/iommu/iommu.c,
        `pci_device_group`): only a boot with the right ACS changes them."""),
        messages={
            "data direct": Wording(
                "{dma}, the Data Direct DMA function of {where}, and {gpu} are in IOMMU groups {groups}: the "
                "platform needs one group (its root port's SrcValid off at boot), which the GPU driver checks "
                "before it allows GPUDirect RDMA through the DMA function.",
                when="Data Direct, two groups",
            ),
            "no groups": Wording(
                "{dma} and {gpu} of {where} have no IOMMU group: the DMA function and its GPU cannot be shown "
                "to share one, which the GPU driver checks before GPUDirect RDMA.",
                when="Data Direct, the IOMMU off",
            ),
            "inline bare metal": Wording(
                "{nic} and {gpu} of {where} are in IOMMU groups {groups}: on bare metal the platform turns ACS "
                "off at boot and they share one.",
                when="Inline bare metal, two groups",
            ),
            "inline virt": Wording(
                "{nic} and {gpu} of {where} are in IOMMU groups {groups}: a virtualized Inline host keeps them "
                "apart, so that each can be passed to a guest alone.",
                when="Inline virtualized, one group (or none)",
            ),
            "numa": Wording(
                "{devices} of {where} (NUMA node {node}) share an IOMMU group (or have none): the platform keeps "
                "every NIC and GPU in its own.",
                when="NUMA",
            ),
        },
        remedies={
            "": Wording(
                "Boot with the ACS the platform requires (topoagent fix acs --yes writes it as pci=config_acs=; "
                "then update-grub and reboot): IOMMU groups change only at boot."
            )
        },
    ),
    Entry(
        code="ATS_PLATFORM",
        family="platform",
        severity=(Grade(Severity.WARNING),),
        proof=(Proof.CONFIG_SPACE,),
        alert="TopoagentPlatformMisconfigured",
        about=_prose("""A ConnectX NIC of a NUMA complex (a GB200 tray: every GPU and NIC alone on a Grace root
        port) that exposes the ATS capability: Grace has no PCIe ATS (NVIDIA's Grace Blackwell CX-8 GPUDirect
        RDMA guide) and the platform requires ATS off (rdma_topo `check`). On an Inline host ATS is what
        tells a virtualized host from bare metal, so it is judged there by the ACS it needs."""),
        messages={
            "": Wording(
                "{nic} ({bdf}) on Grace's NUMA node {node} exposes ATS, which Grace does not support: the "
                "platform requires it off."
            )
        },
        remedies={"": Wording("mlxconfig -d {bdf} set ATS_ENABLED=false, then reboot (rdma_topo check confirms it).")},
    ),
    Entry(
        code="PLATFORM_UNRECOGNISED",
        family="platform",
        severity=(Grade(Severity.INFO),),
        proof=(Proof.INFERENCE,),
        about=_prose("""A host near one of NVIDIA's platform kinds -- a ConnectX-8 DMA function, a GPU on a
        Grace root port, a ConnectX switch with GPUs and NICs -- whose shape NVIDIA's tool would refuse (a DMA
        function without a V3 partner or its VPD unread, other devices in a Data Direct segment, NICs that
        disagree on ATS). Its ConnectX/BlueField-3 switch ports and Grace/Vera root ports are then judged by no ACS
        rule: the generic one (`ACS_REDIRECT`) would call a redirect the platform may require a fault, and
        `fix acs` leaves them alone; other bridges keep the generic rule."""),
        messages={
            "": Wording(
                "The host looks like NVIDIA's {kind} platform but does not match its shape ({problem}): its "
                "ConnectX and Grace ports are not judged for ACS, and fix acs leaves them alone."
            )
        },
        remedies={
            "": Wording(
                "Run the scan as root (a NIC's VPD is readable by root only), then rdma_topo check (rdma-core); "
                "a production system that still does not match is worth a report to NVIDIA."
            )
        },
        examples=(
            Example(
                source="`tests/core/test_platform.py` (the GB300 tray with one DMA function's `vpd` file gone, "
                "as a scan without root sees it; rdma_topo refuses the host the same way)",
                text=_prose("""
                [info] The host looks like NVIDIA's Data Direct platform but does not match its shape (the DMA function 0009:03:00.0 has no VPD V3 keyword (its vpd file unread or without one)): its ConnectX and Grace ports are not judged for ACS, and fix acs leaves them alone.
                    subjects: other1
                    evidence: platform: Data Direct = the DMA function 0009:03:00.0 has no VPD V3 keyword (its vpd file unread or without one)
                    remedy:   Run the scan as root (a NIC's VPD is readable by root only), then rdma_topo check (rdma-core); a production system that still does not match is worth a report to NVIDIA.
                """),  # noqa: E501
            ),
        ),
    ),
    # -- pcie -------------------------------------------------------------------------------
    Entry(
        code="LINK_WIDTH_DEGRADED",
        family="pcie",
        severity=(
            Grade(Severity.WARNING, "narrower than its link's capability (the lower of its and its slot's maximum)"),
        ),
        proof=(Proof.SYSFS, Proof.PASTED),
        outputs=(Output.FINDINGS, Output.DRAWN_ON_LINK),
        about=_prose("""A GPU, NIC, NVMe, accelerator or switch uplink trained narrower than its maximum. Judged
        against the link's capability, the lower of the device's maximum and its slot's (the port above):
        narrower than both is a warning (width does not change at idle, so this is a real fault); an x16
        card in an x8 slot, at x8, raises nothing: its evidence shows no fault. The daemon's link watch and its
        `topoagent_pcie_link_degraded` metric judge with the same function (`topoagent.core.analysis.links`)."""),
        messages={
            "": Wording("{id} {name} trained at x{width} of x{max_width}: {percent}% of its PCIe bandwidth."),
        },
        remedies={
            "": Wording(
                "Reseat the card or riser, check the slot's wiring (an x16 slot wired x8) and the BIOS "
                "bifurcation setting; the width does not change at idle, so this is not power saving."
            ),
        },
        examples=(
            Example(
                fixture="faulty-gpu-node",
                text=_prose("""
                [warning] gpu2 NVIDIA H100 SXM5 80GB trained at x8 of x16: 50% of its PCIe bandwidth.
                    subjects: gpu2
                    evidence: /sys/bus/pci/devices/0000:40:00.0/current_link_width = 8
                    evidence: /sys/bus/pci/devices/0000:40:00.0/max_link_width = 16
                    remedy:   Reseat the card or riser, check the slot's wiring (an x16 slot wired x8) and the BIOS bifurcation setting; the width does not change at idle, so this is not power saving.
                """),  # noqa: E501
            ),
        ),
    ),
    Entry(
        code="LINK_SPEED_DEGRADED",
        family="pcie",
        severity=(Grade(Severity.WARNING, "below its link's capability (the lower of its and its slot's maximum)"),),
        proof=(Proof.SYSFS, Proof.PASTED),
        outputs=(Output.FINDINGS, Output.DRAWN_ON_LINK),
        about=_prose("""A NIC, NVMe, accelerator or switch uplink below its link's capability (the lower of its and
        its slot's maximum speed). A device at its slot's speed, below its own maximum (a Gen5 card in a
        Gen4 slot; a Gen6 ConnectX-8 below a Gen5 Grace root port) raises nothing: its evidence shows no
        fault."""),
        messages={
            "": Wording(
                "{id} {name} link runs at {speed:g} of {max_speed:g} GT/s; NICs and switches do not downclock at idle."
            ),
        },
        remedies={
            "": Wording("Reseat the device, check risers/retimers and the BIOS PCIe generation setting."),
        },
        examples=(
            Example(
                fixture="faulty-gpu-node",
                text=_prose("""
                [warning] nic6 Mellanox ConnectX-7 link runs at 16 of 32 GT/s; NICs and switches do not downclock at idle.
                    subjects: nic6
                    evidence: /sys/bus/pci/devices/0000:9d:00.0/current_link_speed = 16
                    evidence: /sys/bus/pci/devices/0000:9d:00.0/max_link_speed = 32
                    remedy:   Reseat the device, check risers/retimers and the BIOS PCIe generation setting.
                """),  # noqa: E501
            ),
        ),
    ),
    Entry(
        code="LINK_SPEED_BELOW_MAX_GPU",
        family="pcie",
        severity=(Grade(Severity.INFO),),
        proof=(Proof.SYSFS, Proof.PASTED),
        about="A GPU below its maximum link speed: GPUs downclock at idle, so a one-shot reading cannot call it a "
        'fault (a GPU retrains to 2.5 GT/s when idle and back under load; nvidia-smi -q shows "PCIe Generation '
        'Current" changing).',
        messages={
            "": Wording(
                "{id} link runs at {speed:g} of {max_speed:g} GT/s; GPUs drop link speed at idle, "
                "so this is only a fault if it stays there under load."
            )
        },
        remedies={
            "": Wording(
                "Re-check under load (e.g. during nvbandwidth or a training step); if it stays low, "
                "check the slot and riser."
            ),
        },
        examples=(
            Example(
                fixture="epyc-nps2-mixed",
                text=_prose("""
                [info] gpu3 link runs at 2.5 of 32 GT/s; GPUs drop link speed at idle, so this is only a fault if it stays there under load.
                    subjects: gpu3
                    evidence: /sys/bus/pci/devices/0000:42:00.0/current_link_speed = 2.5
                    evidence: /sys/bus/pci/devices/0000:42:00.0/max_link_speed = 32
                    remedy:   Re-check under load (e.g. during nvbandwidth or a training step); if it stays low, check the slot and riser.
                """),  # noqa: E501
            ),
        ),
    ),
    Entry(
        code="FELL_OFF_BUS",
        family="pcie",
        severity=(
            Grade(Severity.CRITICAL, "a GPU or a rail (compute) NIC"),
            Grade(Severity.WARNING, "any other device"),
        ),
        proof=(Proof.CONFIG_SPACE, Proof.SYSFS),
        outputs=(Output.FINDINGS, Output.GDR_BLOCKER, Output.DEVICE_FAULT, Output.GPU_UNUSABLE),
        alert="TopoagentDeviceFellOffBus",
        about=_prose("""A function sysfs still lists whose config space reads all ones (vendor id 0xffff) and that is
        no SR-IOV VF (a VF's id registers read 0xffff by design): the device no longer answers, what
        the kernel shows after an NVIDIA GPU's Xid 79 or a surprise removal. The device stays in the
        model with the ids sysfs kept (`vendor`, `device`, `class`) and is counted, so nothing after
        it is renumbered."""),
        messages={
            "": Wording(
                "{id} ({bdf}, {name}) "
                "no longer answers on the PCIe bus: its config space reads all ones (for an NVIDIA GPU, Xid 79); "
                "the kernel still lists it with the ids it read at boot."
            )
        },
        remedies={
            "": Wording(
                "Drain the node; check dmesg for Xid 79 / AER and the slot's power and riser; a reset or "
                "reseat usually needs a reboot (echo 1 > /sys/bus/pci/devices/BDF/remove, then rescan, "
                "works only where the slot supports it)."
            )
        },
        examples=(
            Example(
                fixture="dgx-h100-faults",
                text=_prose("""
                [critical] gpu0 (0000:1b:00.0, NVIDIA H100 SXM5 80GB) no longer answers on the PCIe bus: its config space reads all ones (for an NVIDIA GPU, Xid 79); the kernel still lists it with the ids it read at boot.
                    subjects: gpu0
                    evidence: /sys/bus/pci/devices/0000:1b:00.0/config = vendor id 0xffff (all ones)
                    evidence: /sys/bus/pci/devices/0000:1b:00.0/vendor = 0x10de
                    evidence: /sys/bus/pci/devices/0000:1b:00.0/device = 0x2330
                    remedy:   Drain the node; check dmesg for Xid 79 / AER and the slot's power and riser; a reset or reseat usually needs a reboot (echo 1 > /sys/bus/pci/devices/BDF/remove, then rescan, works only where the slot supports it).
                """),  # noqa: E501
            ),
        ),
    ),
    Entry(
        code="PCIE_AER_ERRORS",
        family="pcie",
        severity=(Grade(Severity.CRITICAL, "any error was fatal"), Grade(Severity.WARNING, "non-fatal errors only")),
        proof=(Proof.SYSFS,),
        outputs=(Output.FINDINGS, Output.DEVICE_FAULT),
        alert="TopoagentPcieUncorrectableErrors",
        about=_prose("""Uncorrectable PCIe errors the kernel counted on a function since boot (`aer_dev_fatal`,
        `aer_dev_nonfatal`: drivers/pci/pcie/aer.c). Correctable errors (`aer_dev_correctable`) are no
        finding: they matter as a rate, which the daemon's `topoagent_pcie_aer_errors_total` counter gives
        (docs/daemon.md). Errors are often counted at the link partner (the port above a device
        that misbehaves), so look at both ends."""),
        messages={
            "": Wording(
                "{kind} {id} ({bdf}) counted {fatal} fatal and {nonfatal} non-fatal "
                "uncorrectable PCIe errors since boot{named}.",
                when="{named} lists up to six error names with their counts, in parentheses",
            )
        },
        remedies={
            "": Wording(
                "Check dmesg for the AER report and the device's link; fatal errors reset the link "
                "(the device may have dropped off): reseat or replace the card, cable or riser."
            )
        },
        examples=(
            Example(
                fixture="dgx-h100-faults",
                text=_prose("""
                [critical] nic nic5 (0000:40:00.0) counted 3 fatal and 4 non-fatal uncorrectable PCIe errors since boot (DLP 1, SDES 2, CmpltTO 4).
                    subjects: nic5
                    evidence: /sys/bus/pci/devices/0000:40:00.0/aer_dev_fatal = TOTAL_ERR_FATAL 3
                    evidence: /sys/bus/pci/devices/0000:40:00.0/aer_dev_nonfatal = TOTAL_ERR_NONFATAL 4
                    remedy:   Check dmesg for the AER report and the device's link; fatal errors reset the link (the device may have dropped off): reseat or replace the card, cable or riser.
                """),  # noqa: E501
            ),
        ),
    ),
    # -- numa -------------------------------------------------------------------------------
    Entry(
        code="NUMA_UNKNOWN",
        family="numa",
        severity=(
            Grade(Severity.WARNING, "a multi-node host"),
            Grade(Severity.INFO, "a single-node VM with GPUs, or pasted text (a gap in the input given)"),
        ),
        proof=(Proof.SYSFS, Proof.PASTED, Proof.INFERENCE),
        about=_prose("""GPUs/NICs with numa_node = -1 on a multi-node host, or in a VM with GPUs; from pasted text,
        GPUs/NICs whose NUMA node the output given does not show on a host it shows to have several
        nodes (a stated SYS cell, disjoint CPU affinities, or a list-valued NUMA Affinity such as
        `0-7`, which names nodes but no one of them for a GPU that is not on Grace): nvidia-smi's
        `N/A` and such lists are said, never kept silently.  A NIC's node follows a GPU's through
        its paths.  The message says which path classes the missing node leaves at their worst
        (`SYS`, marked unknown: only paths between host bridges); a path inside one root complex is
        the tree's (PHB, PIX ...), as the same scan prints it."""),
        messages={
            "": Wording(
                "{functions} GPU/NIC function(s) report no NUMA node (numa_node = -1) on a multi-node host: "
                "affinity cannot be derived{paths}.",
                when="a multi-node host; {paths} says how many of their paths are taken at their worst",
            ),
            "guest": Wording(
                "{functions} GPU/NIC function(s) report no NUMA node (numa_node = -1) in a VM: the host's "
                "placement is hidden from this guest.",
                when="a single-node guest",
            ),
            "pasted": Wording(
                "{functions} GPU/NIC function(s) have no known NUMA node in the output given, on a multi-node "
                "host: their affinity cannot be derived (a NIC's node follows a GPU's only through a PIX, PXB, PHB "
                "or NODE path).",
                host=HostKind.PASTED,
            ),
        },
        remedies={
            "": Wording(
                "Update the BIOS/firmware (the _PXM/SRAT tables give PCI locality) or set "
                "NCCL_TOPO_FILE; bind by measured locality meanwhile.",
                host=HostKind.BARE_METAL,
            ),
            "guest": Wording(
                "Expose the host NUMA layout to the VM (VMware numa.nodeAffinity / vNUMA, libvirt <numatune> and "
                "guest NUMA cells with the devices' host nodes) or give NCCL an NCCL_TOPO_FILE built on the host.",
                host=HostKind.GUEST,
            ),
            "pasted": Wording(
                "Give lspci -vvv too (it prints each function's NUMA node); if the host itself reports none "
                "(numa_node = -1), update the BIOS/firmware (_PXM/SRAT) or set NCCL_TOPO_FILE.",
                host=HostKind.PASTED,
            ),
        },
        examples=(
            Example(
                fixture="cloud-vm",
                text=_prose("""
                [warning] 5 GPU/NIC function(s) report no NUMA node (numa_node = -1) on a multi-node host: affinity cannot be derived; their path classes come from the PCIe tree, which places them.
                    subjects: nic0, gpu0, gpu1, gpu2, gpu3
                    evidence: /sys/bus/pci/devices/0000:00:02.0/numa_node = -1
                    evidence: /sys/bus/pci/devices/0000:00:04.0/numa_node = -1
                    evidence: /sys/bus/pci/devices/0000:00:05.0/numa_node = -1
                    remedy:   Expose the host NUMA layout to the VM (VMware numa.nodeAffinity / vNUMA, libvirt <numatune> and guest NUMA cells with the devices' host nodes) or give NCCL an NCCL_TOPO_FILE built on the host.
                """),  # noqa: E501
            ),
        ),
    ),
    Entry(
        code="NUMA_CPULIST_MISMATCH",
        family="numa",
        severity=(Grade(Severity.WARNING),),
        proof=(Proof.SYSFS,),
        about="A device whose local_cpulist shares no CPU with the node its numa_node names (firmware _PXM vs SRAT).",
        messages={
            "": Wording(
                "{id} says NUMA node {node} (CPUs {node_cpus}) but its local CPUs are {local_cpus}: "
                "firmware tables disagree, so affinity from either may be wrong."
            )
        },
        remedies={
            "": Wording(
                "Report to the platform vendor (ACPI _PXM vs SRAT); measure which CPUs are local "
                "(e.g. nvbandwidth or ib_write_bw with numactl) and bind by that."
            )
        },
        examples=(
            Example(
                fixture="faulty-gpu-node",
                text=_prose("""
                [warning] gpu6 says NUMA node 0 (CPUs 0-47,96-143) but its local CPUs are 48-95,144-191: firmware tables disagree, so affinity from either may be wrong.
                    subjects: gpu6
                    evidence: /sys/bus/pci/devices/0000:c0:00.0/numa_node = 0
                    evidence: /sys/bus/pci/devices/0000:c0:00.0/local_cpulist = 48-95,144-191
                    evidence: /sys/devices/system/node/node0/cpulist = 0-47,96-143
                    remedy:   Report to the platform vendor (ACPI _PXM vs SRAT); measure which CPUs are local (e.g. nvbandwidth or ib_write_bw with numactl) and bind by that.
                """),  # noqa: E501
            ),
        ),
    ),
    Entry(
        code="CPU_LESS_NUMA_NODE",
        family="numa",
        severity=(Grade(Severity.INFO),),
        proof=(Proof.SYSFS, Proof.PASTED),
        about=_prose("""NUMA nodes with memory but no CPUs (Grace GPU memory, CXL, POWER9 GPU memory), with the CPU
        node to bind to: the node of the GPU that owns the memory (driver numa_status, NVML, or a matrix's
        `GPU NUMA ID`), else the unique nearest CPU node by distance. A GPU's own memory is named as such
        (and in the scan JSON as `numa_nodes[].gpu`); nodes without memory either (Grace's empty nodes
        kept for MIG memory partitions, `memory_bytes` 0) hold nothing to bind to and are left out. One
        finding per CPU node to bind to; `{bind}` is `bind CPUs to node N instead`, or `no node has CPUs`."""),
        messages={
            "": Wording(
                "NUMA node(s) {nodes} have memory but no CPUs (GPU memory on Grace, CXL or HBM): binding a "
                "process's CPUs there fails; {bind}."
            ),
            "gpu memory": Wording(
                "NUMA node(s) {nodes} are the own memory of {gpus} (GPU memory onlined as a NUMA node, "
                "Grace's C2C or POWER9's NVLink: nvidia-smi's GPU NUMA ID) and have no CPUs: binding a "
                "process's CPUs there fails; {bind}.",
                when="the nodes are GPUs' own memory",
            ),
        },
        remedies={
            "": Wording(
                "numactl --cpunodebind={target} (memory may still go to node {node} with --membind or "
                "--preferred if that is the point)."
            ),
            "no cpus": Wording("Check that CPUs are online (/sys/devices/system/cpu/online).", when="no node has CPUs"),
        },
        examples=(
            Example(
                fixture="grace-hopper",
                # (the node's cpulist is empty: its evidence line ends in "= ")
                text="\n".join(
                    (
                        "[info] NUMA node(s) 1 are the own memory of gpu0 (GPU memory onlined as a NUMA node, Grace's "
                        "C2C or POWER9's NVLink: nvidia-smi's GPU NUMA ID) and have no CPUs: binding a process's CPUs "
                        "there fails; bind CPUs to node 0 instead.",
                        "    subjects: node1",
                        "    evidence: /sys/devices/system/node/node1/cpulist = ",
                        "    remedy:   numactl --cpunodebind=0 (memory may still go to node 1 with --membind or "
                        "--preferred if that is the point).",
                    )
                ),
            ),
        ),
    ),
    Entry(
        code="NUMA_NODES_OVERLAP",
        family="numa",
        severity=(Grade(Severity.WARNING),),
        proof=(Proof.SYSFS,),
        about=_prose("""NUMA nodes whose CPU lists share CPUs: a buggy SRAT (seen as every node claiming every CPU).
        Placement by CPUs and per-node binding are then unreliable, so it is said, never kept silently.
        Evidence names the file each node's CPUs came from (`cpulist`; `cpumap` on kernels that write
        no list; `cpu/cpu*/nodeN` links where the node's own files could not be read)."""),
        messages={
            "": Wording(
                "NUMA nodes {nodes} claim the same CPUs: the firmware's SRAT is "
                "inconsistent, so device placement by CPUs and per-node binding are unreliable."
            )
        },
        remedies={
            "": Wording(
                "Update the BIOS/firmware (ACPI SRAT); until then bind by socket (physical_package_id) and measure "
                "locality (numactl --hardware, nvbandwidth)."
            )
        },
        examples=(
            Example(
                source="`tests/core/read/test_cpu_files.py` (the DGX H100 fixture with both nodes' `cpulist` set to "
                "`0-223`)",
                text=_prose("""
                [warning] NUMA nodes 0, 1 claim the same CPUs: the firmware's SRAT is inconsistent, so device placement by CPUs and per-node binding are unreliable.
                    subjects: node0, node1
                    evidence: /sys/devices/system/node/node0/cpulist = 0-223
                    evidence: /sys/devices/system/node/node1/cpulist = 0-223
                    remedy:   Update the BIOS/firmware (ACPI SRAT); until then bind by socket (physical_package_id) and measure locality (numactl --hardware, nvbandwidth).
                """),  # noqa: E501
            ),
        ),
    ),
    Entry(
        code="NUMA_SWITCH_MISMATCH",
        family="numa",
        severity=(Grade(Severity.CRITICAL),),
        proof=(Proof.SYSFS, Proof.PASTED),
        alert="TopoagentNumaSwitchMismatch",
        about=_prose("""A GPU or NIC whose `numa_node` differs from the node every other function below its PCIe
        switch reports (two at least, the switch's ports included).  All of them hang off one root
        port of one host bridge, and the kernel gives them the host bridge's node (`pcibus_to_node`,
        from ACPI `_PXM`); a differing one was given another node -- a changed `_PXM`, or a
        `numa_node` written by hand (the file is writable by root, drivers/pci/pci-sysfs.c
        `numa_node_store`).  One of the two is wrong and the files cannot say which, so nothing placed
        by that node can be trusted: the rail still says PIX, while the plan would bind the device's
        work -- and `topoagent apply --irqs` its interrupts -- to another socket than its switch
        siblings'.  `apply --irqs` therefore leaves such a NIC's IRQs where they are, says why and
        exits 1.  (`numa_node` changed alone, without its `local_cpulist`, is also
        `NUMA_CPULIST_MISMATCH`.)"""),
        messages={
            "": Wording(
                "{id} says NUMA node {node}, but every other function below its PCIe switch {switch} ({siblings}) "
                "says node {siblings_node}: they hang off one host bridge, so one of the two is wrong, and "
                "CPU, memory and IRQ placement by {id}'s node may land on the wrong socket."
            )
        },
        remedies={
            "": Wording(
                "Find which is right: measure (nvbandwidth or ib_write_bw under numactl on each node) and check "
                "the firmware's _PXM (BIOS update) or whoever wrote /sys/bus/pci/devices/*/numa_node (it taints "
                "the kernel: /proc/sys/kernel/tainted). Until then topoagent apply --irqs leaves {id}'s IRQs alone."
            )
        },
        examples=(
            Example(
                fixture="faulty-gpu-node",
                text=_prose("""
                [critical] gpu6 says NUMA node 0, but every other function below its PCIe switch 0000:be:00.0 (gpu7, nic7, nic8, bridge22, ...) says node 1: they hang off one host bridge, so one of the two is wrong, and CPU, memory and IRQ placement by gpu6's node may land on the wrong socket.
                    subjects: gpu6, gpu7, nic7, nic8, bridge22, bridge23, bridge24, bridge25, bridge26
                    evidence: /sys/bus/pci/devices/0000:c0:00.0/numa_node = 0
                    evidence: /sys/bus/pci/devices/0000:c1:00.0/numa_node = 1
                    evidence: /sys/bus/pci/devices/0000:c2:00.0/numa_node = 1
                    remedy:   Find which is right: measure (nvbandwidth or ib_write_bw under numactl on each node) and check the firmware's _PXM (BIOS update) or whoever wrote /sys/bus/pci/devices/*/numa_node (it taints the kernel: /proc/sys/kernel/tainted). Until then topoagent apply --irqs leaves gpu6's IRQs alone.
                """),  # noqa: E501
            ),
        ),
    ),
    Entry(
        code="VM_FLAT_PCI_TREE",
        family="numa",
        severity=(Grade(Severity.INFO),),
        proof=(Proof.SYSFS, Proof.PASTED, Proof.INFERENCE),
        about=_prose("""A guest with several GPUs, none of them below a PCIe switch: on the root bus, or each on a
        root port of one emulated root complex (QEMU's q35 -- its 82G33 host bridge and ICH9 LPC in
        lspci --, i440FX, Hyper-V).  The hypervisor hides the host's switches (nccl#428), every
        GPU-NIC path in the guest is PHB, and NCCL turns GPUDirect RDMA off: the KVM guest with 8
        H200 of NVIDIA/nccl-tests#256 fell from 476 to 27 GB/s bus bandwidth.  A guest is known from
        the kernel (the hypervisor CPU flag, `/sys/hypervisor`, DMI) or from a function only a
        hypervisor presents in pasted lspci; a pasted matrix alone can only suggest one -- NVLinked
        (SXM) GPUs whose every GPU-NIC and NIC-NIC cell is PHB, which no bare-metal board wires --
        and says so.  The remedies are the guest's: NUMA-aware passthrough that keeps each GPU with
        its NIC, an NCCL topology file for the guest, `topoagent vms` on the hypervisor."""),
        messages={
            "": Wording(
                "The hypervisor presents every GPU {where}: the guest sees PHB between all devices and "
                "cannot see the host's PCIe switches, so NCCL turns GPUDirect RDMA off between them.",
                when="a guest the kernel or an emulated device proves; {where}: on the root bus, or on root ports",
            ),
            "suggested": Wording(
                "The matrix shows NVLinked (SXM) GPUs that reach every NIC, and every NIC each other, only "
                "through the host bridge (PHB): no bare-metal board wires SXM GPUs without PCIe switches, so "
                "this looks like a guest whose hypervisor hides them; NCCL in it turns GPUDirect RDMA off.",
                when="a pasted matrix alone (an inference)",
            ),
        },
        remedies={
            "": Wording(
                "On the hypervisor, topoagent vms shows each passed-through device's host NUMA node; pass GPUs "
                "and NICs through NUMA-aware, each GPU with its NIC (QEMU pxb-pcie expander buses with "
                "numa_node=, or pcie-root-port/x3130 switches mirroring the host). In the guest, give NCCL the "
                "host's topology: NCCL_TOPO_FILE from topoagent plan --format nccl-topo on the host, bus ids "
                "mapped to the guest's.",
                host=HostKind.GUEST,
            )
        },
        examples=(
            Example(
                fixture="cloud-vm",
                text=_prose("""
                [info] The hypervisor presents every GPU on the root bus: the guest sees PHB between all devices and cannot see the host's PCIe switches, so NCCL turns GPUDirect RDMA off between them.
                    subjects: gpu0, gpu1, gpu2, gpu3
                    evidence: /sys/bus/pci/devices/0000:00:04.0/ = pci0000:00
                    evidence: /sys/bus/pci/devices/0000:00:05.0/ = pci0000:00
                    evidence: /sys/bus/pci/devices/0000:00:06.0/ = pci0000:00
                    remedy:   On the hypervisor, topoagent vms shows each passed-through device's host NUMA node; pass GPUs and NICs through NUMA-aware, each GPU with its NIC (QEMU pxb-pcie expander buses with numa_node=, or pcie-root-port/x3130 switches mirroring the host). In the guest, give NCCL the host's topology: NCCL_TOPO_FILE from topoagent plan --format nccl-topo on the host, bus ids mapped to the guest's.
                """),  # noqa: E501
            ),
        ),
    ),
    # -- nvml -------------------------------------------------------------------------------
    Entry(
        code="NVLINK_P2P_DISABLED",
        family="nvml",
        severity=(Grade(Severity.CRITICAL),),
        proof=(Proof.NVML,),
        outputs=(Output.FINDINGS, Output.GDR_BLOCKER),
        alert="TopoagentNvlinkDown",
        about="Two GPUs joined by NVLink (from NVML) whose P2P read status NVML reports not OK (NCCL then fails with "
        'a hardware error: NVIDIA/nccl issues on "peer access is not supported").',
        messages={
            "": Wording(
                "{gpu} and {peer} share {nvlinks} NVLinks but NVML reports P2P not OK: NCCL aborts with "
                "a hardware error or falls back to host memory."
            )
        },
        remedies={
            "": Wording(
                "Check nvidia-smi nvlink -s and nvidia-smi -q (fabric manager state on NVSwitch systems: "
                "systemctl status nvidia-fabricmanager); reset the GPUs or reboot."
            )
        },
        examples=(
            Example(
                source="`tests/core/test_nvml_join.py` (the DGX H100 fixture joined with the recorded HGX H100 "
                "NVML, GPU0's P2P read status to GPU3 set to NOT_SUPPORTED)",
                text=_prose("""
                [critical] gpu0 and gpu3 share 18 NVLinks but NVML reports P2P not OK: NCCL aborts with a hardware error or falls back to host memory.
                    subjects: gpu0, gpu3
                    evidence: nvml:nvmlDeviceGetP2PStatus(0000:1b:00.0,0000:61:00.0,READ) = not OK
                    remedy:   Check nvidia-smi nvlink -s and nvidia-smi -q (fabric manager state on NVSwitch systems: systemctl status nvidia-fabricmanager); reset the GPUs or reboot.
                """),  # noqa: E501
            ),
        ),
    ),
    Entry(
        code="NVLINK_FABRIC_NOT_READY",
        family="nvml",
        severity=(
            Grade(Severity.WARNING, "the registration has not completed (not started, in progress)"),
            Grade(Severity.CRITICAL, "the registration completed with an error"),
        ),
        proof=(Proof.NVML,),
        alert="TopoagentNvlinkDown",
        about=_prose("""A GPU of an NVLink fabric (NVL72-class systems: GB200, GB300) whose registration with
        the fabric is not complete or failed, as NVML's `nvmlDeviceGetGpuFabricInfoV` reports it (state
        NOT_STARTED / IN_PROGRESS / COMPLETED, status: the registration's NVML return code; NVML API reference,
        "Fabric definitions"). Until it completes the GPU is in no clique and reaches no GPU of another tray
        over NVLink: multi-node NVLink jobs (NCCL's NVLS, IMEX channels) fail or fall back to the network. A
        registration still in progress is a warning (it may be a boot in progress); one that ended in an error
        is critical. From a capture, NVML's recording (`tools/nvml.json`) gives the same."""),
        messages={
            "": Wording(
                "{gpu}'s NVLink fabric registration is {state}: until it completes the GPU is in no clique and "
                "reaches no GPU of another tray over NVLink.",
                when="not started or in progress",
            ),
            "failed": Wording(
                "{gpu}'s NVLink fabric registration completed with {status}: the GPU is in no clique and "
                "reaches no GPU of another tray over NVLink.",
                when="completed with an error",
            ),
        },
        remedies={
            "": Wording(
                "Check the fabric manager and IMEX (systemctl status nvidia-fabricmanager nvidia-imex; the NVLink "
                "switch trays' NMX), and nvidia-smi -q's Fabric section; a GPU that stays unregistered needs a "
                "reset or the tray a reboot."
            )
        },
        examples=(
            Example(
                source="`tests/core/test_platform.py` (the GB200 tray with the constructed NVL72 NVML recording, "
                "gpu1's registration still in progress)",
                text=_prose("""
                [warning] gpu1's NVLink fabric registration is in progress: until it completes the GPU is in no clique and reaches no GPU of another tray over NVLink.
                    subjects: gpu1
                    evidence: nvml:nvmlDeviceGetGpuFabricInfoV(0009:01:00.0) = state in_progress
                    remedy:   Check the fabric manager and IMEX (systemctl status nvidia-fabricmanager nvidia-imex; the NVLink switch trays' NMX), and nvidia-smi -q's Fabric section; a GPU that stays unregistered needs a reset or the tray a reboot.
                """),  # noqa: E501
            ),
        ),
    ),
    # -- crosscheck -------------------------------------------------------------------------
    Entry(
        code="SOURCES_DISAGREE",
        family="crosscheck",
        severity=(Grade(Severity.WARNING),),
        proof=(Proof.SYSFS, Proof.PASTED, Proof.INFERENCE),
        about=_prose("""Raised by `topoagent scan --cross-check` on a live host: `nvidia-smi topo -m` or `lspci -vvv`
        disagrees with sysfs/NVML on a path class, a NUMA node or a link width. The evidence names both
        sources; placement advice follows sysfs. One difference is expected and not raised:
        `nvidia-smi` prints PXB for a pair below a Broadcom switch presented as two levels that NCCL
        flattens into one (and topoagent, with it, calls PIX)."""),
        messages={
            "missing": Wording("nvidia-smi lists {labels}, which sysfs does not show."),
            "path": Wording("nvidia-smi says {a}-{b} is {theirs}; the sysfs tree says {id_a}-{id_b} is {ours}."),
            "nvidia-smi numa": Wording(
                "nvidia-smi puts {label} on NUMA node {theirs}; sysfs says {id} is on node {ours}."
            ),
            "lspci numa": Wording("lspci says {bdf} is on NUMA node {theirs}; sysfs says {ours}."),
            "lspci width": Wording("lspci says {bdf} runs at x{theirs}; sysfs says x{ours}."),
        },
        remedies={
            "": Wording(
                "Find out which source is stale or wrong: re-run both; a driver or firmware update, a "
                "VM that hides the host tree, or a renamed RDMA device are the usual causes. "
                "Placement advice follows sysfs."
            )
        },
        examples=(
            Example(
                source="`tests/core/findings/test_crosscheck.py` (the DGX H100 fixture against a matrix with one cell "
                "and one NUMA affinity changed)",
                text=_prose("""
                [warning] nvidia-smi says GPU0-NIC2 is SYS; the sysfs tree says gpu0-nic4 is NODE.
                    subjects: gpu0, nic4
                    evidence: nvidia-smi topo -m: GPU0/NIC2 = SYS
                    evidence: sysfs: gpu0/nic4 = NODE
                    remedy:   Find out which source is stale or wrong: re-run both; a driver or firmware update, a VM that hides the host tree, or a renamed RDMA device are the usual causes. Placement advice follows sysfs.
                """),  # noqa: E501
            ),
        ),
    ),
    # -- audit ------------------------------------------------------------------------------
    Entry(
        code="PROCESS_CPUS_OFF_GPU_NODE",
        family="audit",
        severity=(
            Grade(Severity.WARNING, "the CPUs its threads may run on are on another socket than its GPU's"),
            Grade(Severity.INFO, "on another node of the GPU's socket, or where sockets are unknown"),
        ),
        proof=(Proof.SYSFS, Proof.NVML),
        outputs=(Output.FINDINGS, Output.PROCESS_SERIES),
        alert="TopoagentProcessMisplaced",
        about=_prose("""A process using a GPU some of whose threads may run on no CPU of the GPU's NUMA node
        (`Cpus_allowed_list` of `/proc/PID/task/TID/status`): its kernel launches and copies reach the
        GPU from afar."""),
        messages={
            "": Wording(
                "{who} uses {gpus}, but {off} of its {threads} thread(s) may run only on CPUs {where}, none of "
                "them the GPU's ({cpus}): its launches and copies cross to the GPU's node from afar."
            )
        },
        remedies={
            "": Wording("Move it now: {apply}; start it there next time: {exec} (or torchrun --numa-binding=node).")
        },
        examples=(
            Example(
                source="pid 1002 of `tests/features/audit/test_audit.py` (the DGX H100 fixture: it uses gpu1 "
                "on node 0, two of its threads may run only on node 1)",
                text=_prose("""
                [warning] pid 1002 (misplaced) uses gpu1 (NUMA node 0), but 2 of its 3 thread(s) may run only on CPUs 56-111,168-223, none of them the GPU's (0-55,112-167): its launches and copies cross to the GPU's node from afar.
                    subjects: gpu1, pid:1002
                    evidence: /proc/1002/task/1002/status = Cpus_allowed_list: 56-111,168-223
                    evidence: /proc/1002/task/1003/status = Cpus_allowed_list: 56-111,168-223
                    evidence: /sys/bus/pci/devices/0000:43:00.0/numa_node = 0
                    remedy:   Move it now: topoagent apply --pid 1002 --gpu 1 --yes (every thread; undo: topoagent apply --undo --yes); start it there next time: topoagent exec --gpu 1 -- CMD (or torchrun --numa-binding=node).
                """),  # noqa: E501
            ),
        ),
    ),
    Entry(
        code="PROCESS_MEMORY_OFF_GPU_NODE",
        family="audit",
        severity=(
            Grade(Severity.WARNING, "the memory is on another socket than its GPU's"),
            Grade(Severity.INFO, "on another node of the GPU's socket, or where sockets are unknown"),
        ),
        proof=(Proof.SYSFS, Proof.NVML),
        outputs=(Output.FINDINGS, Output.PROCESS_SERIES),
        alert="TopoagentProcessMisplaced",
        about=_prose("""A process using a GPU most of whose anonymous memory (at least 256 MiB) lives off the
        GPU's node, or whose memory policy names only other nodes (`/proc/PID/numa_maps`): every
        host-device copy of it crosses nodes."""),
        messages={"": Wording("{who} uses {where}, but {said}: every host-device copy of it crosses nodes.")},
        remedies={
            "": Wording(
                "Move its pages now: migratepages {pid} {from_nodes} {home} (numactl); start it with {exec} so "
                "new pages land on node {home}{policy}"
            )
        },
        examples=(
            Example(
                source="pid 1002 of `tests/features/audit/test_audit.py` (the DGX H100 fixture: 12 GiB of its memory "
                "on node 1, its GPU on node 0)",
                text=_prose("""
                [warning] pid 1002 (misplaced) uses gpu1's node 0, but 12.0 GiB of its 13.0 GiB of anonymous memory lives on NUMA node(s) 1: every host-device copy of it crosses nodes.
                    subjects: gpu1, pid:1002
                    evidence: /proc/1002/numa_maps = anonymous: N0=1.0 GiB N1=12.0 GiB
                    remedy:   Move its pages now: migratepages 1002 1 0 (numactl); start it with topoagent exec --gpu 1 --mem bind -- CMD so new pages land on node 0.
                """),  # noqa: E501
            ),
        ),
    ),
    Entry(
        code="PROCESS_HCA_NOT_RAIL",
        family="audit",
        severity=(Grade(Severity.WARNING),),
        proof=(Proof.SYSFS, Proof.NVML),
        outputs=(Output.FINDINGS, Output.PROCESS_SERIES),
        alert="TopoagentProcessMisplaced",
        about=_prose("""A process whose `NCCL_IB_HCA` (`/proc/PID/environ`) lets NCCL use none of the RDMA
        devices of its GPUs' rail NICs: the GPU's traffic goes through a farther NIC.  A process
        holding several GPUs is flagged only when none of them keeps a rail."""),
        messages={
            "": Wording(
                "{who} uses {gpus}, whose rail NIC is {rails}, but its NCCL_IB_HCA={value} lets NCCL use "
                "none of {names}: the GPU's traffic goes through a farther NIC."
            )
        },
        remedies={
            "": Wording(
                "Set the same NCCL_IB_HCA on every rank of the node, naming its compute NICs{node_env} -- "
                "topoagent plan --format env --gpu {index} prints it -- or leave it unset: NCCL then gives "
                "each GPU its nearest NIC itself."
            )
        },
        examples=(
            Example(
                source="pid 1002 of `tests/features/audit/test_audit.py` (the DGX H100 fixture: its NCCL_IB_HCA names "
                "only mlx5_6, its GPU's rail is mlx5_3)",
                text=_prose("""
                [warning] pid 1002 (misplaced) uses gpu1, whose rail NIC is nic5 (mlx5_3), but its NCCL_IB_HCA='=mlx5_6' lets NCCL use none of mlx5_3: the GPU's traffic goes through a farther NIC.
                    subjects: gpu1, nic5, pid:1002
                    evidence: /proc/1002/environ = NCCL_IB_HCA==mlx5_6
                    evidence: /sys/class/infiniband/mlx5_3/device = 0000:40:00.0
                    remedy:   Set the same NCCL_IB_HCA on every rank of the node, naming its compute NICs (=mlx5_0,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_9,mlx5_10,mlx5_11) -- topoagent plan --format env --gpu 1 prints it -- or leave it unset: NCCL then gives each GPU its nearest NIC itself.
                """),  # noqa: E501
            ),
        ),
    ),
    # -- expect -----------------------------------------------------------------------------
    Entry(
        code="EXPECT_DEVICE_MISSING",
        family="expect",
        severity=(Grade(Severity.CRITICAL),),
        proof=(Proof.EXPECTATION,),
        alert="TopoagentNotAsExpected",
        about=_prose("""A device the expected topology has at a slot is not there, and no device of its model turned
        up elsewhere: unseated, disabled in the BIOS, or fallen off the bus (listed by sysfs but no longer
        answering config reads: its link registers read all ones, a width of 63 that no minimum catches).
        One finding per lost device, the devices below it (a switch's ports and cards) in its evidence. A
        GPU lost this way often leaves no Xid (NVSentinel#684). Any device: whatever the build has and the
        host lacks is critical."""),
        messages={
            "": Wording("{what} expected at slot {slot} ({where}) is missing"),
            "below": Wording(
                "{what} expected at slot {slot} ({where}) is missing, with {below} more function(s) at or below it",
                when="its other functions or the devices below it are missing too",
            ),
            "off bus": Wording(
                "{what} at slot {slot} ({where}) fell off the bus: sysfs lists it, but it answers no config read",
                when="fallen off the bus",
            ),
            "many": Wording(
                "{count} devices of the expected topology are missing ({shown})",
                when="more than 32 of them: the first 32 are listed",
            ),
        },
        remedies={
            "": Wording(
                "Check that the device is seated and powered (lspci, dmesg for AER/Xid errors); "
                "a device that fell off the bus needs a reset or a repair."
            )
        },
        examples=(
            Example(
                text=_prose("""
                [critical] gpu 10de:2330 expected at slot s0.r1/01.0/00.0/01.0/00.0/00.0/00.0 (socket 0, NUMA node 0) is missing
                    subjects: s0.r1/01.0/00.0/01.0/00.0/00.0/00.0
                    evidence: slot s0.r1/01.0/00.0/01.0/00.0/00.0/00.0: device = expected gpu 10de:2330, seen None
                    remedy:   Check that the device is seated and powered (lspci, dmesg for AER/Xid errors); a device that fell off the bus needs a reset or a repair.
                """),  # noqa: E501
            ),
        ),
    ),
    Entry(
        code="EXPECT_DEVICE_EXTRA",
        family="expect",
        severity=(Grade(Severity.WARNING),),
        proof=(Proof.EXPECTATION,),
        alert="TopoagentNotAsExpected",
        about=_prose("""A device at a slot the expected topology does not have (nor a device of its model missing
        elsewhere): a card added, or a root port that appeared with a card moved into its slot."""),
        messages={
            "": Wording("{what} at slot {slot} ({where}) is not in the expected topology"),
            "below": Wording(
                "{what} at slot {slot} ({where}) is not in the expected topology, with {below} more function(s) at "
                "or below it",
                when="a card with more functions or devices below it",
            ),
        },
        remedies={"": Wording("Remove the device, or take a new baseline if the build changed.")},
        examples=(
            Example(
                text=_prose("""
                [warning] bridge root_port 8086:352a at slot s0.r0/04.0 (socket 0, NUMA node 0) is not in the expected topology, with 1 more function(s) at or below it
                    subjects: bridge3
                    evidence: slot s0.r0/04.0: device = expected None, seen bridge root_port 8086:352a
                    evidence: slot s0.r0/04.0/00.0: device (with it) = expected None, seen nvme 144d:a80a
                    remedy:   Remove the device, or take a new baseline if the build changed.
                """),  # noqa: E501
            ),
        ),
    ),
    Entry(
        code="EXPECT_PLACEMENT",
        family="expect",
        severity=(Grade(Severity.CRITICAL),),
        proof=(Proof.EXPECTATION,),
        alert="TopoagentNotAsExpected",
        about=_prose("""A device on another socket or NUMA node than expected: either at its slot (a firmware that
        reports another node), or moved -- a missing and an extra device of one kind and model are paired,
        and the finding names both slots (the moved device's other differences, a narrower link or ACS
        turned on, are their own findings at its new slot) -- or a whole root complex on the other socket
        (its root bus with the same devices below it under another socket's name: one finding, its
        devices listed, their paths to the rest not reported again). A NUMA layout change (SNC, NPS)
        that moves devices between the nodes of their socket is `EXPECT_HOST`'s."""),
        messages={
            "": Wording("{what} at slot {slot} is on {seen}, expected {expected}", when="at its slot"),
            "moved": Wording(
                "{what} expected at slot {slot} ({expected}) is at slot {seen_slot} ({seen})", when="moved"
            ),
            "root moved": Wording(
                "root complex {root} is on {seen} as {seen_root}, expected {expected} ({count} device(s) below it)",
                when="a root complex on the other socket",
            ),
        },
        remedies={
            "": Wording(
                "Check the BIOS NUMA settings (NPS, SNC) and the riser wiring against the build's.", when="at its slot"
            ),
            "moved": Wording(
                "Move the card back to the slot the build puts it in: its GPUs' paths depend on it.", when="moved"
            ),
            "root moved": Wording(
                "A root complex does not move by itself: compare the BIOS and its PCIe/NUMA settings (the "
                "firmware's proximity domain, _PXM, of the PCIe stack) with the build's.",
                when="a root complex on the other socket",
            ),
        },
        examples=(
            Example(
                text=_prose("""
                [critical] root complex s0.r1 is on socket 1 as s1.r1, expected socket 0 (8 device(s) below it)
                    subjects: s0.r1, s1.r1
                    evidence: slot s0.r1/01.0: slot = expected s0.r1/01.0, seen s1.r1/01.0
                    evidence: slot s0.r1/01.0/00.0: slot = expected s0.r1/01.0/00.0, seen s1.r1/01.0/00.0
                    evidence: slot s0.r1/01.0/00.0/00.0: slot = expected s0.r1/01.0/00.0/00.0, seen s1.r1/01.0/00.0/00.0
                    remedy:   A root complex does not move by itself: compare the BIOS and its PCIe/NUMA settings (the firmware's proximity domain, _PXM, of the PCIe stack) with the build's.
                """),  # noqa: E501
            ),
        ),
    ),
    Entry(
        code="EXPECT_LINK",
        family="expect",
        severity=(Grade(Severity.WARNING, "a PCIe link"), Grade(Severity.CRITICAL, "a GPU with fewer NVLinks")),
        proof=(Proof.EXPECTATION,),
        alert="TopoagentNotAsExpected",
        about=_prose("""A slot's link below what the expected topology says it must train to: the trained width, the
        link's maximum width or speed (current speed is not compared: idle devices drop to 2.5 GT/s). It
        is raised even when the device's own maximum is as low (a card swapped for an x8 one), which
        `LINK_WIDTH_DEGRADED` cannot see. `{short}` lists each fact below the expected one
        (`link width 8 below the expected 16`, or `unknown (link down?), expected 16`)."""),
        messages={
            "": Wording("{what} at slot {slot}: {short}"),
            "nvlinks": Wording("GPU at slot {slot} has {seen} NVLinks, expected {expected}", when="NVLinks"),
        },
        remedies={
            "": Wording(
                "Reseat the card or its riser/cable and check the slot's bifurcation setting; "
                "a link that trains narrower than on its siblings loses bandwidth."
            ),
            "nvlinks": Wording(
                "Check the NVLink/NVSwitch fabric (nvidia-smi nvlink -s) and the fabric manager.", when="NVLinks"
            ),
        },
        examples=(
            Example(
                text=_prose("""
                [warning] gpu 10de:2330 at slot s0.r1/01.0/00.0/01.0/00.0/00.0/00.0: link width 8 below the expected 16
                    subjects: gpu0
                    evidence: slot s0.r1/01.0/00.0/01.0/00.0/00.0/00.0: link width = expected 16, seen 8
                    remedy:   Reseat the card or its riser/cable and check the slot's bifurcation setting; a link that trains narrower than on its siblings loses bandwidth.
                """),  # noqa: E501
            ),
        ),
    ),
    Entry(
        code="EXPECT_PATH",
        family="expect",
        severity=(
            Grade(Severity.CRITICAL, "a GPU's rail NIC (by slot) or the path class to it"),
            Grade(Severity.WARNING, "other GPU-NIC path classes, one finding for the host listing every pair"),
        ),
        proof=(Proof.EXPECTATION,),
        alert="TopoagentNotAsExpected",
        about="A GPU's rail NIC (by slot) or the path class to it differs from the expected (NCCL and "
        "GPUDirect RDMA pair them by PCIe distance), or other GPU-NIC path classes changed.",
        messages={
            "": Wording("GPU at slot {slot}: rail NIC {seen} ({seen_path}), expected {expected} ({expected_path})"),
            "paths": Wording(
                "{pairs} GPU-NIC path class(es) changed ({shown})",
                when="other GPU-NIC path classes changed: {shown} names the first two pairs (and ... for more)",
            ),
        },
        remedies={
            "": Wording(
                "Put the rail NIC back in the slot the build wires to this GPU; NCCL and GPUDirect "
                "RDMA pair them by PCIe distance."
            ),
            "paths": Wording("Compare the slot wiring with the build's (topoagent scan --format tree).", when="paths"),
        },
        examples=(
            Example(
                text=_prose("""
                [critical] GPU at slot s0.r1/01.0/00.0/01.0/00.0/00.0/00.0: rail NIC s0.r3/01.0/00.0/00.0/00.0 (NODE), expected s0.r1/01.0/00.0/00.0/00.0 (PIX)
                    subjects: gpu0
                    evidence: slot s0.r1/01.0/00.0/01.0/00.0/00.0/00.0: rail = expected s0.r1/01.0/00.0/00.0/00.0, seen s0.r3/01.0/00.0/00.0/00.0
                    evidence: slot s0.r1/01.0/00.0/01.0/00.0/00.0/00.0: rail_path = expected PIX, seen NODE
                    remedy:   Put the rail NIC back in the slot the build wires to this GPU; NCCL and GPUDirect RDMA pair them by PCIe distance.
                """),  # noqa: E501
            ),
        ),
    ),
    Entry(
        code="EXPECT_STATE",
        family="expect",
        severity=(Grade(Severity.CRITICAL),),
        proof=(Proof.EXPECTATION,),
        alert="TopoagentNotAsExpected",
        about=_prose("""ACS control bits or the IOMMU domain type of a slot, or GPUDirect peer memory of the host
        (subject `host`), differ from the expected: a BIOS update that turned ACS redirect on breaks
        GPUDirect P2P and RDMA through the switch. One change on several devices is one finding listing
        them; an IOMMU domain type changed on every device is the host's IOMMU mode (subject `host`).
        ACS unknown on either side (a scan without root cannot read it) is not compared."""),
        messages={
            "": Wording(
                "{what} at slot {slot}: {changes}", when="{changes} as in `acs [ReqRedir,CmpltRedir], expected []`"
            ),
            "many": Wording(
                "{fact} {seen}, expected {expected}, on {count} devices ({shown})", when="one change on several devices"
            ),
            "iommu": Wording(
                "IOMMU domain type {seen} on all {count} devices, expected {expected}: the host's IOMMU mode changed",
                when="the IOMMU type of every device",
            ),
            "peer memory": Wording("GPUDirect peer memory is {seen}, expected {expected}", when="peer memory"),
        },
        remedies={
            "": Wording("Restore the build's ACS/IOMMU settings (BIOS, kernel command line, setpci at boot)."),
            "iommu": Wording(
                "Restore the build's IOMMU mode: the kernel command line (iommu=pt, intel_iommu=, amd_iommu=) and "
                "the BIOS's IOMMU (VT-d, AMD-Vi) setting.",
                when="the IOMMU type of every device",
            ),
            "peer memory": Wording(
                "Load nvidia_peermem (or the driver's memory_peers) as the build does.", when="peer memory"
            ),
        },
        examples=(
            Example(
                text=_prose("""
                [critical] bridge switch_downstream 1000:c030 at slot s0.r1/01.0/00.0/01.0/00.0/00.0: acs [ReqRedir,CmpltRedir], expected []
                    subjects: bridge8
                    evidence: slot s0.r1/01.0/00.0/01.0/00.0/00.0: acs = expected [], seen [ReqRedir,CmpltRedir]
                    remedy:   Restore the build's ACS/IOMMU settings (BIOS, kernel command line, setpci at boot).
                """),  # noqa: E501
            ),
        ),
    ),
    Entry(
        code="EXPECT_HOST",
        family="expect",
        severity=(
            Grade(Severity.CRITICAL, "the CPUs (model, sockets, cores, threads per core) or the NUMA layout"),
            Grade(Severity.WARNING, "a NUMA node's memory below the expected"),
        ),
        proof=(Proof.EXPECTATION,),
        alert="TopoagentNotAsExpected",
        about=_prose("""The host's CPU/NUMA shape (docs/fleet.md) differs from the expected: another CPU model or
        count, SMT turned off, a changed NUMA layout (SNC or NPS turned on or off: the devices that moved
        between the nodes of their socket, and the GPU-NIC paths between NODE and SYS that follow, are
        listed in its evidence rather than reported one by one), or a node with less memory (a DIMM lost;
        memory is compared in rounded GiB, so what the kernel reserves does not count)."""),
        messages={
            "": Wording("the host's CPUs differ: {changes}", when="CPUs"),
            "numa": Wording(
                "the NUMA layout changed: {seen}, expected {expected} ({explained} device node(s) and path(s) "
                "follow from it)",
                when="NUMA layout",
            ),
            "memory": Wording("memory below the expected: {nodes}", when="memory"),
        },
        remedies={
            "": Wording(
                "Check the BIOS (SMT/Hyper-Threading, cores enabled) and the CPUs fitted against the build's; "
                "another CPU is another build (take its own baseline).",
                when="CPUs",
            ),
            "numa": Wording(
                "Restore the BIOS's NUMA setting (SNC on Intel, NPS on AMD) to the build's: CPU, memory, GPU and "
                "NIC placement all follow from it.",
                when="NUMA layout",
            ),
            "memory": Wording(
                "Find the missing or failed DIMM (the BMC's event log, dmidecode -t memory, EDAC counters).",
                when="memory",
            ),
        },
        examples=(
            Example(
                text=_prose("""
                [critical] the host's CPUs differ: threads_per_core 1, expected 2
                    subjects: host
                    evidence: slot host: threads_per_core = expected 2, seen 1
                    remedy:   Check the BIOS (SMT/Hyper-Threading, cores enabled) and the CPUs fitted against the build's; another CPU is another build (take its own baseline).
                """),  # noqa: E501
            ),
        ),
    ),
    Entry(
        code="EXPECT_CLASS",
        family="expect",
        severity=(Grade(Severity.CRITICAL),),
        proof=(Proof.EXPECTATION,),
        alert="TopoagentNotAsExpected",
        about=_prose("""The host is of another hardware class than the expected topology (another board, CPU or
        GPU model; docs/fleet.md): its slots are not compared, since every one would differ. A class that
        differs only in what one side could not read (`unknown CPU`) or by one GPU model the host lost is
        the same class: its slots are compared."""),
        messages={
            "": Wording("the host is {seen}, the expected topology {expected}: another class, slots not compared")
        },
        remedies={
            "": Wording(
                "Compare with a baseline of this host's own class (topoagent baseline on a good host of it), "
                "or check that the right file is configured."
            )
        },
        examples=(
            Example(
                text=_prose("""
                [critical] the host is NVIDIA DGXH100 / 2x Intel(R) Xeon(R) Platinum 8480C / gpu 10de:2330, the expected topology QEMU Standard PC (Q35 + ICH9, 2009) / 2x Intel Xeon Processor (Icelake) / gpu 10de:20b2: another class, slots not compared
                    subjects: host
                    evidence: slot host: hw_class = expected QEMU Standard PC (Q35 + ICH9, 2009) / 2x Intel Xeon Processor (Icelake) / gpu 10de:20b2, seen NVIDIA DGXH100 / 2x Intel(R) Xeon(R) Platinum 8480C / gpu 10de:2330
                    remedy:   Compare with a baseline of this host's own class (topoagent baseline on a good host of it), or check that the right file is configured.
                """),  # noqa: E501
            ),
        ),
    ),
    # -- pasted -----------------------------------------------------------------------------
    Entry(
        code="GPU_LINK_SLOW_UNDER_LOAD",
        family="pasted",
        severity=(Grade(Severity.WARNING),),
        proof=(Proof.PASTED,),
        about=_prose("""A GPU whose link ran below its maximum PCIe generation or width while `nvidia-smi -q` showed
        it busy (a non-zero GPU utilisation, or performance state P0-P2 without the driver's `Idle` clock event
        reason: a GPU can sit at P0 with nothing running). An idle GPU drops its link speed by design
        (`nvidia-smi --help-query-gpu`: "These may be reduced when the GPU is not in use"); a busy one should run
        at its maximum, so this is a slot, riser or BIOS fault. The maximum is nvidia-smi's `Max`, the lower of
        the GPU's and the slot's (`Device Max`, `Host Max`). Where `nvidia-smi -q` says whether the GPU was busy,
        this code and `GPU_LINK_IDLE_DOWNCLOCKED` judge its link instead of `LINK_SPEED_BELOW_MAX_GPU` and
        `LINK_WIDTH_DEGRADED` (nvidia-smi: current generation and width "may be reduced when the GPU is not in
        use")."""),
        messages={
            "": Wording(
                "{id} {name} ran its PCIe link at {link} of {max_link} while busy ({state}): a GPU at work runs "
                "at its maximum, so the link is degraded."
            )
        },
        remedies={
            "": Wording(
                "Reseat the GPU or riser and check the BIOS PCIe generation setting; confirm with nvidia-smi -q -d "
                "PCI during a transfer (nvbandwidth)."
            ),
            "guest": Wording(
                "The GPU is a VM's (Virtualization Mode Pass-Through/VGPU): read its link on the hypervisor "
                "(lspci -vvv LnkSta) or ask the provider; nvbandwidth in the guest measures what the job gets.",
                when="a GPU inside a VM",
            ),
        },
        examples=(
            Example(
                source="`tests/core/paste/test_paste.py` (an A10G's `nvidia-smi -q` from NVIDIA/DCGM#232: P0, a "
                "process holding 8.7 GB, link x8 of x16)",
                text=_prose("""
                [warning] gpu0 NVIDIA A10G ran its PCIe link at Gen4 x8 of Gen4 x16 while busy (P0, 0 %): a GPU at work runs at its maximum, so the link is degraded.
                    subjects: gpu0
                    evidence: nvidia-smi -q GPU 00000000:00:1E.0: PCIe Generation Current = Gen4
                    evidence: nvidia-smi -q GPU 00000000:00:1E.0: PCIe Generation Max = Gen4
                    evidence: nvidia-smi -q GPU 00000000:00:1E.0: Link Width Current = x8
                    remedy:   The GPU is a VM's (Virtualization Mode Pass-Through/VGPU): read its link on the hypervisor (lspci -vvv LnkSta) or ask the provider; nvbandwidth in the guest measures what the job gets.
                """),  # noqa: E501
            ),
        ),
    ),
    Entry(
        code="GPU_LINK_IDLE_DOWNCLOCKED",
        family="pasted",
        severity=(Grade(Severity.INFO),),
        proof=(Proof.PASTED,),
        about=_prose("""A GPU whose link ran below its maximum PCIe generation or width while `nvidia-smi -q` showed
        it idle (performance state P3 or lower, or the `Idle` clock event reason active, at 0 % utilisation): GPUs
        drop to Gen1 at idle by design and retrain
        under load, so this is no fault; `GPU_LINK_SLOW_UNDER_LOAD` is raised when a busy GPU stays low."""),
        messages={
            "": Wording(
                "{id} {name} was idle ({state}) when its link ran at {link} of {max_link}: GPUs lower their link "
                "at idle by design, so this is no fault."
            )
        },
        remedies={
            "": Wording(
                "Nothing to do; to check the link, read nvidia-smi -q -d PCI while the GPU is busy (nvbandwidth, "
                "a training step)."
            )
        },
        examples=(
            Example(
                source="`tests/core/paste/test_paste.py` (an L4's `nvidia-smi -a` captured in thamada/nvidia-smi "
                "`gls/L4_smi.py`: P8, Gen1 x8 of Gen4 x16)",
                text=_prose("""
                [info] gpu0 NVIDIA L4 was idle (P8, 0 %, Idle clock event reason Active) when its link ran at Gen1 x8 of Gen4 x16: GPUs lower their link at idle by design, so this is no fault.
                    subjects: gpu0
                    evidence: nvidia-smi -q GPU 00000000:01:00.0: PCIe Generation Current = Gen1
                    evidence: nvidia-smi -q GPU 00000000:01:00.0: PCIe Generation Max = Gen4
                    evidence: nvidia-smi -q GPU 00000000:01:00.0: Link Width Current = x8
                    remedy:   Nothing to do; to check the link, read nvidia-smi -q -d PCI while the GPU is busy (nvbandwidth, a training step).
                """),  # noqa: E501
            ),
        ),
    ),
    Entry(
        code="P2P_NOT_SUPPORTED",
        family="pasted",
        severity=(
            Grade(Severity.CRITICAL, "NVLinked GPUs (NV#) whose read, write or NVLink P2P status is not OK"),
            Grade(
                Severity.WARNING,
                "GPUs under one PCIe switch (PIX/PXB), or NVLinked ones whose -p2p capability the paste does not show",
            ),
            Grade(Severity.INFO, "GNS between GPUs on PCIe: the GPU model has no PCIe P2P (GeForce), by design"),
        ),
        proof=(Proof.PASTED,),
        about=_prose("""Two GPUs NCCL would join by P2P -- NVLinked, or within its default P2P level PXB
        (`ncclTopoCheckP2p`, NVIDIA/nccl src/graph/paths.cc) -- whose P2P status `nvidia-smi topo -p2p` reports not OK
        (`CNS` chipset, `GNS` GPU, `TNS` topology, `NS` not supported, `DR` disabled by regkey). The status is
        NVML's `nvmlDeviceGetP2PStatus` for the capability on the command line (`r` read, `w` write, `n` NVLink;
        `a` atomics and `p` prop are not judged); the pair's path comes from the same paste's matrix. Pairs
        beyond PXB raise nothing: NCCL does not use P2P there by default."""),
        messages={
            "": Wording(
                "{gpu} and {peer} are {path} (one PCIe switch) but the driver reports P2P {status} ({meaning}, "
                "{capability}): NCCL stages their traffic through host memory.",
                when="a PCIe pair",
            ),
            "nvlink": Wording(
                "{gpu} and {peer} share NVLinks ({path}) but the driver reports P2P {status} ({meaning}, "
                "{capability}): NCCL aborts with a hardware error or falls back to host memory.",
                when="an NVLinked pair",
            ),
            "gpu": Wording(
                "{gpu} and {peer} are {path} but the driver reports P2P GNS (GPU not supported, {capability}): the "
                "GPU model has no PCIe P2P, so NCCL stages their traffic through host memory by design.",
                when="GNS on PCIe",
            ),
        },
        remedies={
            "": Wording(
                "Check ACS and the IOMMU on the switch (lspci -vvv ACSCtl, iommu=pt) and the BIOS P2P settings; "
                "NCCL_P2P_LEVEL does not help while the driver refuses P2P."
            ),
            "nvlink": Wording(
                "Check nvidia-smi nvlink -s and the fabric manager (systemctl status nvidia-fabricmanager on "
                "NVSwitch systems); reset the GPUs or reboot.",
                when="an NVLinked pair",
            ),
            "gpu": Wording(
                "Nothing to fix on the host; GPUs with PCIe P2P (data-centre or workstation parts) or NVLink avoid "
                "the host-memory copy.",
                when="GNS on PCIe",
            ),
        },
        examples=(
            Example(
                source="`tests/core/paste/test_paste.py` (derived: the H100 NV18 matrix of NVIDIA/nccl#1453 with a "
                "`-p2p n` matrix whose GPU0-GPU1 cell is NS)",
                text=_prose("""
                [critical] gpu0 and gpu1 share NVLinks (NV18) but the driver reports P2P NS (Not supported, nvlink): NCCL aborts with a hardware error or falls back to host memory.
                    subjects: gpu0, gpu1
                    evidence: nvidia-smi topo -p2p n GPU0/GPU1 (line 45) = NS (Not supported)
                    evidence: nvidia-smi topo -m GPU0/GPU1 = NV18
                    remedy:   Check nvidia-smi nvlink -s and the fabric manager (systemctl status nvidia-fabricmanager on NVSwitch systems); reset the GPUs or reboot.
                """),  # noqa: E501
            ),
        ),
    ),
    Entry(
        code="NVLINK_INACTIVE",
        family="pasted",
        severity=(Grade(Severity.WARNING),),
        proof=(Proof.PASTED,),
        about=_prose("""A GPU with fewer active NVLinks than another GPU of the same host has, as `nvidia-smi
        nvlink -s` lists them (`<inactive>` links): one build gives every GPU the same links, so a link is down
        (a cable, an NVSwitch tray, the fabric manager) and that GPU's NVLink bandwidth is cut."""),
        messages={
            "": Wording(
                "{gpu} has {active} active NVLinks where another GPU of this host has {most} ({inactive} inactive): "
                "its NVLink bandwidth is cut."
            )
        },
        remedies={
            "": Wording(
                "Check nvidia-smi nvlink -e (errors) and -R, the fabric manager's log on NVSwitch systems, and "
                "reseat the GPU or NVLink bridge; a reset or reboot retrains the links."
            )
        },
        examples=(
            Example(
                source="`tests/core/paste/test_paste.py` (derived: the V100 of Azure/azhpc-diagnostics#73 with links "
                "3 and 5 `<inactive>`, after a V100 with all six active)",
                text=_prose("""
                [warning] gpu1 (GPU3) has 4 active NVLinks where another GPU of this host has 6 (2 inactive): its NVLink bandwidth is cut.
                    subjects: gpu1
                    evidence: nvidia-smi nvlink -s GPU 3 (line 10) = 4 active, inactive: 3, 5
                    remedy:   Check nvidia-smi nvlink -e (errors) and -R, the fabric manager's log on NVSwitch systems, and reseat the GPU or NVLink bridge; a reset or reboot retrains the links.
                """),  # noqa: E501
            ),
        ),
    ),
    Entry(
        code="NIC_PORT_DOWN",
        family="pasted",
        severity=(
            Grade(Severity.WARNING, "a compute (rail) NIC none of whose ports is ACTIVE"),
            Grade(Severity.INFO, "another NIC, or a netdev shown Down without its port's state"),
        ),
        proof=(Proof.PASTED, Proof.SYSFS),
        about=_prose("""An RDMA NIC none of whose ports is `ACTIVE` (`ibdev2netdev -v`, `ibv_devinfo`, or
        `/sys/class/infiniband/DEV/ports/N/state`): NCCL uses active ports only (NVIDIA/nccl
        src/transport/net_ib.cc, `ncclIbInitDevices`), so the GPUs this NIC serves as their rail send through
        another NIC, farther away. A netdev `ibdev2netdev` shows `(Down)` without the port's state is info: on
        InfiniBand the IPoIB interface may be down while the port is active."""),
        messages={
            "": Wording(
                "{nic} is a rail NIC but no port of it is active ({state}): NCCL skips it and its GPUs' traffic goes "
                "through another NIC."
            ),
            "other": Wording("{nic} has no active port ({state}).", when="a NIC that is no GPU's rail"),
            "netdev": Wording(
                "{nic}'s netdev {netdevs} is Down (ibdev2netdev); its RDMA port's own state is not shown.",
                when="only the netdev's state is known",
            ),
        },
        remedies={
            "": Wording(
                "Check the cable and the switch port (ibstat, ibv_devinfo; a subnet manager for InfiniBand); "
                "until it is up, NCCL_IB_HCA can pin its GPUs to a working NIC."
            ),
            "netdev": Wording(
                "Run ibdev2netdev -v or ibv_devinfo to see the port's state (PORT_ACTIVE is what NCCL needs).",
                when="only the netdev's state is known",
            ),
        },
        examples=(
            Example(
                source="`tests/core/paste/test_paste.py` (derived: a public 4-GPU/4-NIC matrix with `ibv_devinfo` "
                "blocks whose mlx5_1 is PORT_DOWN)",
                text=_prose("""
                [warning] nic1 (mlx5_1) is a rail NIC but no port of it is active (DOWN): NCCL skips it and its GPUs' traffic goes through another NIC.
                    subjects: nic1
                    evidence: ibdev2netdev/ibv_devinfo mlx5_1 port 1: state = DOWN
                    remedy:   Check the cable and the switch port (ibstat, ibv_devinfo; a subnet manager for InfiniBand); until it is up, NCCL_IB_HCA can pin its GPUs to a working NIC.
                """),  # noqa: E501
            ),
        ),
    ),
    Entry(
        code="PCIE_AER_LOGGED",
        family="pasted",
        severity=(
            Grade(Severity.CRITICAL, "a fatal uncorrected error was logged"),
            Grade(Severity.WARNING, "non-fatal uncorrected errors only"),
            Grade(Severity.INFO, "corrected errors only"),
        ),
        proof=(Proof.PASTED,),
        about=_prose("""PCIe AER events a pasted kernel log (`dmesg`, `journalctl -k`) holds for a function
        (drivers/pci/pcie/aer.c: `PCIe Bus Error: severity=…`, `AER: … error received`). A fatal error resets the
        link (the device may drop off); non-fatal ones fail transactions; corrected ones are repaired by the link
        and matter as a rate, which an excerpt cannot show (`PCIE_AER_ERRORS` reads the kernel's counters on a
        live host)."""),
        messages={
            "": Wording(
                "{id} ({bdf}) logged {fatal} fatal and {nonfatal} non-fatal uncorrected PCIe errors in the kernel "
                "log given{named}."
            ),
            "corrected": Wording(
                "{id} ({bdf}) logged {corrected} corrected PCIe error(s) in the kernel log given{named}: the link "
                "repaired them; a rising rate points at the slot, riser or retimer.",
                when="corrected errors only",
            ),
        },
        remedies={
            "": Wording(
                "Check the device's link (lspci -vvv LnkSta) and the slot, riser or cable; fatal errors reset the "
                "link: reseat or replace the card."
            ),
            "corrected": Wording(
                "Watch the rate (the daemon's topoagent_pcie_aer_errors_total, or aer_dev_correctable twice "
                "minutes apart under load); reseat if it keeps rising.",
                when="corrected errors only",
            ),
        },
        examples=(
            Example(
                source="`tests/core/paste/test_paste.py` (journal AER lines of a root port from pop-os/pop#3363)",
                text=_prose("""
                [info] bridge0 (0000:00:03.1) logged 2 corrected PCIe error(s) in the kernel log given (BadTLP, Timeout): the link repaired them; a rising rate points at the slot, riser or retimer.
                    subjects: bridge0
                    evidence: dmesg line 4 = Sep 19 16:18:02 bubz kernel: [68183.615810] pcieport 0000:00:03.1: PCIe Bus Error: severity=Correctable, type=Data Link Layer, (Transmitter ID)
                    evidence: dmesg line 8 = Sep 19 16:18:02 bubz kernel: [68183.637897] pcieport 0000:00:03.1: PCIe Bus Error: severity=Correctable, type=Data Link Layer, (Receiver ID)
                    remedy:   Watch the rate (the daemon's topoagent_pcie_aer_errors_total, or aer_dev_correctable twice minutes apart under load); reseat if it keeps rising.
                """),  # noqa: E501
            ),
        ),
    ),
)

#: Every code, by name, in the order of the page (by family).
CATALOGUE: dict[str, Entry] = {e.code: e for e in _ENTRIES}
