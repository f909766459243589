"""The acceptance test of ``topoagent daemon``: the real daemon as a process, against a copy of
the DGX H100 fixture tree, talking sd_notify to a socket the test binds, scraped over HTTP.

Where Debian's ``prometheus`` (promtool) and ``systemd`` (systemd-analyze) are installed, the
scrape, the alert rules and both units are checked by those tools too; elsewhere those checks
skip.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from fnmatch import fnmatch
from pathlib import Path

import jsonschema
import pytest

from tests.daemon_helpers import free_port
from tests.features.daemon.test_daemon_tree import copy_tree, remove_function, set_link
from tests.paths import REPO

SCHEMA = json.loads((REPO / "topoagent/schema/scan.schema.json").read_text())

prometheus_client = pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402  once importorskip found it

from topoagent.features.daemon.metrics import METRICS  # noqa: E402  it imports prometheus_client

GPU_GONE = "0000:c3:00.0"  # gpu5 on the DGX H100 fixture
NIC_LOW = "0000:18:00.0"  # nic2: gpu0's rail NIC (ConnectX-7, mlx5_0), x16
MGMT_PORT = "0000:00:01.0"  # a Gen5 x16 root port above the x8 Gen3 X710 management NIC
NFD_VALUE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$")


class Notifications:
    """A NOTIFY_SOCKET in the abstract namespace, as systemd would bind it."""

    def __init__(self) -> None:
        self.name = f"topoagent-test-{uuid.uuid4().hex}"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind("\0" + self.name)
        self.seen: list[dict[str, str]] = []

    @property
    def env(self) -> str:
        return "@" + self.name

    def wait(self, pred, timeout: float = 30.0) -> dict[str, str]:
        """The first message (seen or to come) for which ``pred(fields)`` holds."""
        for m in self.seen:
            if pred(m):
                return m
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.sock.settimeout(max(0.05, deadline - time.monotonic()))
            try:
                data = self.sock.recv(4096)
            except TimeoutError:
                break
            fields = dict(line.split("=", 1) for line in data.decode().splitlines() if "=" in line)
            self.seen.append(fields)
            if pred(fields):
                return fields
        raise AssertionError(f"no matching sd_notify message in {timeout} s; seen: {self.seen}")

    def close(self) -> None:
        self.sock.close()


class DaemonProcess:
    """``python -m topoagent daemon`` with its own state, NFD and textfile directories."""

    def __init__(
        self,
        tmp: Path,
        root: Path,
        *,
        port: int | None = None,
        state: Path | None = None,
        extra_env: dict[str, str] | None = None,
        args: tuple[str, ...] = (),
        launcher: tuple[str, ...] = (sys.executable, "-m", "topoagent"),
    ) -> None:
        self.port = port or free_port()
        self.state = state or tmp / "state"
        self.nfd = tmp / "nfd"
        self.textfile = tmp / "textfile"
        for d in (self.nfd, self.textfile):
            d.mkdir(exist_ok=True)
        self.notify = Notifications()
        self.log_path = tmp / f"daemon-{self.port}.log"
        env = dict(os.environ, NOTIFY_SOCKET=self.notify.env, PYTHONPATH=str(REPO))
        for k in ("JOURNAL_STREAM", "INVOCATION_ID", "WATCHDOG_USEC", "WATCHDOG_PID"):
            env.pop(k, None)
        env.update(extra_env or {})
        self.argv = [
            *launcher,
            "daemon",
            "--root",
            str(root),
            "--listen",
            f"127.0.0.1:{self.port}",
            "--state-dir",
            str(self.state),
            "--nfd-dir",
            str(self.nfd),
            "--textfile-dir",
            str(self.textfile),
            "--interval",
            "3600",
            *args,
        ]
        self.log_file = open(self.log_path, "w")  # noqa: SIM115  the daemon writes it until stop() closes it
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL, stderr=self.log_file, env=env, cwd=tmp)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def ready(self) -> dict[str, str]:
        return self.notify.wait(lambda m: m.get("READY") == "1")

    def scrape(self) -> dict[str, list]:
        with urllib.request.urlopen(self.url + "/metrics", timeout=10) as r:
            assert r.status == 200
            assert r.headers["Content-Type"].startswith("text/plain")
            self.last_text = r.read().decode()
        return families(self.last_text)

    def events(self) -> list[dict]:
        lines = self.log_path.read_text().splitlines()
        return [json.loads(line) for line in lines if line.startswith("{")]

    def stop(self) -> float:
        """SIGTERM; seconds until it exited."""
        start = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=10)
        return time.monotonic() - start

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log_file.close()
        self.notify.close()


def families(text: str) -> dict[str, list]:
    """Metric family name -> its samples, parsed by prometheus_client's parser."""
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def value(fams: dict[str, list], name: str, **labels: str) -> float:
    family = name.removesuffix("_total")
    hits = [s.value for s in fams[family] if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(hits) == 1, (name, labels, hits)
    return float(hits[0])


def promtool(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["promtool", *args], input=stdin, capture_output=True, text=True, timeout=60)


def nfd_labels(path: Path) -> dict[str, str]:
    text = path.read_text()
    assert len(text.encode()) < 64 * 1024
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, val = line.partition("=")
        namespace, _, local = name.rpartition("/")
        assert namespace and NFD_VALUE.match(local), line
        assert NFD_VALUE.match(val), line
        out[local] = val
    return out


@pytest.fixture
def tree(fixture_root, tmp_path) -> Path:
    """A copy of the DGX H100 tree for the daemon to read and the test to change (hard-linked
    files: see test_daemon_tree)."""
    return copy_tree(fixture_root("dgx-h100"), tmp_path / "root")


@pytest.fixture
def daemon(tmp_path, tree):
    d = DaemonProcess(tmp_path, tree)
    yield d
    d.close()


def test_daemon_end_to_end(daemon, tree):
    ready = daemon.ready()
    assert "scan 1 ok" in ready["STATUS"]

    # -- /metrics after the first scan -------------------------------------------------------
    fams = daemon.scrape()
    for name in (
        "topoagent_build_info",
        "topoagent_scan_success",
        "topoagent_scan_duration_seconds",
        "topoagent_last_scan_timestamp_seconds",
        "topoagent_source_up",
        "topoagent_devices",
        "topoagent_finding",
        "topoagent_findings",
        "topoagent_rail_info",
        "topoagent_pcie_link_width",
        "topoagent_pcie_link_speed_transfers_per_second",
        "topoagent_pcie_link_degraded",
        "topoagent_scan_failures",
    ):
        assert name in fams, name
    from topoagent import __version__

    assert value(fams, "topoagent_build_info", version=__version__) == 1
    assert value(fams, "topoagent_scan_success") == 1
    assert value(fams, "topoagent_scan_failures_total") == 0
    assert value(fams, "topoagent_devices", kind="gpu") == 8
    assert value(fams, "topoagent_devices", kind="nvswitch") == 4  # their own kind, not bridges
    assert value(fams, "topoagent_source_up", source="sysfs") == 1
    assert value(fams, "topoagent_source_duration_seconds", source="sysfs") > 0
    assert abs(value(fams, "topoagent_last_scan_timestamp_seconds") - time.time()) < 120
    rails = fams["topoagent_rail_info"]
    assert len(rails) == 8 and {s.labels["path_class"] for s in rails} == {"PIX"}
    assert {"gpu": "gpu0", "gpu_bdf": "0000:1b:00.0", "nic": "nic2", "nic_bdf": NIC_LOW, "path_class": "PIX"} in [
        s.labels for s in rails
    ]
    assert value(fams, "topoagent_pcie_link_width", bdf=NIC_LOW, kind="nic", state="current") == 16
    speed = "topoagent_pcie_link_speed_transfers_per_second"
    assert value(fams, speed, bdf=GPU_GONE, kind="gpu", state="current") == 32e9  # base unit: transfers/s
    # One series per physical link (the series budget): a healthy link's capability is not
    # exported, only that it is not degraded -- a root port above a narrower, slower card (its
    # own maximum x16 32 GT/s, the link's capability x8 8 GT/s) included.
    assert {s.labels["state"] for s in fams["topoagent_pcie_link_width"]} == {"current"}
    assert not [s for s in fams["topoagent_pcie_link_width"] if s.labels["bdf"] == MGMT_PORT]
    mgmt_link = next(s.labels["link"] for s in fams["topoagent_pcie_link_degraded"] if s.labels["link"] != MGMT_PORT)
    assert mgmt_link and {s.value for s in fams["topoagent_pcie_link_degraded"]} == {0}
    assert len(daemon.last_text.splitlines()) < 400  # the exposition, comments included (docs/daemon.md)
    assert all(any(fnmatch(name, m.name) for m in METRICS) for name in fams), "a family not in docs/daemon.md"
    # Low cardinality: per device, never per CPU or IRQ.
    assert not any("cpu" in k or "irq" in k for f in fams.values() for s in f for k in s.labels)
    if shutil.which("promtool"):
        checked = promtool("check", "metrics", stdin=daemon.last_text)
        assert checked.returncode == 0, checked.stdout + checked.stderr

    # -- state.json and the NFD file ---------------------------------------------------------
    state = json.loads((daemon.state / "state.json").read_text())
    jsonschema.validate(state, SCHEMA)
    assert len([d for d in state["devices"] if d["kind"] == "gpu"]) == 8
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", state["scanned_at"])
    assert state["scan_duration_seconds"] > 0 and state["changes"] == []
    assert state["daemon"]["last_scan"]["success"] is True
    nfd = nfd_labels(daemon.nfd / "topoagent")
    assert nfd["topoagent.gpu.count"] == "8"
    assert nfd["topoagent.nvswitch.count"] == "4"
    assert nfd["topoagent.gpu.numa-nodes"] == "0_1"
    assert nfd["topoagent.rail.worst-path"] == "PIX"
    assert nfd["topoagent.gdr.ready"] == "true"
    assert nfd["topoagent.acs.blocking"] == "false"
    assert nfd["topoagent.pcie.degraded-links"] == "false"
    assert os.listdir(daemon.nfd) == ["topoagent"]  # the dotfile was renamed, nothing left over
    textfile = (daemon.textfile / "topoagent.prom").read_text()
    assert value(families(textfile), "topoagent_devices", kind="gpu") == 8
    nfd_mtime = (daemon.nfd / "topoagent").stat().st_mtime_ns

    # -- change the tree: a GPU falls off the bus, a NIC retrains at x8; then SIGHUP ------------
    remove_function(tree, GPU_GONE)
    set_link(tree, NIC_LOW, width=8)
    daemon.proc.send_signal(signal.SIGHUP)
    status = daemon.notify.wait(lambda m: m.get("STATUS", "").startswith("scan 2 "))
    assert "scan 2 ok (sighup)" in status["STATUS"], status

    fams = daemon.scrape()
    assert value(fams, "topoagent_devices", kind="gpu") == 7
    assert value(fams, "topoagent_scans_total") == 2
    # What the alert rules compare: the GPUs now, the known-good count (kept on disk), the interval.
    assert value(fams, "topoagent_gpus") == 7 and value(fams, "topoagent_gpus_expected") == 8
    assert (daemon.state / "gpus-expected").read_text() == "8\n"
    assert value(fams, "topoagent_scan_interval_seconds") == 3600
    # Both ends of the x8 link name the same link: one cause for the alert to aggregate on.
    low = [s for s in fams["topoagent_pcie_link_degraded"] if s.value == 1]
    assert [s.labels for s in low] == [{"link": NIC_LOW, "kind": "nic"}]  # one link, one series
    assert GPU_GONE not in {s.labels["gpu_bdf"] for s in fams["topoagent_rail_info"]}
    assert value(fams, "topoagent_pcie_link_width", bdf=NIC_LOW, kind="nic", state="current") == 8
    assert value(fams, "topoagent_pcie_link_width", bdf=NIC_LOW, kind="nic", state="capability") == 16
    assert value(fams, "topoagent_finding", code="LINK_WIDTH_DEGRADED", severity="warning", subject=NIC_LOW) == 1
    assert value(fams, "topoagent_findings", severity="warning") >= 1
    assert value(fams, "topoagent_changes_total") >= 3

    state = json.loads((daemon.state / "state.json").read_text())
    jsonschema.validate(state, SCHEMA)
    assert len([d for d in state["devices"] if d["kind"] == "gpu"]) == 7
    kinds = {(c["kind"], c["subject"]) for c in state["changes"]}
    assert ("device_removed", GPU_GONE) in kinds
    assert ("link_width_changed", NIC_LOW) in kinds
    assert ("finding_raised", "LINK_WIDTH_DEGRADED") in kinds
    assert ("link_degraded", NIC_LOW) in kinds
    nfd = nfd_labels(daemon.nfd / "topoagent")
    assert nfd["topoagent.gpu.count"] == "7"
    assert nfd["topoagent.pcie.degraded-links"] == "true"
    assert (daemon.nfd / "topoagent").stat().st_mtime_ns != nfd_mtime

    events = daemon.events()
    by_event = {(e["event"], e.get("subject")) for e in events}
    assert ("device_removed", GPU_GONE) in by_event
    assert ("link_width_changed", NIC_LOW) in by_event
    assert ("link_degraded", NIC_LOW) in by_event
    assert ("finding_raised", "LINK_WIDTH_DEGRADED") in by_event
    removed = next(e for e in events if e["event"] == "device_removed")
    assert removed["level"] == "warning" and removed["device_kind"] == "gpu" and removed["before"] == "gpu5"
    # Under `pytest -s -v` the event log of the change test is printed for the record.
    print("\n".join(json.dumps(e) for e in events if e.get("subject")))

    # -- SIGTERM ends it cleanly, within two seconds -------------------------------------------
    took = daemon.stop()
    assert daemon.proc.returncode == 0
    assert took < 2.0, took
    daemon.notify.wait(lambda m: m.get("STOPPING") == "1", timeout=1)
    assert any(e["event"] == "stopped" for e in daemon.events())


# The daemon with its scan wrapped: while the file named by $TOPOAGENT_TEST_HANG exists, a scan
# hangs for good (as a read stuck in the kernel would).  Everything else is the real daemon.
HANGING_DAEMON = """
import os, sys, threading
import topoagent.features.daemon.loop as loop
real = loop.default_scan
def scan(config):
    if os.path.exists(os.environ["TOPOAGENT_TEST_HANG"]):
        threading.Event().wait()
    return real(config)
loop.default_scan = scan
from topoagent.cli import main
main()
"""


def test_hung_scan_is_abandoned_and_counted(tmp_path, tree):
    marker = tmp_path / "hang"
    config = tmp_path / "config.toml"
    config.write_text("scan_timeout = 1\n")
    d = DaemonProcess(
        tmp_path,
        tree,
        extra_env={"TOPOAGENT_TEST_HANG": str(marker)},
        args=("--config", str(config)),
        launcher=(sys.executable, "-c", HANGING_DAEMON),
    )
    try:
        d.ready()
        marker.touch()
        d.proc.send_signal(signal.SIGHUP)
        status = d.notify.wait(lambda m: m.get("STATUS", "").startswith("scan 2 "), timeout=15)
        assert "scan 2 failed (sighup)" in status["STATUS"] and "timed out after 1 s" in status["STATUS"]
        fams = d.scrape()
        assert value(fams, "topoagent_scan_success") == 0
        assert value(fams, "topoagent_scan_failures_total") == 1
        assert value(fams, "topoagent_devices", kind="gpu") == 8  # the last good scan is still served
        state = json.loads((d.state / "state.json").read_text())
        assert state["daemon"]["last_scan"]["success"] is False
        assert len([x for x in state["devices"] if x["kind"] == "gpu"]) == 8
        # While that scan is stuck, another is not started on top of it: counted instead.
        d.proc.send_signal(signal.SIGHUP)
        status = d.notify.wait(lambda m: m.get("STATUS", "").startswith("scan 3 "), timeout=15)
        assert "still hung" in status["STATUS"]
        failed = [e for e in d.events() if e["event"] == "scan_failed"]
        assert [e["trigger"] for e in failed] == ["sighup", "sighup"]
        # A stuck thread does not hold up SIGTERM.
        assert d.stop() < 2.0 and d.proc.returncode == 0
    finally:
        d.close()


def test_config_sources_and_changes_are_logged_and_nfd_writability_checked(tmp_path, tree):
    """A file says ``interval = 5`` and the command line ``--interval 3600``: the start logs every
    effective value with its source and warns that the flag overrides the file; a reload logs
    what changed.  An NFD directory that turns unwritable reads export_ok 0 on the next scan,
    although the labels did not change."""
    from tests.features.daemon.test_daemon_parts import unwritable

    config = tmp_path / "config.toml"
    config.write_text("interval = 5\nlink_window = 600\n")
    d = DaemonProcess(tmp_path, tree, args=("--config", str(config)))
    try:
        d.ready()
        events = d.events()
        start = next(e for e in events if e["event"] == "config")
        assert start["when"] == "start" and start["settings"]["interval"] == 3600
        assert start["sources"]["interval"] == "flag" and start["sources"]["link_window"] == "file"
        assert start["sources"]["debounce"] == "default" and start["settings"]["link_window"] == 600
        warn = next(e for e in events if e["event"] == "config_flag_overrides_file")
        assert (warn["key"], warn["flag"], warn["file"], warn["level"]) == ("interval", 3600, 5, "warning")
        assert value(d.scrape(), "topoagent_export_ok", export="nfd") == 1

        config.write_text("interval = 5\nlink_window = 900\n")
        with unwritable(d.nfd):
            d.proc.send_signal(signal.SIGHUP)
            d.notify.wait(lambda m: m.get("STATUS", "").startswith("scan 2 "))
            assert value(d.scrape(), "topoagent_export_ok", export="nfd") == 0
        reload = [e for e in d.events() if e["event"] == "config" and e["when"] == "reload"]
        assert len(reload) == 1 and reload[0]["changed"] == {"link_window": [600, 900]}
        assert any(e["event"] == "export_failed" and e["export"] == "nfd" for e in d.events())
    finally:
        d.close()


def test_second_instance_exits_at_once(daemon, tmp_path, tree):
    daemon.ready()
    # Same state directory, another port: the lock says no.
    same_state = subprocess.run(
        [
            sys.executable,
            "-m",
            "topoagent",
            "daemon",
            "--root",
            str(tree),
            "--listen",
            f"127.0.0.1:{free_port()}",
            "--state-dir",
            str(daemon.state),
        ],
        capture_output=True,
        text=True,
        timeout=20,
        cwd=REPO,
    )
    assert same_state.returncode == 2
    lines = same_state.stderr.strip().splitlines()
    assert len(lines) == 1 and "already uses state directory" in lines[0], same_state.stderr
    assert str(daemon.proc.pid) in lines[0]
    # Same port, another state directory: the port says no.
    same_port = subprocess.run(
        [
            sys.executable,
            "-m",
            "topoagent",
            "daemon",
            "--root",
            str(tree),
            "--listen",
            f"127.0.0.1:{daemon.port}",
            "--state-dir",
            str(tmp_path / "other-state"),
        ],
        capture_output=True,
        text=True,
        timeout=20,
        cwd=REPO,
    )
    assert same_port.returncode == 2
    lines = same_port.stderr.strip().splitlines()
    assert len(lines) == 1 and f"cannot listen on 127.0.0.1:{daemon.port}" in lines[0], same_port.stderr
    # The first one is unharmed.
    assert value(daemon.scrape(), "topoagent_scan_success") == 1


def test_watchdog_pings_when_asked(tmp_path, tree):
    d = DaemonProcess(tmp_path, tree, extra_env={"WATCHDOG_USEC": "600000"})  # ping every 0.2 s
    try:
        d.ready()
        d.notify.wait(lambda m: m.get("WATCHDOG") == "1", timeout=5)
    finally:
        d.close()


def test_bad_flags_are_one_line(tmp_path, tree):
    bad = [
        (["--listen", "nowhere"], "is not ADDR:PORT"),
        (["--root", str(tmp_path / "absent")], "not a directory"),
        (["--config", str(tmp_path / "absent.toml")], "no such file"),
        (["--interval", "0"], "interval = 0: must be from 1 to 86400 seconds"),
    ]
    cfg = tmp_path / "typo.toml"
    cfg.write_text("intervall = 30\n")
    bad.append((["--config", str(cfg)], "unknown key 'intervall'"))
    for args, message in bad:
        argv = [sys.executable, "-m", "topoagent", "daemon", "--state-dir", str(tmp_path / "s"), *args]
        if "--root" not in args:
            argv += ["--root", str(tree)]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=20, cwd=REPO)
        assert p.returncode == 2, (args, p.stderr)
        assert len(p.stderr.strip().splitlines()) == 1 and message in p.stderr, (args, p.stderr)


# -- tools CI installs: promtool (Debian prometheus), systemd-analyze (Debian systemd) ---------


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed (Debian package prometheus)")
def test_alert_rules_pass_promtool():
    p = promtool("check", "rules", str(REPO / "deploy/prometheus/topoagent-rules.yml"))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "SUCCESS" in p.stdout


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed (Debian package prometheus)")
def test_alert_rules_unit_tests_pass_promtool():
    """deploy/prometheus/tests: every rule fires when it should, once per cause, and not else."""
    tests = sorted((REPO / "deploy/prometheus/tests").glob("*.yml"))
    assert tests
    p = promtool("test", "rules", *map(str, tests))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "SUCCESS" in p.stdout and "FAILED" not in p.stdout


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed (Debian package prometheus)")
def test_the_documented_remote_write_keeps_the_scale_records(tmp_path):
    """docs/daemon.md's remote_write keep-list (issue 32 item 9) is a valid configuration and
    keeps every per-host and per-class record of the topoagent-scale group, and none of the
    per-link or per-function series."""
    yaml = pytest.importorskip("yaml")

    doc = (REPO / "docs/daemon.md").read_text()
    block = next(b for b in re.findall(r"```yaml\n(.*?)```", doc, re.S) if "remote_write" in b)
    config = yaml.safe_load(block)
    config["scrape_configs"] = [{"job_name": "topoagent", "static_configs": [{"targets": ["n1:9464"]}]}]
    (tmp_path / "p.yml").write_text(yaml.safe_dump(config))
    p = promtool("check", "config", str(tmp_path / "p.yml"))
    assert p.returncode == 0, p.stdout + p.stderr
    keep = re.compile(config["remote_write"][0]["write_relabel_configs"][0]["regex"])  # anchored, as Prometheus does
    rules = yaml.safe_load((REPO / "deploy/prometheus/topoagent-rules.yml").read_text())
    records = [r["record"] for g in rules["groups"] for r in g["rules"] if "record" in r]
    assert records and all(keep.fullmatch(r) for r in records), records
    assert keep.fullmatch("topoagent_topology_info") and keep.fullmatch("topoagent_findings")
    for name in ("topoagent_pcie_link_degraded", "topoagent_pcie_link_width", "topoagent_pcie_aer_errors_total"):
        assert not keep.fullmatch(name), name


def test_every_rule_has_a_unit_test():
    """(That the rules read only metrics the daemon exports: test_daemon_parts.)"""
    yaml = pytest.importorskip("yaml")

    rules = yaml.safe_load((REPO / "deploy/prometheus/topoagent-rules.yml").read_text())
    alerts = {r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r}
    records = {r["record"] for g in rules["groups"] for r in g["rules"] if "record" in r}
    cases = [
        case
        for f in (REPO / "deploy/prometheus/tests").glob("*.yml")
        for case in yaml.safe_load(f.read_text())["tests"]
    ]
    tested = {t["alertname"] for case in cases for t in case.get("alert_rule_test", [])}
    assert alerts and alerts <= tested, alerts - tested
    queried = " ".join(t["expr"] for case in cases for t in case.get("promql_expr_test", []))
    assert {r for r in records if r not in queried} == set()


@pytest.mark.skipif(
    shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed (Debian package systemd)"
)
@pytest.mark.parametrize("unit", ["topoagent.service", "topoagent-apply.service"])
def test_systemd_units_verify(unit, tmp_path):
    # verify insists that ExecStart's binary exists: point it at this environment's topoagent.
    exe = Path(sys.executable).parent / "topoagent"
    if not exe.exists():
        exe = Path(shutil.which("topoagent") or "")
    if not exe.is_file():
        pytest.skip("no topoagent console script in this environment")
    text = (REPO / "systemd" / unit).read_text()
    assert "ExecStart=/usr/local/bin/topoagent " in text
    (tmp_path / unit).write_text(text.replace("/usr/local/bin/topoagent", str(exe)))
    p = subprocess.run(
        ["systemd-analyze", "verify", str(tmp_path / unit)], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    output = p.stdout + p.stderr
    assert p.returncode == 0, output
    # Unknown or misspelt directives are only warnings: refuse them too.
    assert unit not in output, output


def _rename_nic_bytes(tree: Path, new: bytes) -> None:
    """Rename gpu0's rail NIC (ibp24s0 / mlx5_0) to a name whose bytes are not UTF-8."""
    dev = Path(os.path.realpath(tree / f"sys/bus/pci/devices/{NIC_LOW}"))
    for cls, old in (("net", "ibp24s0"), ("infiniband", "mlx5_0")):
        os.rename(os.fsencode(dev / cls / old), os.fsencode(dev / cls) + b"/" + new)
        link = tree / "sys/class" / cls / old
        if os.path.lexists(link):
            os.rename(os.fsencode(link), os.fsencode(tree / "sys/class" / cls) + b"/" + new)


def test_a_name_that_is_not_utf8_keeps_the_daemon_serving(tmp_path, tree):
    """Issue 31 item 4: an undecodable byte in a NIC name ended the daemon after its first scan
    (UnicodeEncodeError writing state.json) and /metrics was never served."""
    _rename_nic_bytes(tree, b"mlx5_\xff")
    d = DaemonProcess(tmp_path, tree)
    try:
        d.ready()
        fams = d.scrape()  # parsed by prometheus_client's own parser
        assert value(fams, "topoagent_scan_success") == 1
        assert d.proc.poll() is None
        state = json.loads((d.state / "state.json").read_bytes())
        assert any("mlx5_\\xff" in dev.get("rdma_devices", []) for dev in state["devices"])
    finally:
        d.close()
