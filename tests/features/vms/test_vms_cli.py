"""`topoagent vms` end to end, on real libvirt: virsh with libvirt's built-in test driver
(test:///…/dgx-h100-node.xml, no daemon) and the dgx-h100 fixture tree as the host.

CI needs the Debian packages libvirt-clients and libvirt0 (virsh and the library that holds the
test driver); without virsh the libvirt tests skip, the file-based and ESXi ones still run.
"""

from __future__ import annotations

import json
import os
import shutil

import jsonschema
import pytest
from click.testing import CliRunner

from tests.paths import TESTS
from topoagent.cli import cli
from topoagent.features.vms.domain import canonical_xml, parse_domain, parse_libvirt_set

HERE = TESTS
LIBVIRT = HERE / "fixtures" / "libvirt"
NODE = LIBVIRT / "dgx-h100-node.xml"
URI = f"test://{NODE.resolve()}"
SAMPLES = HERE / "vms_samples"
SCHEMA = json.loads((HERE.parent / "topoagent" / "schema" / "vms.schema.json").read_text())

needs_virsh = pytest.mark.skipif(shutil.which("virsh") is None, reason="virsh not installed (Debian: libvirt-clients)")


def run(*args: str):
    result = CliRunner().invoke(cli, ["vms", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def virsh(uri: str, *args: str) -> str:
    from topoagent.core.read.tools import run_tool

    out = run_tool(["virsh", "-q", "-c", uri, *args])
    assert out.ok, out.error
    return out.stdout


@pytest.fixture(scope="module")
def dgx(fixture_root):
    return str(fixture_root("dgx-h100"))


# -- report ---------------------------------------------------------------------------------


@needs_virsh
def test_report_over_the_test_driver(dgx):
    r = run("--root", dgx, "--connect", URI)
    assert r.exit_code == 0, r.output
    rows = {
        line.split()[0]: line for line in r.output.splitlines() if line.startswith("gpu-") and not line.endswith(":")
    }
    assert rows["gpu-aligned"].split()[-1] == "aligned" and "shut off" in rows["gpu-aligned"]
    assert rows["gpu-unset"].split()[-1] == "unset"
    assert rows["gpu-misaligned"].split()[-1] == "misaligned" and "running" in rows["gpu-misaligned"]
    assert rows["gpu-split"].split()[-1] == "split" and rows["gpu-lost"].split()[-1] == "unknown"
    assert "without PCI passthrough: plain" in r.output
    assert "<memory mode='strict' nodeset='0'/>" in r.output  # gpu-unset's recommendation


@needs_virsh
def test_json_report_keeps_the_published_shape(dgx):
    r = run("--root", dgx, "--connect", URI, "--format", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    jsonschema.validate(doc, SCHEMA)
    vms = {vm["name"]: vm for vm in doc["vms"]}
    assert vms["gpu-aligned"]["devices"] == [
        {
            "bdf": "0000:9d:00.0",
            "kind": "gpu",
            "numa_node": 1,
            "ref": "0000:9d:00.0",
            "name": "NVIDIA H100 SXM5 80GB",
            "rail_nics": ["0000:9a:00.0"],
            "note": None,
        },
        {
            "bdf": "0000:9a:00.0",
            "kind": "nic",
            "numa_node": 1,
            "ref": "0000:9a:00.0",
            "name": "Mellanox ConnectX-7",
            "rail_nics": [],
            "note": None,
        },
    ]
    assert vms["gpu-aligned"]["current"] == {
        "vcpu.placement": "static",
        "vcpu.cpuset": "56-111,168-223",
        "numatune.memory.mode": "strict",
        "numatune.memory.nodeset": "1",
    }
    assert vms["gpu-aligned"]["recommend"] == {}
    assert vms["gpu-unset"]["recommend"]["numatune.memory.nodeset"] == "0"
    assert vms["gpu-lost"]["devices"][0]["numa_node"] is None and vms["gpu-lost"]["recommend"] == {}
    assert doc["without_passthrough"] == ["plain"]


def test_report_from_the_config_files(scratch_root):
    """No virsh: <root>/etc/libvirt/qemu/*.xml, running from <root>/run/libvirt/qemu/NAME.pid."""
    root = scratch_root("dgx-h100")
    conf = root / "etc" / "libvirt" / "qemu"
    conf.mkdir(parents=True)
    for f in (LIBVIRT / "qemu").glob("*.xml"):
        shutil.copy(f, conf / f.name)
    (conf / "broken.xml").write_text("<domain><name>broken")
    rundir = root / "run" / "libvirt" / "qemu"
    rundir.mkdir(parents=True)
    (rundir / "gpu-misaligned.pid").write_text("4242\n")
    r = run("--root", str(root), "--format", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    jsonschema.validate(doc, SCHEMA)
    states = {vm["name"]: vm["state"] for vm in doc["vms"]}
    assert states["gpu-misaligned"] == "running" and states["gpu-unset"] == "shut off"
    assert doc["source"] == os.path.join(os.path.realpath(root), "etc/libvirt/qemu")  # the files read, not /etc
    assert any("broken.xml: not well-formed XML" in n for n in doc["notes"])  # one line, the rest reported


# -- apply / undo ---------------------------------------------------------------------------


def _changed_lines(diff: str) -> list[str]:
    return [line for line in diff.splitlines() if line[:1] in "+-" and not line.startswith(("+++", "---"))]


@needs_virsh
def test_apply_dry_run_shows_only_affinity_changes(dgx, tmp_path):
    r = run("--root", dgx, "--connect", URI, "--apply", "gpu-unset", "--state-dir", str(tmp_path))
    assert r.exit_code == 0, r.output
    changed = _changed_lines(r.output)
    assert changed == [
        '-  <vcpu placement="static">8</vcpu>',
        '+  <vcpu placement="static" cpuset="0-55,112-167">8</vcpu>',
        "+  <numatune>",
        '+    <memory mode="strict" nodeset="0" />',
        "+  </numatune>",
    ]
    assert "dry run: nothing changed" in r.output and not (tmp_path / "vms").exists()


@needs_virsh
def test_apply_refuses_a_running_domain(dgx, tmp_path):
    r = run("--root", dgx, "--connect", URI, "--apply", "gpu-misaligned", "--yes", "--state-dir", str(tmp_path))
    assert r.exit_code == 2
    assert r.output.count("\n") == 1 and "gpu-misaligned is running" in r.output
    assert not (tmp_path / "vms").exists()


@needs_virsh
@pytest.mark.parametrize(
    "name, why",
    [
        ("gpu-lost", "nothing to apply"),
        ("plain", "no PCI passthrough"),
        ("gpu-stale-pins", "rerun with --pin"),
        ("nosuch", "nosuch"),
    ],
)
def test_apply_refusals_are_one_line(dgx, tmp_path, name, why):
    r = run("--root", dgx, "--connect", URI, "--apply", name, "--state-dir", str(tmp_path))
    assert r.exit_code == 2 and r.output.count("\n") == 1 and why in r.output, r.output


@needs_virsh
def test_apply_yes_defines_exactly_the_affinity_and_undo_restores(dgx, tmp_path):
    import xml.etree.ElementTree as ET

    from topoagent.features.vms.libvirt import define_and_read_back

    state = tmp_path / "state"
    original = virsh(URI, "dumpxml", "--inactive", "gpu-stale-pins")
    r = run(
        "--root",
        dgx,
        "--connect",
        URI,
        "--apply",
        "gpu-stale-pins",
        "--pin",
        "--reserve-cores",
        "2",
        "--yes",
        "--state-dir",
        str(state),
    )
    assert r.exit_code == 0, r.output
    backup = state / "vms" / "gpu-stale-pins.xml"
    assert backup.read_text() == original and oct(backup.stat().st_mode & 0o777) == "0o600"
    assert "defined gpu-stale-pins" in r.output

    # What libvirt stores for the new definition: the test driver forgets between connections,
    # so it is defined and read back in one virsh session, as --apply itself does.
    from topoagent.core.api import scan
    from topoagent.features.vms.advice import host_from_scan
    from topoagent.features.vms.command import new_definition  # the function --apply uses
    from topoagent.features.vms.libvirt_advice import advise_domain

    result = scan(dgx, nvml="off")
    host = host_from_scan(result.topology, result.rails, source="dgx")
    vm = advise_domain(parse_domain(original), "shut off", host, pin=True, reserve_cores=2)
    new_file = tmp_path / "new.xml"
    new_file.write_text(new_definition(original, vm.affinity))
    stored = define_and_read_back(URI, str(new_file), "gpu-stale-pins")
    d = parse_domain(stored)
    assert (d.vcpu_cpuset, d.numatune_mode, d.numatune_nodeset) == ("58-111,170-223", "strict", "1")
    assert [(p.id, p.cpuset) for p in d.vcpupins] == [(0, "58"), (1, "59")] and d.emulatorpin == "56-57,168-169"
    assert '+    <vcpupin vcpu="0" cpuset="58" />' in r.output  # the diff --apply printed says the same

    def without_affinity(text):
        root = ET.fromstring(text)
        for attr in ("cpuset", "placement"):
            root.find("vcpu").attrib.pop(attr, None)
        root.remove(root.find("numatune"))
        tune = root.find("cputune")
        for el in tune.findall("vcpupin") + tune.findall("emulatorpin"):
            tune.remove(el)
        return canonical_xml(ET.tostring(root, encoding="unicode"))

    assert without_affinity(stored) == without_affinity(original)  # nothing else changed

    # Undo, against a node where the applied definition is what libvirt holds.
    node2 = tmp_path / "node2"
    shutil.copytree(LIBVIRT / "qemu", node2 / "qemu")
    (node2 / "qemu" / "gpu-stale-pins.xml").write_text(
        stored.replace(
            "<domain type='test'>", "<domain type='test' xmlns:test='http://libvirt.org/schemas/domain/test/1.0'>"
        ).replace("</domain>", "<test:runstate>5</test:runstate></domain>")
    )
    shutil.copy(NODE, node2 / NODE.name)
    uri2 = f"test://{(node2 / NODE.name).resolve()}"
    assert parse_domain(virsh(uri2, "dumpxml", "--inactive", "gpu-stale-pins")).numatune_nodeset == "1"
    r = run("--connect", uri2, "--undo", "gpu-stale-pins", "--state-dir", str(state))
    assert r.exit_code == 0, r.output
    assert "restored gpu-stale-pins" in r.output and not backup.exists()
    again = run("--connect", uri2, "--undo", "gpu-stale-pins", "--state-dir", str(state))
    assert again.exit_code == 2 and "no backup of gpu-stale-pins" in again.output


@needs_virsh
def test_split_vm_without_pin_confines_each_cells_vcpus_to_its_node(dgx, tmp_path):
    """A split VM's cells: memory bound per cell (memnode) and each cell's vCPUs pinned to that
    cell's host node -- the domain-wide <vcpu cpuset> alone spans both nodes.  libvirt accepts
    the definition (test driver), and virt-xml-validate where it is installed."""
    from topoagent.core.api import scan
    from topoagent.core.read.tools import run_tool
    from topoagent.features.vms.advice import host_from_scan
    from topoagent.features.vms.command import new_definition
    from topoagent.features.vms.libvirt import define_and_read_back
    from topoagent.features.vms.libvirt_advice import advise_domain

    original = virsh(URI, "dumpxml", "--inactive", "gpu-split")
    result = scan(dgx, nvml="off")
    host = host_from_scan(result.topology, result.rails, source="dgx")
    vm = advise_domain(parse_domain(original), "shut off", host)
    new_file = tmp_path / "new.xml"
    new_file.write_text(new_definition(original, vm.affinity))
    d = parse_domain(define_and_read_back(URI, str(new_file), "gpu-split"))
    node0, node1 = "0-55,112-167", "56-111,168-223"
    cells = {c.id: parse_libvirt_set(c.cpus) for c in d.cells}
    pins = {p.id: p.cpuset for p in d.vcpupins}
    assert sorted(pins) == list(range(16))
    assert all(pins[v] == node0 for v in cells[0]) and all(pins[v] == node1 for v in cells[1])
    assert [(m.cellid, m.nodeset) for m in d.memnodes] == [(0, "0"), (1, "1")]
    assert d.emulatorpin is None  # not asked for (--pin): the emulator may run on either node
    r = run("--root", dgx, "--connect", URI, "--apply", "gpu-split", "--state-dir", str(tmp_path / "st"))
    assert r.exit_code == 0 and '+    <vcpupin vcpu="8" cpuset="56-111,168-223" />' in r.output, r.output
    if shutil.which("virt-xml-validate") and shutil.which("xmllint"):  # xmllint: libxml2-utils
        out = run_tool(["virt-xml-validate", str(new_file), "domain"])
        assert out.ok, out.stdout + (out.error or "")


@needs_virsh
def test_undo_restores_the_original_definition_semantically(tmp_path):
    """The backup defined again reads back as the original (via libvirt's dumpxml)."""
    from topoagent.features.vms.backup import save_backup
    from topoagent.features.vms.libvirt import define_and_read_back

    original = virsh(URI, "dumpxml", "--inactive", "gpu-unset")
    path, written = save_backup(str(tmp_path), "gpu-unset", original)
    assert written and save_backup(str(tmp_path), "gpu-unset", "<domain/>") == (path, False)  # never overwritten
    assert canonical_xml(define_and_read_back(URI, path, "gpu-unset")) == canonical_xml(original)


# -- VMware ---------------------------------------------------------------------------------

ESXCLI = str(SAMPLES / "esxcli-hardware-pci-list-esxi7.txt")
VMXS = [str(SAMPLES / f"{n}.vmx") for n in ("ml-train-01", "ml-infer-02", "ml-dev-03", "ml-wide-04", "ml-t4-05")]


def test_esxi_table_and_json():
    args = ["--esxcli-pci", ESXCLI] + [a for v in VMXS for a in ("--vmx", v)]
    r = run(*args)
    assert r.exit_code == 0, r.output
    assert "00000:175:00.0 (0000:af:00.0)" in r.output and 'numa.nodeAffinity = "0"' in r.output
    doc = json.loads(run(*args, "--format", "json").output)
    jsonschema.validate(doc, SCHEMA)
    got = {vm["name"]: (vm["verdict"], vm["recommend"]) for vm in doc["vms"]}
    assert got == {
        "ml-train-01": ("aligned", {}),
        "ml-infer-02": ("unset", {"numa.nodeAffinity": "0"}),
        "ml-dev-03": ("misaligned", {"numa.nodeAffinity": "1", "sched.mem.affinity": "1"}),
        "ml-wide-04": ("split", {"numa.nodeAffinity": "0,1"}),
        "ml-t4-05": ("unknown", {}),
    }


@pytest.mark.parametrize(
    "args, message",
    [
        (["--vmx", VMXS[0]], "needs both --esxcli-pci"),
        (["--esxcli-pci", ESXCLI], "needs both --esxcli-pci"),
        (["--esxcli-pci", ESXCLI, "--vmx", VMXS[0], "--apply", "x"], "are for libvirt"),
        (["--esxcli-pci", "/nonexistent", "--vmx", VMXS[0]], "--esxcli-pci /nonexistent"),
        (["--esxcli-pci", VMXS[0], "--vmx", VMXS[0]], "not a PCI address"),
        (["--esxcli-pci", ESXCLI, "--vmx", ESXCLI], 'is not a `key = "value"` setting'),
        (["--yes"], "--yes goes with --apply"),
        (["--apply", "a", "--undo", "a"], "cannot be combined"),
    ],
)
def test_bad_invocations_are_one_line(args, message):
    r = run(*args)
    assert r.exit_code == 2 and message in r.output and r.output.count("\n") == 1, r.output


def test_esxi_id_matching_no_device_and_crlf(tmp_path):
    vmx = tmp_path / "odd.vmx"
    vmx.write_bytes(b'displayName = "odd"\r\npciPassthru0.present = "TRUE"\r\npciPassthru0.id = "00000:100:00.0"\r\n')
    doc = json.loads(run("--esxcli-pci", ESXCLI, "--vmx", str(vmx), "--format", "json").output)
    (vm,) = doc["vms"]
    assert vm["verdict"] == "unknown" and "matches no device" in vm["devices"][0]["note"]
