"""``topoagent fix``: repairs kept apart from checks -- dry run unless --yes, journalled and
undoable with ``topoagent apply --undo``.  Neither ``scan`` nor the daemon ever runs them."""

from __future__ import annotations

import sys

import click

from topoagent.core.analysis.peermem import peermem_need
from topoagent.core.command.common import EXIT_FINDINGS, EXIT_OK, fail
from topoagent.core.command.options import run_scan, scan_inputs
from topoagent.core.hostfs import HostFS
from topoagent.core.inputs import Inputs
from topoagent.core.read import is_live
from topoagent.core.read.kernel import UnsavableFile, config_bytes, file_text
from topoagent.core.tree import root_name
from topoagent.features.act.apply import run_changes, state_dir_option
from topoagent.features.act.changes import (
    GRUB_ACS_CONF,
    PEERMEM_CONF,
    PEERMEM_MODULE,
    acs_plan,
    peer_path_bridges,
    peermem_changes,
)


@click.group()
def fix() -> None:
    """Repair what a scan found (dry run unless --yes; undo with topoagent apply --undo)."""


@fix.command("acs")
@scan_inputs(cross_check=False, pasted=False)
@state_dir_option
def acs(inputs: Inputs, state_dir: str, yes: bool) -> None:
    """Set ACS as GPUDirect needs it: on an NVIDIA GPU platform (Data Direct, Inline, NUMA
    complexes) every platform port to the mask the platform requires, elsewhere P2P redirect
    cleared on the bridges of GPU-GPU and GPU-NIC paths only.

    Writes each bridge's ACS Control register through sysfs `config` (until reboot).  On a
    platform it also writes the pci=config_acs= boot parameter as a grub drop-in
    (/etc/default/grub.d/config-acs.cfg, as NVIDIA's rdma_topo does); elsewhere it prints the
    pci=disable_acs_redir= parameter.  Refuses inside a VM and where a change would end the
    isolation of a device bound to vfio-pci.
    """
    result = run_scan(inputs)
    fs = HostFS(inputs.root)
    topo = result.topology
    bridges = set(peer_path_bridges(topo, result.paths)) | {r.bdf for r in topo.platform.acs}
    configs = {bdf: config_bytes(fs, bdf) for bdf in sorted(bridges)}
    try:
        grub_now = file_text(fs, GRUB_ACS_CONF) if topo.platform.kind is not None else None
    except UnsavableFile as exc:
        fail(str(exc))
    p = acs_plan(topo, result.paths, configs, grub_now=grub_now)
    if topo.platform.kind is not None:
        click.echo(
            f"NVIDIA {topo.platform.kind.label} platform: {len(topo.platform.acs)} port(s) with a required ACS mask"
        )
    for line in p.refused:
        click.echo(f"  refused: {line}")
    if p.refused and not p.changes and topo.virtualized:
        sys.exit(EXIT_FINDINGS)
    status = run_changes(p.changes, inputs.root, state_dir, yes, needs="root (config space and /etc writes)")
    if any(c.target.get("path") == GRUB_ACS_CONF for c in p.changes):
        click.echo(
            "The drop-in is read when grub's configuration is made: run update-grub (Debian, Ubuntu) or "
            "grub2-mkconfig -o /boot/grub2/grub.cfg, then reboot."
        )
    for note in p.notes:
        click.echo(note)
    if p.kernel_parameter:
        click.echo(
            f"To keep it across reboots, add to the kernel command line (quoted: ';' is special to shells "
            f'and GRUB): "{p.kernel_parameter}"'
        )
    sys.exit(status)


@fix.command("peermem")
@scan_inputs(cross_check=False, pasted=False)
@state_dir_option
def peermem(inputs: Inputs, state_dir: str, yes: bool) -> None:
    """Load nvidia_peermem when GPUDirect RDMA needs it and DMA-BUF is not available,
    and list it in /etc/modules-load.d so it loads at boot."""
    result = run_scan(inputs)
    fs = HostFS(inputs.root)
    # the scan's own verdict (NO_PEER_MEMORY is raised exactly when this says needed)
    need = peermem_need(result.topology, result.rails)
    click.echo(f"{'Needed' if need.needed else 'Not needed'}: {need.why}.")
    if not need.needed:
        sys.exit(EXIT_OK)
    live = is_live(inputs)
    loaded = PEERMEM_MODULE in result.topology.modules
    if not live:
        where = root_name(inputs.root)
        click.echo(f"  (--root {where} is not this host: modprobe is not run, only the boot entry is written)")
    try:
        conf_now = file_text(fs, PEERMEM_CONF)
    except UnsavableFile as exc:
        fail(str(exc))
    changes = peermem_changes(loaded, conf_now, live=live)
    sys.exit(run_changes(changes, inputs.root, state_dir, yes, needs="root"))
