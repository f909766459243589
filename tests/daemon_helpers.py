"""What the daemon's tests share: a free local port, and a configuration that scans a fixture
once an hour with nothing but sysfs (no NVML, no udev), writing under a test's directory."""

from __future__ import annotations

import socket
from pathlib import Path

from topoagent.features.daemon.config import Config


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def quiet_config(root: Path, tmp_path: Path) -> Config:
    """The daemon on ``root``, listening on a free port, its state and NFD files in ``tmp_path``."""
    return Config(
        root=str(root),
        listen=f"127.0.0.1:{free_port()}",
        state_dir=str(tmp_path / "state"),
        nfd_dir=str(tmp_path),
        interval=3600.0,
        nvml=False,
        udev=False,
        scan_timeout=5.0,
    )
