"""Verdicts and recommendations for VMs with passthrough devices (pure: no virsh, no files)."""

from __future__ import annotations

import pytest

from topoagent.core.cpuset import CpuSet
from topoagent.core.frozen import FrozenMap
from topoagent.core.pci import DeviceKind
from topoagent.features.vms import libvirt_xml as vms_libvirt
from topoagent.features.vms.advice import (
    HostDevice,
    HostView,
    Verdict,
    VmsError,
    host_from_scan,
    node_cpus_for_vms,
)
from topoagent.features.vms.domain import parse_domain
from topoagent.features.vms.libvirt_advice import advise_domain
from topoagent.features.vms.vmware_advice import advise_vmx
from topoagent.features.vms.vmx import parse_vmx

#: Two nodes of 4 cores x 2 threads: node 0 = 0-3,8-11, node 1 = 4-7,12-15.
HOST = HostView(
    source="test host",
    devices=FrozenMap(
        {
            "0000:1b:00.0": HostDevice("0000:1b:00.0", DeviceKind.GPU, 0, "H100", 0x10DE, 0x2330, ("0000:18:00.0",)),
            "0000:18:00.0": HostDevice("0000:18:00.0", DeviceKind.NIC, 0, "ConnectX-7", 0x15B3, 0x1021),
            "0000:9d:00.0": HostDevice("0000:9d:00.0", DeviceKind.GPU, 1, "H100", 0x10DE, 0x2330),
            "0000:c1:00.0": HostDevice("0000:c1:00.0", DeviceKind.NIC, None, "ConnectX-7", 0x15B3, 0x1021),
        }
    ),
    node_cpus=FrozenMap({0: CpuSet.parse("0-3,8-11"), 1: CpuSet.parse("4-7,12-15")}),
    node_memory=FrozenMap({0: 64 << 30, 1: 64 << 30}),
    cores=tuple(CpuSet((c, c + 8)) for c in range(8)),
)


def domain(*bdfs: str, extra: str = "", vcpus: int = 4, memory_gib: int = 16, cells: str = "") -> str:
    devs = "".join(
        f"<hostdev mode='subsystem' type='pci' managed='yes'><source><address domain='0x0000' "
        f"bus='0x{b[5:7]}' slot='0x{b[8:10]}' function='0x{b[11]}'/></source></hostdev>"
        for b in bdfs
    )
    return (
        f"<domain type='kvm'><name>vm</name><memory unit='GiB'>{memory_gib}</memory>"
        f"<vcpu placement='static'{extra}>{vcpus}</vcpu>{cells}<devices>{devs}</devices></domain>"
    )


def advise(xml: str, **kw):
    return advise_domain(parse_domain(xml), "shut off", HOST, xml=vms_libvirt, **kw)


def test_the_advice_decides_and_the_renderer_writes_the_xml():
    """advice/ never imports outputs/: the XML comes from the renderer the caller passes."""
    dom = parse_domain(domain("0000:1b:00.0"))
    bare = advise_domain(dom, "shut off", HOST)
    vm = advise_domain(dom, "shut off", HOST, xml=vms_libvirt)
    assert bare.snippet == "" and vm.snippet == vms_libvirt.affinity_xml(dom, vm.affinity)
    assert (bare.verdict, bare.recommend, bare.affinity) == (vm.verdict, vm.recommend, vm.affinity)
    assert vm.snippet.startswith("<vcpu placement='static' cpuset='0-3,8-11'>4</vcpu>")


def test_no_passthrough_no_advice():
    assert advise(domain()) is None


def test_unset_recommends_node_cpus_and_strict_memory():
    vm = advise(domain("0000:1b:00.0"))
    assert vm.verdict is Verdict.UNSET
    assert dict(vm.recommend) == {
        "vcpu.placement": "static",
        "vcpu.cpuset": "0-3,8-11",
        "numatune.memory.mode": "strict",
        "numatune.memory.nodeset": "0",
    }
    assert "<memory mode='strict' nodeset='0'/>" in vm.snippet and "vcpupin" not in vm.snippet
    assert vm.devices[0].rail_nics == ("0000:18:00.0",)


def test_aligned_needs_nothing():
    xml = domain("0000:9d:00.0", extra=" cpuset='4-7,12-15'").replace(
        "<devices>", "<numatune><memory mode='strict' nodeset='1'/></numatune><devices>"
    )
    vm = advise(xml)
    assert vm.verdict is Verdict.ALIGNED and not vm.recommend and vm.affinity is None


def test_half_set_is_unset_and_the_other_node_is_misaligned():
    only_cpus = advise(domain("0000:9d:00.0", extra=" cpuset='4-7'"))
    assert only_cpus.verdict is Verdict.UNSET and "memory is not bound to a node" in only_cpus.notes
    wrong = advise(domain("0000:9d:00.0", extra=" cpuset='0-3'"))
    assert wrong.verdict is Verdict.MISALIGNED and any("outside node 1" in n for n in wrong.notes)
    auto = advise(domain("0000:9d:00.0").replace("placement='static'", "placement='auto'"))
    assert auto.verdict is Verdict.UNSET and "auto" in auto.notes[0]


def test_reserve_cores_keeps_whole_cores_for_the_host():
    assert node_cpus_for_vms(HOST, 0, 1) == (CpuSet.parse("1-3,9-11"), CpuSet.parse("0,8"))
    vm = advise(domain("0000:1b:00.0"), reserve_cores=2)
    assert vm.recommend["vcpu.cpuset"] == "2-3,10-11"
    with pytest.raises(VmsError, match="leaves node 0 no CPU"):
        node_cpus_for_vms(HOST, 0, 4)


def test_pin_one_thread_per_core_first_and_emulator_on_reserved_cores():
    vm = advise(domain("0000:9d:00.0", vcpus=4), pin=True, reserve_cores=1)
    pins = {k: v for k, v in vm.recommend.items() if k.startswith("cputune.vcpupin.")}
    assert pins == {
        "cputune.vcpupin.0": "5",
        "cputune.vcpupin.1": "6",
        "cputune.vcpupin.2": "7",
        "cputune.vcpupin.3": "13",
    }
    assert vm.recommend["cputune.emulatorpin"] == "4,12"


def test_memory_larger_than_the_node_is_preferred_not_strict():
    vm = advise(domain("0000:1b:00.0", memory_gib=100))
    assert vm.recommend["numatune.memory.mode"] == "preferred"
    assert any("exceed node 0" in n for n in vm.notes)


def test_unknown_node_recommends_nothing_never_node_0():
    for bdfs in (("0000:c1:00.0",), ("0000:1b:00.0", "0000:77:00.0")):
        vm = advise(domain(*bdfs))
        assert vm.verdict is Verdict.UNKNOWN and not vm.recommend and not vm.snippet and vm.affinity is None
    lost = advise(domain("0000:77:00.0"))
    assert lost.devices[0].numa_node is None and "no such device on this host" in lost.notes[0]


def test_split_with_matching_guest_cells_gets_memnodes():
    cells = (
        "<cpu><numa><cell id='0' cpus='0-1' memory='8' unit='GiB'/>"
        "<cell id='1' cpus='2-3' memory='8' unit='GiB'/></numa></cpu>"
    )
    vm = advise(domain("0000:1b:00.0", "0000:9d:00.0", cells=cells))
    assert vm.verdict is Verdict.SPLIT and vm.affinity is not None
    assert vm.recommend["numatune.memnode.0"] == "strict:0" and vm.recommend["numatune.memnode.1"] == "strict:1"
    assert "2+2 vCPUs" in vm.notes[0] and "fit" in vm.notes[0]


def test_split_without_cells_says_which_split_fits_or_that_none_does():
    vm = advise(domain("0000:1b:00.0", "0000:9d:00.0", vcpus=6))
    assert vm.verdict is Verdict.SPLIT and vm.affinity is None
    assert vm.recommend["cpu.numa.cells"] == "3+3" and "<cell id='1' cpus='3-5'" in vm.snippet
    too_small = advise(domain("0000:1b:00.0", "0000:9d:00.0", vcpus=1))
    assert not too_small.recommend and "cannot span 2 nodes" in too_small.notes[0]
    too_big = advise(domain("0000:1b:00.0", "0000:9d:00.0", vcpus=20))
    assert "does not fit" in too_big.notes[0]


# -- VMware ---------------------------------------------------------------------------------


def vmx(*ids: str, extra: str = "") -> str:
    lines = ['displayName = "esx-vm"', 'numvcpus = "8"', 'memSize = "16384"']
    for i, ident in enumerate(ids):
        lines += [f'pciPassthru{i}.present = "TRUE"', f'pciPassthru{i}.id = "{ident}"']
    return "\n".join(lines) + "\n" + extra


def vmware(text: str):
    return advise_vmx(parse_vmx(text), HOST, name="esx-vm")


def test_vmware_verdicts():
    assert vmware(vmx("00000:157:00.0", extra='numa.nodeAffinity = "1"\n')).verdict is Verdict.ALIGNED
    unset = vmware(vmx("00000:157:00.0"))
    assert unset.verdict is Verdict.UNSET and dict(unset.recommend) == {"numa.nodeAffinity": "1"}
    assert unset.snippet == 'numa.nodeAffinity = "1"' and any("powered off" in n for n in unset.notes)
    wrong = vmware(vmx("00000:157:00.0", extra='numa.nodeAffinity = "0"\n'))
    assert wrong.verdict is Verdict.MISALIGNED and wrong.recommend["numa.nodeAffinity"] == "1"
    split = vmware(vmx("00000:027:00.0", "00000:157:00.0"))
    assert split.verdict is Verdict.SPLIT and "4+4" in split.notes[0]


def test_vmware_id_matching_no_host_device_is_unknown():
    vm = vmware(vmx("00000:100:00.0"))
    assert vm.verdict is Verdict.UNKNOWN and not vm.recommend
    assert "matches no device in the host list" in vm.devices[0].note


def test_vmware_ambiguous_id_resolved_by_the_host_list():
    vm = vmware(vmx("27:00.0"))  # decimal 27 = 0x1b exists; hex 0x27 does not
    assert vm.devices[0].bdf == "0000:1b:00.0" and vm.verdict is Verdict.UNSET


def test_host_from_a_fixture_scan(fixture_root):
    from topoagent.core.api import scan

    result = scan(fixture_root("dgx-h100"), nvml="off")
    host = host_from_scan(result.topology, result.rails, source="dgx")
    gpu = host.devices["0000:9d:00.0"]
    assert (gpu.kind, gpu.numa_node, gpu.rail_nics) == (DeviceKind.GPU, 1, ("0000:9a:00.0",))
    assert str(host.node_cpus[1]) == "56-111,168-223"
    assert CpuSet((56, 168)) in host.cores  # whole cores, from thread_siblings_list


@pytest.mark.parametrize(
    ("memory", "cells", "want"),
    [
        (16 << 30, 2, (8 << 20, 8 << 20)),
        ((16 << 30) + 1024, 2, (8 << 20, (8 << 20) + 1)),  # the odd KiB goes to the last cell
        (10 << 20, 3, (3413, 3413, 3414)),
        (1 << 20, 1, (1024,)),
        (None, 2, ()),
        (0, 2, ()),
    ],
)
def test_cell_memory_sums_to_the_domain_memory(memory, cells, want):
    kib = vms_libvirt.cell_memory_kib(memory, cells)
    assert kib == want and (not kib or sum(kib) == memory // 1024)


def test_split_cells_add_up_to_the_domains_memory_and_validate(tmp_path):
    """QEMU refuses NUMA nodes whose memory does not add up to the guest's RAM: the cells the
    advice writes sum exactly to <memory> (16 GiB + 1 KiB over two nodes), and the domain with
    them is valid libvirt XML (virt-xml-validate where installed)."""
    import re
    import shutil

    xml = domain("0000:1b:00.0", "0000:9d:00.0", vcpus=6).replace(
        "<memory unit='GiB'>16</memory>", "<memory unit='KiB'>16777217</memory>"
    )
    vm = advise(xml)
    cells = [int(m) for m in re.findall(r"<cell id='\d+' cpus='[^']*' memory='(\d+)' unit='KiB'/>", vm.snippet)]
    assert len(cells) == 2 and sum(cells) == 16777217, vm.snippet
    if shutil.which("virt-xml-validate") and shutil.which("xmllint"):
        from topoagent.core.read.tools import run_tool

        path = tmp_path / "split.xml"
        path.write_text(
            "<domain type='kvm'><name>vm</name><memory unit='KiB'>16777217</memory>"
            f"<vcpu placement='static'>6</vcpu><os><type>hvm</type></os>{vm.snippet}</domain>"
        )
        out = run_tool(["virt-xml-validate", str(path), "domain"])
        assert out.ok, out.stdout + (out.error or "")


def test_vms_json_kind_is_the_device_kind_enum():
    # one enum from the host model to the contract: the schema names DeviceKind, and every kind
    # the advice gives (a host device's, or "other" for a device the host does not have) decodes
    import json

    import msgspec

    from topoagent.features.vms import report as vms_json
    from topoagent.features.vms.advice import VmReport
    from topoagent.schema import HERE

    schema = json.loads((HERE / "vms.schema.json").read_text())
    assert schema["$defs"]["DeviceKind"]["enum"] == sorted(k.value for k in DeviceKind)
    vms = (advise(domain("0000:1b:00.0", "0000:18:00.0")), advise(domain("0000:77:00.0")))
    text = vms_json.render(vms=VmReport("test", "host", vms))
    back = msgspec.json.decode(text, type=vms_json.VmsReport)
    kinds = [d.kind for vm in back.vms for d in vm.devices]
    assert kinds == [DeviceKind.GPU, DeviceKind.NIC, DeviceKind.OTHER]
