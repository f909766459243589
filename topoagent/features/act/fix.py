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
from topoagent.features.act.apply import run_changes, state_dir_option
from topoagent.features.act.changes import (
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
@scan_inputs(cross_check=False)
@state_dir_option
def acs(inputs: Inputs, state_dir: str, yes: bool) -> None:
    """Clear ACS P2P redirect on the bridges of GPU-GPU and GPU-NIC paths only.

    Writes each bridge's ACS Control register through sysfs `config` (until reboot) and
    prints the pci=disable_acs_redir= kernel parameter that does the same at every boot.
    Refuses inside a VM and on bridges above a device bound to vfio-pci.
    """
    if inputs.offline:
        fail("fix acs changes a host: it needs a host tree (--root), not pasted output")
    result = run_scan(inputs)
    fs = HostFS(inputs.root)
    bridges = peer_path_bridges(result.topology, result.paths)
    configs = {bdf: config_bytes(fs, bdf) for bdf in bridges}
    p = acs_plan(result.topology, result.paths, configs)
    for line in p.refused:
        click.echo(f"  refused: {line}")
    if p.refused and not p.changes and result.topology.virtualized:
        sys.exit(EXIT_FINDINGS)
    status = run_changes(p.changes, inputs.root, state_dir, yes, needs="root (config space writes)")
    if p.kernel_parameter:
        click.echo(
            f"To keep it across reboots, add to the kernel command line (quoted: ';' is special to shells "
            f'and GRUB): "{p.kernel_parameter}"'
        )
    sys.exit(status)


@fix.command("peermem")
@scan_inputs(cross_check=False)
@state_dir_option
def peermem(inputs: Inputs, state_dir: str, yes: bool) -> None:
    """Load nvidia_peermem when GPUDirect RDMA needs it and DMA-BUF is not available,
    and list it in /etc/modules-load.d so it loads at boot."""
    if inputs.offline:
        fail("fix peermem changes a host: it needs a host tree (--root), not pasted output")
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
        click.echo(f"  (--root {inputs.root} is not this host: modprobe is not run, only the boot entry is written)")
    try:
        conf_now = file_text(fs, PEERMEM_CONF)
    except UnsavableFile as exc:
        fail(str(exc))
    changes = peermem_changes(loaded, conf_now, live=live)
    sys.exit(run_changes(changes, inputs.root, state_dir, yes, needs="root"))
