"""``topoagent daemon``: scan on a timer and on hotplug, export to Prometheus, NFD and a state file."""

from __future__ import annotations

import os
import sys

import click

from topoagent.core.command.common import fail
from topoagent.core.errors import TopoagentError
from topoagent.core.read.archive import resolve_root
from topoagent.features.daemon.config import ConfigError, ConfigReader
from topoagent.features.daemon.loop import Daemon, SetupError


@click.command()
@click.option(
    "--root",
    metavar="DIR",
    help="Read the host tree below this directory (default /), or replay a "
    "capture archive (topoagent capture). udev and NVML describe this host, so they are off for any "
    "other root.",
)
@click.option(
    "--config",
    "config_file",
    metavar="FILE",
    help="TOML configuration (default /etc/topoagent/config.toml, if it exists).",
)
@click.option("--listen", metavar="ADDR:PORT", help="Serve /metrics here (default 127.0.0.1:9464).")
@click.option(
    "--state-dir",
    metavar="DIR",
    help="Where state.json and the lock live (default $STATE_DIRECTORY or /var/lib/topoagent).",
)
@click.option(
    "--nfd-dir",
    metavar="DIR",
    help="Write a node-feature-discovery feature file here (e.g. /etc/kubernetes/node-feature-discovery/features.d).",
)
@click.option("--textfile-dir", metavar="DIR", help="Write topoagent.prom here for node_exporter's textfile collector.")
@click.option("--interval", type=float, metavar="SECONDS", help="Seconds between timer scans (default 300).")
@click.option("--no-nvml", is_flag=True, default=None, help="Do not ask NVML.")
@click.option("--no-audit", is_flag=True, default=None, help="Do not audit the processes using the GPUs.")
def daemon(
    root: str | None,
    config_file: str | None,
    listen: str | None,
    state_dir: str | None,
    nfd_dir: str | None,
    textfile_dir: str | None,
    interval: float | None,
    no_nvml: bool | None,
    no_audit: bool | None,
) -> None:
    """Run as a service: scan at start, on a timer, on udev hotplug events and on SIGHUP.

    Each scan is compared with the last good one and every change is logged as one
    structured event (JSON lines under systemd or off a terminal).  Exports: state.json in
    the state directory, Prometheus /metrics over HTTP (and a textfile-collector file), and a
    node-feature-discovery feature file.  SIGHUP reloads the configuration; SIGTERM stops.
    Flags override the configuration file.  Under systemd it speaks sd_notify (Type=notify).
    """
    overrides = {
        "root": root,
        "listen": listen,
        "state_dir": state_dir,
        "nfd_dir": nfd_dir,
        "textfile_dir": textfile_dir,
        "interval": interval,
        "nvml": False if no_nvml else None,
        "audit": False if no_audit else None,
    }

    reader = ConfigReader(config_file, overrides)  # one read per (re)load, provenance included
    try:
        config = reader.load()
    except ConfigError as exc:
        fail(str(exc))
    _check_root(config.root)
    try:
        code = Daemon(config, reload=reader.load, explain=reader.explain).run()
    except SetupError as exc:
        fail(str(exc))
    sys.exit(code)


def _check_root(root: str) -> None:
    """One line and exit 2 unless ``root`` is a directory or a capture archive that reads (into
    memory: every scan reads it again, so a capture put in its place counts from the next scan)."""
    try:
        resolved = resolve_root(root)
    except TopoagentError as exc:
        fail(f"--root {root}: {exc}")
    if isinstance(resolved, str) and not os.path.isdir(resolved):
        fail(f"--root {root}: not a directory or a capture archive")
