"""``topoagent vms``: NUMA affinity of VMs with PCI passthrough GPUs and NICs.

KVM: the host is scanned (``--root`` and the other scan inputs apply) and each libvirt domain's
definition is read (``--connect URI`` or, on the live host, ``qemu:///system``; otherwise the
files under ``<root>/etc/libvirt/qemu``).  VMware: ``--esxcli-pci FILE --vmx FILE…`` reads saved
``esxcli hardware pci list`` output and .vmx files instead; no scan.

``--apply DOMAIN`` shows the XML diff that would set the domain's affinity (only on a shut-off
domain); with ``--yes`` it backs the definition up into ``<state-dir>/vms/DOMAIN.xml``, defines
the new one and reads it back; ``--undo DOMAIN`` defines the backup again.
"""

from __future__ import annotations

import difflib
import os
import sys
from typing import TYPE_CHECKING

import click

from topoagent.core.command.common import EXIT_OK, deliver, emit, fail, output_option, pretty_option
from topoagent.core.command.options import run_scan, scan_inputs
from topoagent.core.cpuset import CpuSet
from topoagent.core.errors import TopoagentError
from topoagent.core.inputs import Inputs
from topoagent.core.read.textinput import read_text_input
from topoagent.core.tree import root_name
from topoagent.core.write.files import DEFAULT_STATE_DIR
from topoagent.features.vms import FORMATS
from topoagent.features.vms import libvirt_xml as vms_libvirt
from topoagent.features.vms.advice import Verdict, VmReport, VmsError, host_from_esxcli, host_from_scan
from topoagent.features.vms.backup import (
    BackupError,
    backup_path,
    discard_staged,
    load_backup,
    remove_backup,
    save_backup,
    stage_definition,
)
from topoagent.features.vms.domain import (
    DomainXmlError,
    MemNode,
    Pin,
    canonical_xml,
    parse_domain,
    parse_libvirt_set,
    with_affinity,
)
from topoagent.features.vms.esxcli import parse_esxcli_pci_list
from topoagent.features.vms.libvirt import (
    DEFAULT_URI,
    LibvirtError,
    define_and_read_back,
    domain_state,
    dumpxml,
    read_domains,
    virsh_available,
)
from topoagent.features.vms.libvirt_advice import advise_domain, pins_outside
from topoagent.features.vms.vmware_advice import advise_vmx
from topoagent.features.vms.vmx import parse_vmx

if TYPE_CHECKING:
    from topoagent.features.vms.advice import Affinity, HostView
    from topoagent.features.vms.domain import Domain


@click.command()
@scan_inputs(cross_check=False)
@click.option(
    "--connect",
    "uri",
    metavar="URI",
    help="libvirt connection (virsh -c URI). Default: qemu:///system on the live host when virsh "
    "answers, else the files under <root>/etc/libvirt/qemu.",
)
@click.option(
    "--format", "fmt", type=click.Choice(tuple(FORMATS)), default="text", show_default=True, help="Output format."
)
@pretty_option
@output_option()
@click.option(
    "--pin",
    is_flag=True,
    help="Also recommend per-vCPU pinning (vcpupin, emulatorpin). Off by default: "
    "NUMA affinity leaves the host free to balance inside the node.",
)
@click.option(
    "--reserve-cores",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    metavar="N",
    help="Keep the first N cores of each node for the host: VMs get the rest.",
)
@click.option(
    "--esxcli-pci",
    "esxcli_file",
    metavar="FILE",
    help="VMware: saved `esxcli hardware pci list` output of the ESXi host (- for stdin).",
)
@click.option("--vmx", "vmx_files", multiple=True, metavar="FILE", help="VMware: a VM's .vmx file (repeatable).")
@click.option(
    "--apply",
    "apply_domain",
    metavar="DOMAIN",
    help="Show the XML diff that sets DOMAIN's affinity (a shut-off libvirt domain); --yes defines it.",
)
@click.option("--yes", is_flag=True, help="With --apply: back up the definition and define the new one.")
@click.option("--undo", "undo_domain", metavar="DOMAIN", help="Define DOMAIN's backed-up definition again.")
@click.option(
    "--state-dir",
    default=DEFAULT_STATE_DIR,
    show_default=True,
    metavar="DIR",
    help="Where --apply keeps backups (DIR/vms/DOMAIN.xml).",
)
def vms(
    inputs: Inputs,
    uri: str | None,
    fmt: str,
    pretty: bool,
    output: str | None,
    pin: bool,
    reserve_cores: int,
    esxcli_file: str | None,
    vmx_files: tuple[str, ...],
    apply_domain: str | None,
    yes: bool,
    undo_domain: str | None,
    state_dir: str,
) -> None:
    """Report VMs with PCI passthrough devices, their NUMA affinity and what to set.

    Verdicts: aligned, unset, misaligned, split (devices on several nodes), unknown (a
    device's node is unknown: nothing is recommended). Exit status: 0 the report was made,
    2 it could not be (bad input, virsh failing, a refused --apply).
    """
    esxi = esxcli_file is not None or bool(vmx_files)
    if yes and not apply_domain:
        fail("--yes goes with --apply DOMAIN")
    if apply_domain and undo_domain:
        fail("--apply and --undo cannot be combined")
    if esxi:
        if apply_domain or undo_domain or uri:
            fail("--apply, --undo and --connect are for libvirt; for ESXi add the line to the powered-off VM")
        if esxcli_file is None or not vmx_files:
            fail("VMware mode needs both --esxcli-pci FILE and at least one --vmx FILE")
        report = _esxi_report(esxcli_file, vmx_files)
    elif undo_domain:
        _undo(undo_domain, uri, state_dir)
        return
    elif apply_domain:
        _apply(inputs, apply_domain, uri, yes=yes, pin=pin, reserve_cores=reserve_cores, state_dir=state_dir)
        return
    else:
        report = _kvm_report(inputs, uri, pin=pin, reserve_cores=reserve_cores)
    deliver(FORMATS[fmt](None, vms=report, pretty=pretty), output)
    sys.exit(EXIT_OK)


# -- VMware ---------------------------------------------------------------------------------


def _esxi_report(esxcli_file: str, vmx_files: tuple[str, ...]) -> VmReport:
    if sum(1 for name in (esxcli_file, *vmx_files) if name == "-") > 1:
        fail("only one of --esxcli-pci and --vmx can read stdin (-)")
    try:
        devices = parse_esxcli_pci_list(read_text_input(esxcli_file))
    except TopoagentError as exc:
        fail(f"--esxcli-pci {esxcli_file}: {exc}")
    host = host_from_esxcli(devices, source=f"esxcli hardware pci list ({esxcli_file})")
    advice, without = [], []
    for path in vmx_files:
        try:
            vmx = parse_vmx(read_text_input(path))
            name = vmx.display_name or os.path.splitext(os.path.basename(path))[0]
            vm = advise_vmx(vmx, host, name=name)
        except TopoagentError as exc:
            fail(f"--vmx {path}: {exc}")
        if vm is None:
            without.append(name)
        else:
            advice.append(vm)
    notes = ("state: a .vmx does not say whether the VM is powered on; change it only powered off",)
    return VmReport(
        f"{len(vmx_files)} .vmx file{'s' if len(vmx_files) != 1 else ''}",
        host.source,
        tuple(advice),
        tuple(without),
        notes if advice else (),
    )


# -- libvirt --------------------------------------------------------------------------------


def _host(inputs: Inputs) -> HostView:
    result = run_scan(inputs)
    origins = inputs.origins or {}
    where = ", ".join(origins.values()) if origins else f"scan of {root_name(inputs.root)}"
    return host_from_scan(result.topology, result.rails, source=where)


def _kvm_report(inputs: Inputs, uri: str | None, *, pin: bool, reserve_cores: int) -> VmReport:
    host = _host(inputs)
    try:
        read = read_domains(root=inputs.root, uri=uri)
    except LibvirtError as exc:
        fail(str(exc))
    notes = list(read.errors)
    advice, without = [], []
    for rec in sorted(read.domains, key=lambda r: r.name):
        try:
            vm = advise_domain(
                parse_domain(rec.xml), rec.state, host, pin=pin, reserve_cores=reserve_cores, xml=vms_libvirt
            )
        except DomainXmlError as exc:
            notes.append(f"{rec.origin}: {exc}")
            continue
        except VmsError as exc:
            fail(str(exc))
        if vm is None:
            without.append(rec.name)
        else:
            advice.append(vm)
    if not read.domains and not notes:
        notes.append(f"no libvirt domains found ({read.source})")
    return VmReport(read.source, host.source, tuple(advice), tuple(without), tuple(notes))


def _virsh_uri(uri: str | None) -> str:
    if not virsh_available():
        fail("--apply and --undo run virsh (Debian package libvirt-clients), which is not installed")
    return uri or DEFAULT_URI


def _require_shut_off(uri: str, name: str) -> None:
    try:
        state = domain_state(uri, name)
    except LibvirtError as exc:
        fail(str(exc))
    if state != "shut off":
        fail(
            f"{name} is {state}: its affinity is changed only while it is shut off "
            f"(virsh -c {uri} shutdown {name}, then run this again)"
        )


def _stale_pins(dom: Domain, aff: Affinity, host: HostView) -> list[str]:
    """Existing pins outside the target nodes' CPUs that --apply would leave in place."""
    allowed = CpuSet().union(*(host.node_cpus.get(n, CpuSet()) for n in aff.nodes))
    stale = pins_outside(dom, allowed)
    if aff.vcpupins is not None:  # --pin (or a split VM's cell pins) replaces every vcpupin
        stale = [s for s in stale if not s.startswith("vcpupin")]
    if aff.emulatorpin is not None:  # --pin replaces emulatorpin; iothreadpins stay as they are
        stale = [s for s in stale if not s.startswith("emulatorpin")]
    return stale


def new_definition(xml: str, aff: Affinity) -> str:
    """The definition with the affinity of a recommendation written in (what --apply defines)."""
    return with_affinity(
        xml,
        cpuset=str(aff.cpuset),
        mem_mode=aff.mem_mode,
        nodeset=aff.nodeset,
        memnodes=tuple(MemNode(c, "strict", str(n)) for c, n in aff.memnodes),
        vcpupins=None if aff.vcpupins is None else tuple(Pin(v, str(c)) for v, c in aff.vcpupins),
        emulatorpin=None if aff.emulatorpin is None or aff.vcpupins is None else str(aff.emulatorpin),
    )


def _affinity_of(dom: Domain) -> tuple[object, ...]:
    """The parts of a definition --apply changes, in a comparable form."""

    def s(text: str | None) -> str | None:
        return None if text is None else str(parse_libvirt_set(text))

    return (
        dom.vcpu_placement,
        s(dom.vcpu_cpuset),
        dom.numatune_mode,
        s(dom.numatune_nodeset),
        dom.numatune_placement,
        tuple((m.cellid, m.mode, s(m.nodeset)) for m in dom.memnodes),
        tuple((p.id, s(p.cpuset)) for p in dom.vcpupins),
        s(dom.emulatorpin),
        tuple((p.id, s(p.cpuset)) for p in dom.iothreadpins),
        dom.hostdevs,
        dom.vcpus,
    )


def _apply(
    inputs: Inputs, name: str, uri: str | None, *, yes: bool, pin: bool, reserve_cores: int, state_dir: str
) -> None:
    uri = _virsh_uri(uri)
    _require_shut_off(uri, name)
    host = _host(inputs)
    try:
        xml = dumpxml(uri, name)
        dom = parse_domain(xml)
        vm = advise_domain(dom, "shut off", host, pin=pin, reserve_cores=reserve_cores)
    except (TopoagentError, VmsError) as exc:
        fail(f"{name}: {exc}")
    if vm is None:
        fail(f"{name} has no PCI passthrough device: nothing to align")
    if vm.affinity is None:
        if vm.verdict is Verdict.ALIGNED:
            emit(f"{name}: already aligned with its devices (node {vm.devices[0].numa_node}); nothing to change\n")
            sys.exit(EXIT_OK)
        fail(f"{name} ({vm.verdict.value}): nothing to apply: {'; '.join(vm.notes) or 'no recommendation'}")
    aff = vm.affinity
    stale = _stale_pins(dom, aff, host)
    if stale:
        fail(
            f"{name} has {', '.join(stale)} outside node {aff.nodeset}'s CPUs: rerun with --pin to replace "
            f"vcpupin/emulatorpin, or remove them (virsh edit) first"
        )
    new = new_definition(xml, aff)
    diff = "".join(
        difflib.unified_diff(
            canonical_xml(xml).splitlines(True),
            new.splitlines(True),
            f"{name} (defined now)",
            f"{name} (with NUMA affinity)",
        )
    )
    emit(diff)
    if not yes:
        emit(
            f"dry run: nothing changed. With --yes the definition is backed up to "
            f"{backup_path(state_dir, name)} and the new one defined (virsh -c {uri} define).\n"
        )
        sys.exit(EXIT_OK)
    try:
        saved, written = save_backup(state_dir, name, xml)
        staged = stage_definition(state_dir, name, new)
    except BackupError as exc:
        fail(str(exc))
    try:
        stored = parse_domain(define_and_read_back(uri, staged, name))
    except TopoagentError as exc:
        fail(f"{exc} (the previous definition is unchanged; backup {saved})")
    finally:
        discard_staged(staged)
    if _affinity_of(stored) != _affinity_of(parse_domain(new)):
        fail(
            f"{name}: libvirt stored a different affinity than was defined; compare virsh dumpxml {name} "
            f"with the diff above (undo: topoagent vms --undo {name})"
        )
    kept = "" if written else " (kept from an earlier --apply: it holds the definition before that)"
    emit(
        f"defined {name} with NUMA affinity node {aff.nodeset}; backup {saved}{kept}; "
        f"undo: topoagent vms --undo {name} --state-dir {state_dir}\n"
    )
    sys.exit(EXIT_OK)


def _undo(name: str, uri: str | None, state_dir: str) -> None:
    uri = _virsh_uri(uri)
    try:
        path, saved = load_backup(state_dir, name)
        wanted = parse_domain(saved)
    except TopoagentError as exc:
        fail(str(exc))
    if wanted.name != name:
        fail(f"{path} defines {wanted.name!r}, not {name!r}: refused")
    _require_shut_off(uri, name)
    try:
        stored = parse_domain(define_and_read_back(uri, path, name))
    except TopoagentError as exc:
        fail(str(exc))
    if _affinity_of(stored) != _affinity_of(wanted):
        fail(f"{name}: libvirt stored a definition that differs from the backup {path} (kept)")
    try:
        remove_backup(state_dir, name)
    except TopoagentError as exc:
        fail(f"restored {name}, but {exc}")
    emit(f"restored {name} from {path} (backup removed)\n")
    sys.exit(EXIT_OK)
