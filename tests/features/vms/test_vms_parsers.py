"""Parsers for `topoagent vms`: libvirt domain XML, `esxcli hardware pci list`, .vmx files.

Real text shapes (tests/vms_samples, tests/fixtures/libvirt) and broken ones: every bad input
is one InputError with a clear message, never another exception.
"""

from __future__ import annotations

import pytest

from tests.paths import TESTS
from topoagent.core.errors import InputError
from topoagent.features.vms.domain import (
    DomainXmlError,
    canonical_xml,
    parse_domain,
    parse_libvirt_set,
    with_affinity,
)
from topoagent.features.vms.esxcli import EsxcliError, parse_esxcli_pci_list
from topoagent.features.vms.vmx import VmxError, parse_passthru_id, parse_vmx

HERE = TESTS
SAMPLES = HERE / "vms_samples"
QEMU = HERE / "fixtures" / "libvirt" / "qemu"


# -- libvirt domain XML ---------------------------------------------------------------------

KVM_DUMPXML = """<domain type='kvm' id='3' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>
  <name>train-0</name>
  <uuid>2b7e1d1a-0c8b-4b9a-9a57-3f0d6a1b2c3d</uuid>
  <memory unit='KiB'>134217728</memory>
  <currentMemory unit='KiB'>134217728</currentMemory>
  <vcpu placement='static' current='8'>16</vcpu>
  <iothreads>1</iothreads>
  <cputune>
    <vcpupin vcpu='0' cpuset='56'/>
    <vcpupin vcpu='1' cpuset='57'/>
    <emulatorpin cpuset='58-59'/>
    <iothreadpin iothread='1' cpuset='60'/>
  </cputune>
  <numatune>
    <memory mode='strict' nodeset='1-3,^2'/>
    <memnode cellid='0' mode='strict' nodeset='1'/>
  </numatune>
  <os><type arch='x86_64' machine='pc-q35-7.2'>hvm</type></os>
  <cpu mode='host-passthrough'>
    <numa>
      <cell id='0' cpus='0-15' memory='128' unit='GiB'/>
    </numa>
  </cpu>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <hostdev mode='subsystem' type='pci' managed='yes'>
      <driver name='vfio'/>
      <source>
        <address domain='0x0000' bus='0x9d' slot='0x00' function='0x0'/>
      </source>
      <alias name='hostdev0'/>
      <address type='pci' domain='0x0000' bus='0x06' slot='0x00' function='0x0'/>
    </hostdev>
    <interface type='hostdev' managed='yes'>
      <mac address='52:54:00:6d:90:02'/>
      <source>
        <address type='pci' domain='0x0000' bus='0x39' slot='0x00' function='0x2'/>
      </source>
    </interface>
    <hostdev mode='subsystem' type='usb' managed='yes'>
      <source><vendor id='0x0781'/><product id='0x5567'/></source>
    </hostdev>
  </devices>
  <qemu:commandline><qemu:arg value='-S'/></qemu:commandline>
</domain>
"""


def test_domain_from_a_kvm_dumpxml():
    d = parse_domain(KVM_DUMPXML)
    assert (d.name, d.type, d.vcpus, d.vcpus_current) == ("train-0", "kvm", 16, 8)
    assert d.memory_bytes == 128 << 30
    assert [(h.bdf, h.managed, h.via) for h in d.hostdevs] == [
        ("0000:9d:00.0", True, "hostdev"),
        ("0000:39:00.2", True, "interface"),
    ]  # the USB hostdev is not PCI
    assert (d.vcpu_placement, d.vcpu_cpuset) == ("static", None)
    assert (d.numatune_mode, d.numatune_nodeset) == ("strict", "1-3,^2")
    assert [(m.cellid, m.nodeset) for m in d.memnodes] == [(0, "1")]
    assert [(p.id, p.cpuset) for p in d.vcpupins] == [(0, "56"), (1, "57")]
    assert d.emulatorpin == "58-59" and [(p.id, p.cpuset) for p in d.iothreadpins] == [(1, "60")]
    assert [(c.id, c.cpus, c.memory_bytes) for c in d.cells] == [(0, "0-15", 128 << 30)]


@pytest.mark.parametrize("name", sorted(p.name for p in QEMU.glob("*.xml")))
def test_every_fixture_domain_parses(name):
    d = parse_domain((QEMU / name).read_text())
    assert d.name == name[:-4]


def test_libvirt_sets_and_addresses_read_as_libvirt_reads_them():
    assert str(parse_libvirt_set("0-7,^3,12")) == "0-2,4-7,12"
    # C's strtol(…, 0): 0x hex, a leading 0 octal, else decimal
    xml = KVM_DUMPXML.replace("bus='0x9d'", "bus='157'").replace(
        "slot='0x00' function='0x0'/>\n      </source>\n      <alias",
        "slot='010' function='0x0'/>\n      </source>\n      <alias",
    )
    assert parse_domain(xml).hostdevs[0].bdf == "0000:9d:08.0"


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "empty"),
        ("<domain><name>x</name>", "not well-formed"),
        ("<node/>", "not <domain>"),
        ("<domain type='kvm'/>", "no <name>"),
        (
            "<!DOCTYPE d [<!ENTITY e SYSTEM 'file:///etc/passwd'>]><domain><name>&e;</name></domain>",
            "DOCTYPE or ENTITY",
        ),
        ("<domain><name>x</name><vcpu cpuset='0-3,a'>2</vcpu></domain>", "bad <vcpu> cpuset"),
        ("<domain><name>x</name><vcpu>two</vcpu></domain>", "<vcpu> 'two' is not a number"),
        ("<domain><name>x</name><vcpu>1000000000000</vcpu></domain>", "<vcpu> '1000000000000' is out of range"),
        ("<domain><name>x</name><vcpu current='-2'>4</vcpu></domain>", "<vcpu current> '-2' is out of range"),
        ("<domain><name>x</name><memory unit='parsecs'>1</memory></domain>", "unknown unit"),
        (
            "<domain><name>x</name><devices><hostdev mode='subsystem' type='pci'/></devices></domain>",
            "no <source><address>",
        ),
        (
            (
                "<domain><name>x</name><devices><hostdev mode='subsystem' type='pci'><source><address bus='0x1'"
                " slot='0x40' function='0'/></source></hostdev></devices></domain>"
            ),
            "out of range",
        ),
        (
            (
                "<domain><name>x</name><devices><hostdev mode='subsystem' type='pci'><source><address bus='zz'"
                " slot='0' function='0'/></source></hostdev></devices></domain>"
            ),
            "is not a number",
        ),
        (  # past a 64-bit long: its decimal for the message was past int()'s 4,300 digits (issue 44)
            (
                "<domain><name>x</name><devices><hostdev mode='subsystem' type='pci'><source><address bus='0x1'"
                " slot='0' function='0x" + "9" * 5000 + "'/></source></hostdev></devices></domain>"
            ),
            "is not a number",
        ),
        (
            "<domain><name>x</name><numatune><memory mode='strict' nodeset='1-0'/></numatune></domain>",
            "bad <numatune> nodeset",
        ),
    ],
)
def test_broken_domains_are_one_clear_error(text, message):
    with pytest.raises(DomainXmlError, match=None) as err:
        parse_domain(text)
    assert message in str(err.value)
    assert isinstance(err.value, InputError)


def test_with_affinity_changes_only_the_affinity_elements():
    import xml.etree.ElementTree as ET

    new = with_affinity(KVM_DUMPXML, cpuset="56-111", mem_mode="strict", nodeset="1")
    d = parse_domain(new)
    assert (d.vcpu_placement, d.vcpu_cpuset, d.vcpus, d.vcpus_current) == ("static", "56-111", 16, 8)
    assert (d.numatune_mode, d.numatune_nodeset, d.memnodes) == ("strict", "1", ())
    assert d.vcpupins == parse_domain(KVM_DUMPXML).vcpupins  # no --pin: cputune untouched
    assert "qemu:commandline" in new  # namespace prefix kept

    def strip(text):
        root = ET.fromstring(text)
        root.find("vcpu").attrib.clear()
        root.remove(root.find("numatune"))
        return canonical_xml(ET.tostring(root, encoding="unicode"))

    assert strip(new) == strip(KVM_DUMPXML)


def test_with_affinity_pins_replace_vcpupin_and_emulatorpin_only():
    from topoagent.features.vms.domain import MemNode, Pin

    new = with_affinity(
        KVM_DUMPXML,
        cpuset="56-63",
        mem_mode="strict",
        nodeset="1",
        memnodes=(MemNode(0, "strict", "1"),),
        vcpupins=(Pin(0, "60"), Pin(1, "61")),
        emulatorpin="56-57",
    )
    d = parse_domain(new)
    assert [(p.id, p.cpuset) for p in d.vcpupins] == [(0, "60"), (1, "61")]
    assert d.emulatorpin == "56-57" and [(p.id, p.cpuset) for p in d.iothreadpins] == [(1, "60")]
    assert [(m.cellid, m.nodeset) for m in d.memnodes] == [(0, "1")]


# -- esxcli hardware pci list ---------------------------------------------------------------


def test_esxcli_sample():
    devs = parse_esxcli_pci_list((SAMPLES / "esxcli-hardware-pci-list-esxi7.txt").read_text())
    by = {d.bdf: d for d in devs}
    assert list(by) == ["0000:3b:00.0", "0000:86:00.0", "0000:af:00.0", "0000:d8:00.0", "0000:5e:00.0"]
    gpu = by["0000:3b:00.0"]
    assert (gpu.vendor_id, gpu.device_id, gpu.class_code, gpu.numa_node) == (0x10DE, 0x1DB6, 0x030200, 0)
    assert gpu.device_name == "GV100GL [Tesla V100 PCIe 32GB]" and gpu.passthru_capable is True
    assert by["0000:86:00.0"].numa_node == 1
    assert by["0000:d8:00.0"].numa_node is None  # "NUMA Node: -1"
    assert by["0000:5e:00.0"].numa_node is None  # no NUMA Node line (ESXi before 6.7)


ESXI5_BLOCK = """0000:04:00.0
   Address: 0000:04:00.0
   Segment: 0x0000
   Bus: 0x04
   Slot: 0x00
   Function: 0x0
   VMkernel Name: vmhba2
   Vendor Name: LSI Logic / Symbios Logic
   Device Name: SAS2308 PCI-Express Fusion-MPT SAS-2
   Configured Owner: VM Passthru
   Current Owner: VM Passthru
   Vendor ID: 0x1000
   Device ID: 0x0087
   Device Class: 0x0107
   Passthru Capable: true
"""


@pytest.mark.parametrize("variant", ["plain", "crlf", "lower", "unsigned-minus-one"])
def test_esxcli_shapes(variant):
    text = ESXI5_BLOCK
    if variant == "crlf":
        text = text.replace("\n", "\r\n")
    elif variant == "lower":  # some tools save it lower-cased
        text = text.lower()
    elif variant == "unsigned-minus-one":  # vsish's spelling of "no node"
        text = text + "   NUMA Node: 4294967295\n"
    (dev,) = parse_esxcli_pci_list(text)
    assert dev.bdf == "0000:04:00.0" and dev.numa_node is None and dev.vendor_id == 0x1000


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "no device blocks"),
        ("hello world\n", "not a PCI address"),
        ("   Address: 0000:04:00.0\n", "before any device address"),
        ("0000:04:00.0\n   Vendor ID: 0xzz\n", "Vendor ID '0xzz' is not a hex number"),
        ("0000:04:00.0\n   NUMA Node: one\n", "NUMA Node 'one' is not a number"),
        ("0000:04:00.0\n   Address: 0000:04:00.0\n\n0000:04:00.0\n   Address: 0000:04:00.0\n", "listed twice"),
    ],
)
def test_broken_esxcli(text, message):
    with pytest.raises(EsxcliError) as err:
        parse_esxcli_pci_list(text)
    assert message in str(err.value)


# -- .vmx -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "ident, bdfs, warned",
    [
        ("00000:059:00.0", ("0000:3b:00.0",), False),  # ESXi's own %05d:%03d:%02d.%d
        ("00000:013:00.0", ("0000:0d:00.0",), False),
        ("00000:002:00.1", ("0000:02:00.1",), False),
        ("0:66:0.0", ("0000:42:00.0",), False),  # short decimal
        ("0:134:0.0", ("0000:86:00.0",), False),
        ("00000:029:29.0", ("0000:1d:1d.0",), False),  # slot 0x1d is ":29", not ":1d"
        ("0000:3b:00.0", ("0000:3b:00.0",), True),  # Linux form: ESXi refuses it
        ("59:00.0", ("0000:3b:00.0", "0000:59:00.0"), True),  # no segment: both readings
        ("3b:00.0", ("0000:3b:00.0",), False),
    ],
)
def test_passthru_ids(ident, bdfs, warned):
    got, warning = parse_passthru_id(ident)
    assert got == bdfs and (warning is not None) == warned


@pytest.mark.parametrize("ident", ["", "gpu0", "00000:300:00.0", "0000:3b:00", "00000:059:40.0"])
def test_bad_passthru_ids(ident):
    with pytest.raises(VmxError):
        parse_passthru_id(ident)


def test_vmx_sample_with_crlf():
    raw = (SAMPLES / "ml-train-01.vmx").read_bytes()
    assert b"\r\n" in raw
    vmx = parse_vmx(raw.decode())
    assert (vmx.display_name, vmx.numvcpus, vmx.memory_bytes, vmx.node_affinity) == ("ml-train-01", 16, 128 << 30, "1")
    assert [(d.index, d.id, d.bdfs, d.vendor_id, d.device_id) for d in vmx.devices] == [
        (0, "00000:175:00.0", ("0000:af:00.0",), 0x10DE, 0x1DB6),
        (1, "00000:134:00.0", ("0000:86:00.0",), 0x15B3, 0x1017),
    ]


def test_vmx_keys_are_case_insensitive_and_absent_devices_skipped():
    vmx = parse_vmx(
        'displayname = "a"\nPCIPASSTHRU0.PRESENT = "true"\npcipassthru0.ID = "00000:059:00.0"\n'
        'pciPassthru1.present = "FALSE"\npciPassthru1.id = "00000:060:00.0"\n'
        'pciPassthru2.present = "TRUE"\n'
    )
    assert [(d.index, d.bdfs) for d in vmx.devices] == [(0, ("0000:3b:00.0",)), (2, ())]
    assert "chosen at power-on" in vmx.devices[1].warning  # no id: Dynamic DirectPath / vGPU


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "no settings"),
        ("# only a comment\n", "no settings"),
        ('displayName "x"\n', "line 1"),
        ('displayName = "x\n', "no closing quote"),
        ('pciPassthru0.present = "TRUE"\npciPassthru0.id = "gpu0"\n', "pciPassthru0.id"),
        ('numvcpus = "many"\n', "numvcpus"),
    ],
)
def test_broken_vmx(text, message):
    with pytest.raises(VmxError) as err:
        parse_vmx(text)
    assert message in str(err.value)


def test_vmx_passthru_keys_are_exact():
    """``pciPassthru00.id`` is not ``pciPassthru0.id``: before, it was merged into entry 0 and
    changed that device's verdict; an ambiguous number is refused."""
    text = (
        'displayName = "a"\npciPassthru0.present = "TRUE"\npciPassthru0.id = "00000:059:00.0"\n'
        'pciPassthru00.id = "00000:175:00.0"\n'
    )
    with pytest.raises(VmxError, match="pcipassthru00.id: a pciPassthru number with a leading zero"):
        parse_vmx(text)
    ok = parse_vmx(text.replace("pciPassthru00.id", "pciPassthru10.id"))
    assert [d.index for d in ok.devices] == [0] and ok.devices[0].id == "00000:059:00.0"
