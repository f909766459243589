"""An independent reader of NCCL topology XML: what NCCL makes of an ``NCCL_TOPO_FILE`` on a host.

Written from NCCL's source (NVIDIA/nccl, ``src/graph/xml.h``, ``xml.cc``, ``topo.cc``,
``paths.cc``), not from topoagent's code: each step names the NCCL function it repeats.  For
every local rank it does what ``ncclTopoGetSystem`` does -- load the file, set every ``<cpu>``'s
``host_hash``, complete the rank's own GPU from sysfs (``ncclTopoFillGpu``), list the net plugin's
devices (``ncclTopoProcessNet``/``ncclTopoPopulateNics``), trim (``ncclTopoTrimXml``) -- then fuses
the ranks' trees (``ncclTopoFuseXml``), builds the system the way ``ncclTopoGetSystemFromXml``
does (refusing a missing attribute with NCCL's own message), flattens Broadcom switches
(``ncclTopoFlattenBcmSwitches``) and classifies each GPU->NET path.  With no file it is NCCL's
own sysfs detection: the reference a file must reproduce.

The net plugin's devices are the IB plugin's (src/transport/net_ib/init.cc), ConnectX-8 Data
Direct included: with ``NCCL_IB_DATA_DIRECT=1`` (its default) an RDMA device that has a Data
Direct DMA function is listed as ``<name>_dma`` at that function (:meth:`Host.of`).

Left out: NVLink/C2C (no NVML here), NIC fusion (``NCCL_NET_MERGE_LEVEL``), bandwidths.  The CPU
NCCL runs on answers CPUID with the host's identity; here that is the fixture's
``/proc/cpuinfo``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from itertools import pairwise

#: Elements each parent's loader takes (xml.cc ncclTopoXmlLoadSystem/Cpu/Pci/Gpu/Nic); others are
#: skipped with their subtree ("Ignoring element").
HANDLERS = {
    "system": {"cpu"},
    "cpu": {"pci", "nic"},
    "pci": {"pci", "gpu", "nic", "pcilink"},
    "gpu": {"nvlink", "c2c"},
    "nic": {"net"},
}
MAX_ATTR_COUNT = 16  # xml.h: further attributes are dropped by the parser
BDF = re.compile(r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-9a-fA-F]$")  # xml.cc checkBDFFormat


class Refused(Exception):
    """NCCL would stop: the message is NCCL's WARN text."""


@dataclass(eq=False)
class Node:
    name: str
    attrs: dict[str, str] = field(default_factory=dict)
    subs: list[Node] = field(default_factory=list)
    parent: Node | None = None
    #: xmlGetNode's type: "open"/"single" as parsed, "none" for nodes NCCL adds (xmlAddNode
    #: leaves the zeroed type); xmlFindNode compares it.
    type: str = "none"

    def sub(self, name: str, key: str | None = None, value: str | None = None) -> Node | None:
        """xml.h xmlGetSub / xmlGetSubKv."""
        return next((s for s in self.subs if s.name == name and (key is None or s.attrs.get(key) == value)), None)

    def walk(self):
        yield self
        for s in self.subs:
            yield from s.walk()


class Xml:
    """A tree plus its nodes in creation order (xml->nodes), which xmlFindTag* search."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []

    def add(self, parent: Node | None, name: str) -> Node:  # xml.h xmlAddNode
        n = Node(name, parent=parent)
        self.nodes.append(n)
        if parent is not None:
            parent.subs.append(n)
        return n

    def find(self, tag: str, key: str | None = None, value: str | None = None) -> Node | None:
        """xml.h xmlFindTag / xmlFindTagKv: the first live node in creation order."""
        for n in self.nodes:
            if n.name == tag and n.type != "removed" and (key is None or n.attrs.get(key) == value):
                return n
        return None

    @property
    def top(self) -> Node | None:
        return self.find("system")


# ---------------------------------------------------------------- parsing (xml.cc xmlGetNode)
_TOKEN = re.compile(r"""\s*(?:<!--.*?-->|<(/?)([^\s/>]+)((?: [^\s=/>]+=(?:"[^"]*"|'[^']*'))*)\s*(/?)>)""", re.DOTALL)
_ATTR = re.compile(r""" ([^\s=/>]+)=(?:"([^"]*)"|'([^']*)')""")


def parse(text: str) -> Xml:
    """The file as ``ncclTopoGetXmlFromFile`` loads it; :class:`Refused` where its parser stops."""
    xml = Xml()
    stack: list[Node] = []
    pos = 0
    while pos < len(text):
        if not text[pos:].strip():
            break
        m = _TOKEN.match(text, pos)
        if m is None:
            raise Refused(f"XML Parse error : expecting '<' at {text[pos : pos + 20]!r}")
        pos = m.end()
        closing, name, attrs, single = m.groups()
        if name is None:
            continue  # a comment (xmlSkipComment)
        if closing:
            if not stack or stack[-1].name != name:
                raise Refused(f"XML Mismatch : {stack[-1].name if stack else None} / {name}")
            stack.pop()
            continue
        parent = stack[-1] if stack else None
        known = (parent is None and name == "system") or (parent is not None and name in HANDLERS.get(parent.name, ()))
        if parent is not None and parent.type == "skipped":
            known = False
        node = xml.add(parent if known else None, name) if known else Node(name, type="skipped")
        if known:
            node.type = "single" if single else "open"
            pairs = [(k, a if a is not None else b) for k, a, b in _ATTR.findall(attrs)]
            node.attrs = dict(pairs[:MAX_ATTR_COUNT])
        else:
            node.type = "skipped"
        if not single:
            stack.append(node)
    if stack:
        raise Refused(f"XML Parse : unterminated {stack[-1].name}")
    top = xml.top
    if top is not None and attr_int(top, "version") != 1:  # ncclTopoXmlLoadSystem
        raise Refused(f"XML Topology has wrong version {top.attrs['version']}, 1 needed")
    return xml


def attr(node: Node, key: str) -> str:
    """xml.h xmlGetAttrStr: required."""
    if key not in node.attrs:
        raise Refused(f"Attribute {key} of node {node.name} not found")
    return node.attrs[key]


def attr_int(node: Node, key: str) -> int:
    """xml.h xmlGetAttrInt: required, read as strtol(str, NULL, 0) reads (0 when no digits)."""
    m = re.match(r"\s*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)", attr(node, key))
    if m is None:
        return 0
    sign, digits = m.groups()
    value = int(digits, 16) if digits[:2] in ("0x", "0X") else int(digits, 8) if digits[0] == "0" else int(digits)
    return -value if sign == "-" else value


# ---------------------------------------------------------------- the host NCCL runs on
@dataclass
class Host:
    """A sysfs root as NCCL sees it: its GPUs (the ranks, PCI order), the net plugin's devices
    (name, busid, speed in Mb/s; mlx5_N by N, as ibv lists them) and the CPU identity CPUID gives."""

    root: str
    gpus: list[str]
    nets: list[tuple[str, str, int]]
    identity: dict[str, str]

    @classmethod
    def of(cls, root: str, data_direct: int = 1) -> Host:
        """The host at ``root`` as NCCL sees it with ``NCCL_IB_DATA_DIRECT=data_direct`` (1, its
        default): src/transport/net_ib/init.cc lists an RDMA device that has a Data Direct DMA
        function as ``<name>_dma`` at that function (1), as itself then ``<name>_dma`` (2), or as
        itself (0)."""
        devs = os.path.join(root, "sys/bus/pci/devices")
        gpus = [
            b
            for b in sorted(os.listdir(devs))
            if _read(os.path.join(devs, b, "vendor")) == "0x10de"
            and _read(os.path.join(devs, b, "class"))[:6] in ("0x0300", "0x0302")
        ]
        dma = data_direct_functions(root)
        nets = []
        ib = os.path.join(root, "sys/class/infiniband")
        names = (
            sorted(os.listdir(ib), key=lambda n: (n.rstrip("0123456789"), int("0" + n[len(n.rstrip("0123456789")) :])))
            if os.path.isdir(ib)
            else []
        )
        for name in names:
            busid = os.path.basename(os.path.realpath(os.path.join(ib, name, "device")))
            rate = re.match(r"(\d+)", _read(os.path.join(ib, name, "ports/1/rate")))
            speed = int(rate.group(1)) * 1000 if rate else 10000
            places = [(name, busid)]
            if data_direct and busid in dma:
                places = [(name + "_dma", dma[busid])] if data_direct == 1 else [*places, (name + "_dma", dma[busid])]
            nets += [(n, b, speed) for n, b in places]
        info = _read(os.path.join(root, "proc/cpuinfo")).split("\n\n")[0]
        fields = {k.strip(): v.strip() for k, _, v in (ln.partition(":") for ln in info.splitlines())}
        ident = {"arch": "x86_64" if "vendor_id" in fields else "arm64"}
        if "vendor_id" in fields:
            ident |= {
                "vendor": fields["vendor_id"],
                "familyid": fields.get("cpu family", "0"),
                "modelid": fields.get("model", "0"),
            }
        return cls(root, gpus, nets, ident)

    def pci_path(self, busid: str) -> str | None:
        """xml.cc getPciPath: the realpath of the function, as a /sys path; None if absent."""
        p = os.path.join(self.root, "sys/bus/pci/devices", busid.lower())
        if not os.path.exists(p):
            return None
        return "/sys" + os.path.realpath(p)[len(os.path.realpath(os.path.join(self.root, "sys"))) :]

    def read(self, path: str) -> str:
        return _read(os.path.join(self.root, path.lstrip("/")))


def vpd_keywords(data: bytes) -> dict[str, bytes]:
    """The read-only keywords of a PCI VPD image (PCI Local Bus 3.0 section 6.4: large resource
    tags 0x82 identifier, 0x90 VPD-R, 0x91 VPD-W, small tag 0x78 the end)."""
    out: dict[str, bytes] = {}
    i = 0
    while i + 3 <= len(data) and data[i] & 0x80:
        tag, size = data[i], int.from_bytes(data[i + 1 : i + 3], "little")
        body = data[i + 3 : i + 3 + size]
        if tag == 0x90:
            j = 0
            while j + 3 <= len(body):
                key, n = body[j : j + 2].decode("latin-1"), body[j + 2]
                out[key] = body[j + 3 : j + 3 + n]
                j += 3 + n
        i += 3 + size
    return out


def data_direct_functions(root: str) -> dict[str, str]:
    """Each NIC function's ConnectX-8 Data Direct DMA function (15b3:2100), by bus id: the DMA
    function whose VPD ``V3`` (the VUID the mlx5 driver matches them by) is the NIC's own, as
    linux-rdma's ``rdma_topo`` pairs them."""
    devs = os.path.join(root, "sys/bus/pci/devices")
    vuid: dict[bytes, list[str]] = {}
    for b in sorted(os.listdir(devs)):
        try:
            with open(os.path.join(devs, b, "vpd"), "rb") as f:
                v3 = vpd_keywords(f.read()).get("V3")
        except OSError:
            continue
        if v3:
            vuid.setdefault(v3, []).append(b)
    out = {}
    for group in vuid.values():
        dma = [b for b in group if _read(os.path.join(devs, b, "device")) == "0x2100"]
        out |= {b: dma[0] for b in group if dma and b not in dma}
    return out


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().rstrip("\n")
    except OSError:
        return ""


# ---------------------------------------------------------------- what a rank adds (xml.cc)
def _speed(text: str) -> float:
    m = re.match(r"\s*([0-9.]+) GT/s", text)  # sscanf("%f GT/s")
    return float(m.group(1)) if m else float("inf")


def fill_from_sys(xml: Xml, host: Host, pci: Node) -> None:
    """xml.cc ncclTopoGetXmlFromSys: fill what is unset, then the parent, up to the <cpu>."""
    path = host.pci_path(pci.attrs["busid"])
    _fill_ids(host, pci, path)
    _fill_link(host, pci, path)
    parent = pci.parent if pci.parent is not None else _attach_to_parent(xml, host, pci, path)
    if parent.name == "pci":
        fill_from_sys(xml, host, parent)
    elif parent.name == "cpu":
        fill_cpu(host, parent)


def _fill_ids(host: Host, pci: Node, path: str | None) -> None:
    if path:
        cls = host.read(path + "/class")
        if cls:
            pci.attrs["class"] = cls  # always overwritten from sysfs
    for key in ("vendor", "device", "subsystem_vendor", "subsystem_device"):
        if key not in pci.attrs and path and host.read(f"{path}/{key}"):
            pci.attrs[key] = host.read(f"{path}/{key}")


def _fill_link(host: Host, pci: Node, path: str | None) -> None:
    """The slower of the device's and its port's max speed, the narrower of their widths."""
    if "link_speed" not in pci.attrs:
        if path:
            dev, port = host.read(path + "/max_link_speed"), host.read(path + "/../max_link_speed")
            pci.attrs["link_speed"] = port if _speed(port) < _speed(dev) else dev
        else:
            pci.attrs["link_speed"] = ""
    if "link_width" not in pci.attrs:
        if path:
            w = [
                int(x) if x.isdigit() else 0
                for x in (host.read(path + "/max_link_width"), host.read(path + "/../max_link_width"))
            ]
            pci.attrs["link_width"] = str(min(w))
        else:
            pci.attrs["link_width"] = ""


def _attach_to_parent(xml: Xml, host: Host, pci: Node, path: str | None) -> Node:
    """Find or make the node above ``pci`` (the upper switch or the CPU) and insert it there."""
    top = xml.top
    assert top is not None
    busid = pci.attrs["busid"]
    parent: Node | None = None
    if path:
        numa = host.read(path + "/numa_node")
        parts = path.split("/")
        # Rewind two "/" and follow the upper PCI switch, or stop at a CPU root complex.
        for up in range(len(parts) - 2, 0, -1):
            if not BDF.match(parts[up]):
                parent = top.sub("cpu", "numaid", numa) or _new_cpu(xml, top, numa)
                break
            if len(parts) - 1 - up == 2:
                parent = xml.find("pci", "busid", parts[up]) or _attach(xml, None, "pci", busid=parts[up])
                break
    else:
        parent = xml.find("cpu", "numaid", "-1") or _new_cpu(xml, top, "-1")
        fill_cpu(host, parent)
    assert parent is not None
    pci.parent = parent
    # Keep PCI sub devices ordered by PCI Bus ID (Issue #820)
    at = next(
        (i for i, s in enumerate(parent.subs) if "busid" in s.attrs and busid < s.attrs["busid"]), len(parent.subs)
    )
    parent.subs.insert(at, pci)
    return parent


def _new_cpu(xml: Xml, top: Node, numa: str) -> Node:
    return _attach(xml, top, "cpu", host_hash="0x1", numaid=numa)


def _attach(xml: Xml, parent: Node | None, tag: str, **attrs: str) -> Node:
    n = xml.add(parent, tag)
    n.attrs.update(attrs)
    return n


def fill_cpu(host: Host, cpu: Node) -> None:
    """xml.cc ncclTopoGetXmlFromCpu: affinity from the node's cpumap, then CPUID -- each only
    where unset (familyid and modelid together, keyed on familyid)."""
    if "affinity" not in cpu.attrs:
        mask = host.read(f"/sys/devices/system/node/node{cpu.attrs['numaid']}/cpumap")
        if mask:
            cpu.attrs["affinity"] = mask
    cpu.attrs.setdefault("arch", host.identity["arch"])
    if host.identity["arch"] == "x86_64":
        cpu.attrs.setdefault("vendor", host.identity["vendor"])
        if "familyid" not in cpu.attrs:
            cpu.attrs["familyid"] = host.identity["familyid"]
            cpu.attrs["modelid"] = host.identity["modelid"]


def rank_tree(host: Host, text: str | None, rank: int) -> Xml:
    """One rank's tree after topo.cc ncclTopoGetSystem, before fusion."""
    xml = parse(text) if text is not None else Xml()
    for cpu in [n for n in xml.nodes if n.name == "cpu"]:
        cpu.attrs["host_hash"] = "0x1"  # "Fixup the cpu's host_hashes": same host, same hash
    if xml.top is None:
        _attach(xml, None, "system", version="1")
    # ncclTopoFillGpu: the rank's own GPU only
    busid = host.gpus[rank]
    pci = xml.find("pci", "busid", busid) or _attach(xml, None, "pci", busid=busid)
    pci.attrs.setdefault("class", "0x03")
    fill_from_sys(xml, host, pci)
    gpu = pci.sub("gpu") or xml.add(pci, "gpu")
    gpu.attrs.setdefault("dev", str(rank))
    gpu.attrs.setdefault("sm", "90")
    gpu.attrs.update(keep="1", rank=str(rank))
    gpu.attrs.setdefault("gdr", "1")
    # ncclTopoPopulateNics: every device of the net plugin, by name
    for n, (name, nic_busid, speed) in enumerate(host.nets):
        net = xml.find("net", "name", name)
        if net is None:  # ncclTopoFillNet
            parent = xml.find("pci", "busid", nic_busid) or _attach(xml, None, "pci", busid=nic_busid)
            parent.attrs.setdefault("class", "0x02")
            fill_from_sys(xml, host, parent)
            nic = parent.sub("nic") or xml.add(parent, "nic")
            net = _attach(xml, nic, "net", name=name)
        net.attrs["keep"] = "1"
        net.attrs["dev"] = str(n)  # set, not init: NCCL renumbers a file's dev by its plugin
        for key, value in (("latency", "0"), ("speed", str(speed)), ("port", "1")):
            net.attrs.setdefault(key, value)
        net.attrs["guid"] = hex(0x1000 + n)
        for key, value in (("maxconn", "65536"), ("gdr", "1")):
            net.attrs.setdefault(key, value)
    _trim(xml, xml.top)
    return xml


def _trim(xml: Xml, node: Node) -> int:
    """xml.cc ncclTopoTrimXmlRec: drop pci/cpu/nic/net branches without a keep="1"."""
    if node.attrs.get("keep") == "1":
        del node.attrs["keep"]
        return 1
    keep = sum(_trim(xml, s) for s in list(node.subs))
    if keep == 0 and node.name in ("pci", "cpu", "nic", "net"):
        node.type = "removed"
        if node.parent is not None:
            node.parent.subs.remove(node)
    return keep


def fuse(trees: list[Xml]) -> Node:
    """topo.cc/xml.cc ncclTopoFuseXml over the ranks in order: a node merges into one with the same
    name, type and exactly the same attributes (xml.h xmlFindNode), else its subtree is added."""

    def rec(dst: Node, src: Node) -> None:
        for s in src.subs:
            match = next((d for d in dst.subs if d.name == s.name and d.type == s.type and d.attrs == s.attrs), None)
            if match is None:
                dst.subs.append(_copy(s, dst))
            else:
                rec(match, s)

    top = trees[0].top
    assert top is not None
    fused = _copy(top, None)
    for t in trees[1:]:
        assert t.top is not None
        rec(fused, t.top)
    return fused


def _copy(n: Node, parent: Node | None) -> Node:
    c = Node(n.name, dict(n.attrs), [], parent, n.type)
    c.subs = [_copy(s, c) for s in n.subs]
    return c


# ---------------------------------------------------------------- the system (topo.cc)
@dataclass(eq=False)
class Vertex:
    kind: str  # CPU PCI GPU NIC NET
    label: str
    device: int = 0  # PCI: vendor<<48 | device<<32 | subsystem_vendor<<16 | subsystem_device
    links: list[Vertex] = field(default_factory=list)


def _link(a: Vertex, b: Vertex) -> None:
    a.links.append(b)
    b.links.append(a)


#: topo.cc kvDictPciClass, matched as a prefix in order; the fallback is PCI.
PCI_CLASSES = (
    ("0x060400", "PCI"),
    ("0x080100", "PCI"),
    ("0x068000", "NVS"),
    ("0x068001", "CPU"),
    ("0x03", "GPU"),
    ("0x02", "NIC"),
)


def _int_device(pci: Node) -> int:
    """topo.cc ncclTopoGetIntDevice."""
    out = 0
    for key, shift in (("vendor", 48), ("device", 32), ("subsystem_vendor", 16), ("subsystem_device", 0)):
        if key in pci.attrs:
            out += int(pci.attrs[key], 0) << shift
    return out


def build_system(top: Node) -> list[Vertex]:
    """topo.cc ncclTopoGetSystemFromXml (CPUs, PCI, GPUs, NICs, NETs), then
    ncclTopoFlattenBcmSwitches.  Raises :class:`Refused` with NCCL's message."""
    verts: list[Vertex] = []

    def add(kind: str, label: str, device: int = 0) -> Vertex:
        v = Vertex(kind, label, device)
        verts.append(v)
        return v

    for cpu_el in (s for s in top.subs if s.name == "cpu"):
        # ncclTopoAddCpu
        numa = attr_int(cpu_el, "numaid")
        arch = attr(cpu_el, "arch")
        if arch.startswith("x86_64"):
            vendor = attr(cpu_el, "vendor")
            if vendor.startswith(("GenuineIntel", "CentaurHauls", "  Shanghai  ")):
                attr_int(cpu_el, "familyid"), attr_int(cpu_el, "modelid")
            # AMD: NCCL 2.30.7 reads nothing more; later releases read familyid (Zen generation).
        cpu = add("CPU", f"cpu{numa}")
        nics: dict[str, Vertex] = {}
        for s in cpu_el.subs:
            if s.name == "pci":
                _add_pci(s, cpu, add, nics, numa)
    _flatten_bcm(verts)
    return verts


def _add_pci(el: Node, parent: Vertex, add, nics: dict[str, Vertex], numa: int) -> None:
    """topo.cc ncclTopoAddPci."""
    cls = attr(el, "class")
    kind = next((k for prefix, k in PCI_CLASSES if cls.startswith(prefix)), "PCI")
    busid = attr(el, "busid")
    attr_int(el, "link_width"), attr(el, "link_speed")
    for g in (s for s in el.subs if s.name == "gpu"):
        if "rank" not in g.attrs:
            return  # a GPU no rank claimed: the whole function is skipped
        for key in ("rank", "sm", "dev", "gdr"):  # ncclTopoAddGpu
            attr_int(g, key)
        _link(add("GPU", busid), parent)
    nic_el = el.sub("nic")
    if nic_el is not None:
        key = f"{numa}/{busid}"
        nic = nics.get(key)
        if nic is None:
            nic = nics[key] = add("NIC", busid)
            _link(nic, parent)
        for net in nic_el.subs:  # ncclTopoAddNic: only <net> with a dev
            if net.name == "net" and "dev" in net.attrs:
                _link(add("NET", f"{net.attrs.get('name')}"), nic)
    elif kind == "PCI":
        node = add("PCI", busid, _int_device(el))
        for s in el.subs:
            if s.name != "pcilink":
                _add_pci(s, node, add, nics, numa)
        _link(node, parent)


def bcm_gen(device: int, level: int) -> int:
    """topo.cc getBcmGen: a Broadcom switch that presents two levels for one chip.  Gen4 (PEX88xxx,
    1000:c010) with subsystem 1000:axxx at either level; Gen5 (PEX890xx, 1000:c030) with subsystem
    device 0x0xxx on the upper level and 0x1xxx on the lower one."""
    if device & 0xFFFFFFFFFFFFF000 == 0x1000C0101000A000:
        return 4
    if device & 0xFFFFFFFFFFFFF000 == 0x1000C03010000000 | level * 0x1000:
        return 5
    return 0


def _flatten_bcm(verts: list[Vertex]) -> None:
    """topo.cc ncclTopoFlattenBcmSwitches: a PCI switch of a Broadcom generation absorbs its PCI
    children of the same generation (their links move up to it); it is then marked (subsystem
    device 0xffff) so it is not merged again."""
    again = True
    while again:
        again = False
        for sw in [v for v in verts if v.kind == "PCI"]:
            gen = bcm_gen(sw.device, 0)
            if not gen:
                continue
            for sub in [v for v in sw.links if v.kind == "PCI" and bcm_gen(v.device, 1) == gen]:
                sw.links.remove(sub)
                for rem in sub.links:
                    if rem is sw:
                        continue
                    sw.links.append(rem)
                    rem.links[rem.links.index(sub)] = sw
                verts.remove(sub)
            sw.device |= 0xFFFF
            again = True
            break


def path_type(gpu: Vertex, net: Vertex) -> str:
    """paths.cc: a path through two CPUs is SYS, through one PHB, across a PCI->PCI link PXB, else
    PIX (one switch, or none)."""
    prev: dict[int, Vertex | None] = {id(gpu): None}
    queue = [gpu]
    while queue:
        v = queue.pop(0)
        for w in v.links:
            if id(w) not in prev and not (w.kind == "CPU" and v.kind == "CPU"):
                prev[id(w)] = v
                queue.append(w)
    if id(net) not in prev:
        # different <cpu>: NCCL links every pair of CPUs (ncclTopoConnectCpus)
        return "SYS"
    hops: list[Vertex] = [net]
    while (p := prev[id(hops[-1])]) is not None:
        hops.append(p)
    if any(h.kind == "CPU" for h in hops):
        return "PHB"
    return "PXB" if any(a.kind == "PCI" and b.kind == "PCI" for a, b in pairwise(hops)) else "PIX"


@dataclass
class Verdict:
    """What NCCL built: CPU and NET counts, each rank's GPU->NET classes by net name, and the nets
    of the best class (where its local NET comes from)."""

    cpus: int
    nets: int
    paths: dict[str, dict[str, str]]

    def local(self, gpu: str) -> set[str]:
        order = ["PIX", "PXB", "PHB", "SYS"]
        best = min(order.index(t) for t in self.paths[gpu].values())
        return {n for n, t in self.paths[gpu].items() if order.index(t) == best}


def nccl(root: str, text: str | None, data_direct: int = 1) -> Verdict:
    """NCCL's system for every local rank of the host at ``root``: from ``text`` as NCCL_TOPO_FILE,
    or from sysfs alone when ``text`` is None; its IB plugin's list as ``NCCL_IB_DATA_DIRECT``
    makes it (:meth:`Host.of`)."""
    host = Host.of(root, data_direct)
    top = fuse([rank_tree(host, text, r) for r in range(len(host.gpus))])
    verts = build_system(top)
    nets = [v for v in verts if v.kind == "NET"]
    gpus = [v for v in verts if v.kind == "GPU"]
    paths: dict[str, dict[str, str]] = {}
    for g in gpus:
        per: dict[str, str] = {}
        for n in nets:
            t = path_type(g, n)
            # a NET that appears twice (fused duplicates) keeps its worst class: NCCL sees both
            per[n.label] = max(per.get(n.label, t), t, key=["PIX", "PXB", "PHB", "SYS"].index)
        paths[g.label] = per
    return Verdict(sum(v.kind == "CPU" for v in verts), len(nets), paths)
