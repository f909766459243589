"""What the daemon's tests share: a free local port, a configuration that scans a fixture once
an hour with nothing but sysfs (no NVML, no udev), writing under a test's directory, and the
scrape of one scan as the daemon serves it."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

from topoagent.core.frozen import FrozenMap
from topoagent.core.result import ScanResult
from topoagent.features.daemon.config import Config
from topoagent.features.daemon.linkwatch import LinkWatch
from topoagent.features.daemon.metrics import render_text
from topoagent.features.daemon.status import Attempt, Status


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


def scraped_status(result: ScanResult, *, audited: bool = True, **fields: Any) -> Status:
    """The daemon's status after one good scan of ``result``, as it serves it: its links judged
    once (the link watch), every export written, as many GPUs expected as it has (the most the
    daemon has seen), and (``audited``) the audit's per-GPU families with no process using a GPU;
    ``fields`` replace any of it."""
    from topoagent.features.audit.advise import advise
    from topoagent.features.audit.facts import AuditFacts

    watch = LinkWatch(600)
    watch.observe_result(0, result, {})
    base: dict[str, Any] = {
        "started_at": 1.0,
        "result": result,
        "good_at": 1700000000.0,
        "good_duration": 0.05,
        "last": Attempt(1700000000.0, True, 0.05),
        "scans_total": 1,
        "judgements": FrozenMap(watch.judge()),
        "exports": FrozenMap({"state": True, "nfd": True, "textfile": True}),
        "interval": 300.0,
        "expected_gpus": sum(1 for g in result.topology.gpus if not g.is_vf),
        "audit": advise(result, AuditFacts(source="fd")) if audited else None,
    }
    base.update(fields)
    return Status(**base)


def scrape(result: ScanResult, **fields: Any) -> list[Any]:
    """The samples ``/metrics`` serves for :func:`scraped_status` (the topoagent_* families),
    parsed by prometheus_client's parser."""
    from prometheus_client.parser import text_string_to_metric_families

    text = render_text(scraped_status(result, **fields)).decode()
    return [s for f in text_string_to_metric_families(text) for s in f.samples]
