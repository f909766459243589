"""Pure parsers for the small text files of sysfs and procfs.

Each takes the stripped text of one file and returns a value, or ``None`` where the kernel
writes a placeholder for "unknown".  They raise :class:`~topoagent.core.errors.InputError` (a
``ValueError``) on text not of the file's format; the caller records that as a probe error
with the path.
"""

from __future__ import annotations

import re

from topoagent.core.cpuset import CpuSet
from topoagent.core.digits import is_decimal, is_hex, parse_decimal
from topoagent.core.errors import InputError
from topoagent.core.snapshot import CpuIdentity


def parse_int(text: str) -> int:
    """A decimal integer file (``sriov_numvfs``, ``physical_package_id``)."""
    return parse_decimal(text)


def parse_hex_id(text: str) -> int:
    """An id or class file written as ``0x10de`` / ``0x030200``."""
    t = text.strip()
    digits = t[2:]
    # ASCII hex only: int(t, 16) also takes "0x1_0" and non-ASCII digits ("0x١").
    if t[:2].lower() != "0x" or len(digits) > 16 or not is_hex(digits):
        raise InputError(f"expected 0x-prefixed hex, got {t[:40]!r}")
    return int(digits, 16)


def parse_numa_node(text: str) -> int | None:
    """``numa_node`` (or ``physical_package_id``): -1 means the firmware gave no locality (VMs,
    single-node BIOSes; s390 and some POWER kernels for the package).

    The kernel writes exactly ``-1`` for "none" (``NUMA_NO_NODE``, drivers/pci/pci-sysfs.c
    ``numa_node_show``); any other negative number is no node id and no placeholder either, so
    it is refused (a probe error that quotes it), not read as "unknown".
    """
    value = parse_decimal(text, signed=True)
    if value < -1:
        raise ValueError(f"not a node id: {text.strip()[:40]!r}")
    return value if value >= 0 else None


_SPEED = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*GT/s\b")


def parse_link_speed(text: str) -> float | None:
    """``current_link_speed``/``max_link_speed`` in GT/s.

    Kernels since 5.7 print ``"16.0 GT/s PCIe"``, older ones ``"16 GT/s"``; a link whose speed
    the kernel cannot decode reads ``"Unknown"`` (drivers/pci/pci-sysfs.c,
    ``pci_speed_string``), which is unknown, not zero.
    """
    t = text.strip()
    if not t or t.lower().startswith("unknown"):
        return None
    m = _SPEED.match(t)
    if not m:
        raise InputError(f"not a link speed: {t!r}")
    value = float(m.group(1))
    return value if value > 0 else None


def parse_link_width(text: str) -> int | None:
    """``current_link_width``/``max_link_width`` in lanes.

    0 is what a link that is down or virtual reports, 255 (0xff) what an all-ones config read
    gives; neither is a width.
    """
    value = parse_decimal(text, signed=True)
    return value if 0 < value < 255 else None


def parse_node_meminfo_total(text: str) -> int | None:
    """Bytes of ``MemTotal`` from ``nodeN/meminfo`` (``Node 0 MemTotal:  263921240 kB``)."""
    m = re.search(r"MemTotal:\s*([0-9]+)\s*kB", text)
    return parse_decimal(m.group(1)) * 1024 if m else None


def parse_distances(text: str) -> tuple[int, ...]:
    """A node's ``distance`` row (``10 21``).  One check of the whole row: a host with 4,096
    nodes has 16.7 million of these numbers."""
    words = text.split()
    digits = "".join(words)
    # every word ASCII digits (checked on the row at once: not is_decimal, which bounds one
    # number's length), and no word longer than parse_decimal's 19 digits
    if digits and not (digits.isascii() and digits.isdigit()) or re.search("[0-9]{20}", text):
        raise ValueError(f"not a distance row: {text.strip()[:40]!r}")
    return tuple(map(int, words))


def parse_cpus_allowed(status_text: str) -> CpuSet | None:
    """``Cpus_allowed_list`` from ``/proc/<pid>/status``."""
    for line in status_text.splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return CpuSet.parse(line.split(":", 1)[1])
    return None


def _unterminated(text: str) -> str:
    """A CPU list or mask file's text without the NUL that Linux 5.15-rc kernels wrote after the
    newline (``"0-31\\n\\0"``: ``bitmap_print_to_buf`` in lib/bitmap.c returned a length one
    past the text).  hwloc's reader stops at the NUL for the same reason."""
    return text.rstrip("\x00").strip() if text.endswith("\x00") else text


def parse_cpulist_file(text: str) -> CpuSet:
    """A list-format CPU file (``cpulist``, ``local_cpulist``, ``online``, ``*_siblings_list``)."""
    return CpuSet.parse(_unterminated(text))


def parse_cpumap_file(text: str) -> CpuSet:
    """A mask-format CPU file (``cpumap``, ``local_cpus``): comma-separated 32-bit hex words,
    most significant first (lib/bitmap.c ``bitmap_print_to_pagebuf`` with ``%*pb``)."""
    return CpuSet.parse_mask(_unterminated(text))


def parse_local_cpus(cpulist: str | None, cpumask: str | None) -> CpuSet | None:
    """A device's local CPUs from ``local_cpulist``, else from the ``local_cpus`` mask."""
    if cpulist is not None:
        return parse_cpulist_file(cpulist)
    if cpumask is not None:
        return parse_cpumap_file(cpumask)
    return None


def parse_rdma_state(text: str) -> str:
    """An InfiniBand port ``state`` (``"4: ACTIVE"`` -> ``"ACTIVE"``)."""
    return text.split(":", 1)[-1].strip()


def parse_rdma_rate(text: str) -> float | None:
    """An InfiniBand port ``rate`` in Gb/s (``"400 Gb/sec (4X NDR)"`` -> 400.0)."""
    m = re.match(r"\s*([0-9]+(?:\.[0-9]+)?)\s*Gb/sec", text)
    if not m:
        raise InputError(f"not an RDMA rate: {text!r}")
    return float(m.group(1))


def parse_net_speed(text: str) -> int | None:
    """``/sys/class/net/IF/speed`` in Mb/s; -1 (or an unsigned wrap of it) when the link is down.

    Empty text (what a capture holds when the read failed with EINVAL) is unknown too.
    """
    if not text.strip():
        return None
    value = parse_decimal(text, signed=True)
    return value if 0 < value < 4_000_000 else None


def parse_cpuinfo_hypervisor(text: str) -> bool:
    """Whether ``/proc/cpuinfo`` flags a hypervisor (x86 ``hypervisor`` CPUID bit)."""
    for line in text.splitlines():
        if line.startswith("flags") and ":" in line:
            return "hypervisor" in line.split(":", 1)[1].split()
    return False


def _cpuinfo_fields(text: str) -> dict[str, str]:
    """``key: value`` lines of ``/proc/cpuinfo`` text, the first occurrence of each key: the
    first CPU's block and the lines some architectures print once after every CPU's (POWER's
    ``machine``, ``model``)."""
    # Only the first block and the last: every CPU's block between repeats the first's keys, and
    # POWER prints its summary (``machine``, ``model``) once, as the block after the last CPU's
    # (Linux arch/powerpc/kernel/setup-common.c, show_cpuinfo).
    first, _, rest = text.partition("\n\n")
    fields: dict[str, str] = {}
    for line in (*first.splitlines(), *rest.rpartition("\n\n")[2].splitlines()):
        key, sep, value = line.partition(":")
        if sep and (key := key.strip()) not in fields:
            fields[key] = " ".join(value.split())
    return fields


#: arm64 ``CPU implementer`` -> (name, {``CPU part`` -> core}) for the server cores GPU hosts
#: carry (Linux arch/arm64/include/asm/cputype.h: ARM_CPU_IMP_ARM 0x41, NVIDIA 0x4e, Ampere
#: 0xc0; the part numbers of ARM_CPU_PART_NEOVERSE_*, NVIDIA_CPU_PART_*, AMPERE_CPU_PART_*).
_ARM_PARTS: dict[int, tuple[str, dict[int, str]]] = {
    0x41: (
        "ARM",
        {
            0xD0C: "Neoverse-N1",
            0xD40: "Neoverse-V1",
            0xD49: "Neoverse-N2",
            0xD4F: "Neoverse-V2",
            0xD84: "Neoverse-V3",
            0xD8E: "Neoverse-N3",
        },
    ),
    0x4E: ("NVIDIA", {0x003: "Carmel", 0x004: "Olympus"}),
    0xC0: ("Ampere", {0xAC3: "AmpereOne", 0xAC4: "AmpereOne AC04"}),
}


def _arm_model(implementer: str, part: str) -> str:
    """An arm64 core named from cpuinfo's ``CPU implementer`` and ``CPU part`` (hex)."""
    try:
        imp, num = int(implementer, 16), int(part, 16)
    except ValueError:
        return f"arm64 {implementer}:{part}"
    vendor, parts = _ARM_PARTS.get(imp, (f"arm64 implementer {imp:#04x}", {}))
    return f"{vendor} {parts.get(num, f'part {num:#05x}')}"


def parse_cpuinfo_model(text: str) -> str | None:
    """The CPU model ``/proc/cpuinfo`` names, spaces collapsed, or None: ``model name`` (x86,
    and the arm32/ia64 kernels that print one); POWER's ``cpu`` (``POWER9, altivec supported``
    -> ``POWER9``); arm64's ``CPU implementer`` and ``CPU part`` (``0x41``/``0xd4f`` -> ``ARM
    Neoverse-V2``; arm64 kernels print no model name); else the vendor and family the kernel
    gives (s390's ``vendor_id: IBM/S390``, an x86 CPU without a brand string).  Every
    architecture names its CPU somehow: s390 and POWER9 hosts without it fell into one class
    with x86 test machines (issue 32)."""
    fields = _cpuinfo_fields(text)
    if fields.get("model name"):
        return fields["model name"]
    cpu = fields.get("cpu", "")
    if cpu:
        return cpu.split(",", 1)[0].strip() or None
    if "CPU implementer" in fields and "CPU part" in fields:
        return _arm_model(fields["CPU implementer"], fields["CPU part"])
    vendor = fields.get("vendor_id") or fields.get("vendor") or ""
    family = fields.get("cpu family") or fields.get("family") or ""
    return " ".join(p for p in (vendor, f"family {family}" if family else "") if p) or None


def parse_cpuinfo_system(text: str) -> str | None:
    """The system ``/proc/cpuinfo`` names where a platform has no DMI: POWER's ``machine``
    (``PowerNV 8335-GTW``), or None."""
    return _cpuinfo_fields(text).get("machine") or None


def parse_device_tree_model(text: str) -> str | None:
    """The device tree's ``model`` property (``/sys/firmware/devicetree/base/model``: a
    NUL-terminated string, Documentation/devicetree/usage-model.rst), or None when empty."""
    return " ".join(text.split("\0", 1)[0].split()) or None


def parse_cpu_identity(text: str) -> CpuIdentity:
    """``arch``, ``vendor``, ``familyid``, ``modelid`` of the first CPU in ``/proc/cpuinfo``
    text (only those it states)."""
    fields = {}
    for line in text.split("\n\n", 1)[0].splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    arch = None
    # The field only each architecture's cpuinfo has -> the ``arch`` NCCL's XML reader knows.
    if "vendor_id" in fields:
        arch = "x86_64"
    elif "CPU implementer" in fields:
        arch = "arm64"
    elif fields.get("cpu", "").startswith("POWER"):
        arch = "ppc64"
    family, model = fields.get("cpu family", ""), fields.get("model", "")
    return CpuIdentity(
        arch=arch,
        vendor=fields.get("vendor_id") or None,
        familyid=family if is_decimal(family) else None,
        modelid=model if is_decimal(model) else None,
    )


def parse_kernel_release(text: str) -> tuple[int, int] | None:
    """(major, minor) of a kernel release (``/proc/sys/kernel/osrelease``: ``6.14.0-1007-nvidia-64k``);
    None when it does not start with two numbers."""
    m = re.match(r"\s*([0-9]{1,4})\.([0-9]{1,4})", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def parse_nvidia_numa_status(text: str) -> int | None:
    """The ``Node:`` line of the NVIDIA driver's ``numa_status`` (GPU memory onlined as a node)."""
    m = re.search(r"^Node:\s*(-?[0-9]+)\s*$", text, re.MULTILINE)
    if not m:
        raise InputError("no Node: line")
    value = parse_decimal(m.group(1), signed=True)
    return value if value >= 0 else None


#: One ``NAME count`` line of an AER counter file (u64 counts: at most 20 digits).
_AER_LINE = r"[!-~]+ [0-9]{1,20}\n"
_AER_NONZERO = r"(?m)^([!-~]+) (0*[1-9][0-9]*)$"  # compiled at first use (re's cache), not at import


def parse_aer_stats(text: str, total: str | None = None) -> tuple[int, tuple[tuple[str, int], ...]]:
    """One of a function's AER counter files (``aer_dev_fatal``, ``aer_dev_nonfatal``,
    ``aer_dev_correctable``): the total and the named counters that are not zero.

    The kernel writes one ``NAME count`` line per error the AER capability names, a
    ``dev_fatal_errs_bit[N] count`` line for an unnamed bit that counted, and last the total
    (``TOTAL_ERR_FATAL``, ``TOTAL_ERR_NONFATAL``, ``TOTAL_ERR_COR``): drivers/pci/pcie/aer.c,
    ``aer_stats_dev_attr``.  ``total`` is the last line's name for this file (None: any
    ``TOTAL_`` name).  Checked with
    one regular expression and the non-zero lines picked by another: every scan reads three
    of these per function.
    """
    body = text.strip() + "\n"
    last = re.escape(total) if total is not None else "TOTAL_[A-Z_]+"
    m = re.fullmatch(f"(?:{_AER_LINE})*({last}) ([0-9]{{1,20}})\n", body)
    if m is None:
        raise ValueError(f"not an AER counter file ending in {total or 'TOTAL_...'}: {text.strip()[-60:]!r}")
    counts = tuple((name, int(n)) for name, n in re.findall(_AER_NONZERO, body[: m.start(1)]))
    return int(m.group(2)), counts
