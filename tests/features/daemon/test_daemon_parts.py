"""The daemon's parts one at a time: configuration, sd_notify, link judgement, metrics, exports."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import socket
import subprocess
import uuid
from collections import Counter
from pathlib import Path

import msgspec
import pytest

from tests.fakenvml import make_fake
from tests.fakesysfs.generator import machine_names
from tests.paths import REPO
from topoagent.core.api import scan
from topoagent.core.errors import TopoagentError
from topoagent.core.findings import Severity
from topoagent.core.frozen import FrozenMap
from topoagent.core.result import analyse
from topoagent.core.snapshot import LinkInfo
from topoagent.features.daemon import config as cfgmod
from topoagent.features.daemon.config import (
    Config,
    ConfigError,
    ConfigReader,
    changed_keys,
    load,
    load_explained,
    parse_listen,
)
from topoagent.features.daemon.exports import (
    Exporter,
    atomic_write,
    nfd_features,
    render_nfd,
    valid_nfd_name,
    valid_nfd_value,
)
from topoagent.features.daemon.linkwatch import LinkWatch, rail_netdevs, watched_links
from topoagent.features.daemon.load import LoadProbe
from topoagent.features.daemon.log import make_logger, wants_json
from topoagent.features.daemon.notify import Notifier
from topoagent.features.daemon.status import Attempt, Status

prometheus_client = pytest.importorskip("prometheus_client")

MACHINES = [
    "dgx-h100",
    "dgx-a100-nps4",
    "wrong-socket-nic",
    "workstation",
    "cloud-vm",
    "grace-hopper",
    "p4d-efa",
    "sriov-nic",
    "no-gpu",
    "faulty-gpu-node",
    "unprivileged",
    "epyc-nps2-mixed",
]


@pytest.fixture(scope="module")
def dgx(fixture_root):
    return scan(fixture_root("dgx-h100"), nvml="off")


# -- configuration --------------------------------------------------------------------------


def test_config_file_then_flags(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text('listen = "[::1]:9500"\ninterval = 60\nnfd_dir = ""\ntextfile_dir = "/x"\nnvml = false\n')
    c = load(str(f), {"interval": 5.0, "state_dir": "/s", "root": None})
    assert c.listen == "[::1]:9500" and c.address == ("::1", 9500)
    assert c.interval == 5.0 and isinstance(c.interval, float)  # the flag wins
    assert c.nfd_dir is None and c.textfile_dir == "/x" and c.nvml is False and c.state_dir == "/s"
    assert c.root == "/" and c.live


def test_config_provenance_says_default_file_or_flag(tmp_path):
    """``interval = 5`` in the file under ``--interval 2``: the flag wins, and provenance says
    so (and keeps the file's value to warn with); what neither sets is a default."""
    f = tmp_path / "c.toml"
    f.write_text("interval = 5\nlink_window = 600\n")
    flags = {"interval": 2.0, "state_dir": "/s", "root": None}
    c, prov = load_explained(str(f), flags)
    assert c == load(str(f), flags)
    assert c.interval == 2.0
    assert prov.sources["interval"] == "flag" and prov.shadowed == {"interval": 5.0}
    assert prov.sources["link_window"] == "file" and prov.sources["state_dir"] == "flag"
    assert prov.sources["root"] == prov.sources["debounce"] == "default"
    assert set(prov.sources) == set(cfgmod.msgspec.structs.asdict(c))


def test_config_changed_keys():
    old = Config(state_dir="/s")
    new = Config(state_dir="/s", interval=5.0, nvml=False)
    assert changed_keys(old, new) == {"interval": [300.0, 5.0], "nvml": [True, False]}
    assert changed_keys(old, old) == {}


def test_config_default_file_is_optional(tmp_path, monkeypatch):
    monkeypatch.setattr(cfgmod, "DEFAULT_CONFIG", str(tmp_path / "absent.toml"))
    monkeypatch.setenv("STATE_DIRECTORY", "/run/state/topoagent:/other")
    c = load(None, {})
    assert c == Config(state_dir="/run/state/topoagent")
    with pytest.raises(ConfigError, match="no such file"):
        load(str(tmp_path / "absent.toml"))


@pytest.mark.parametrize(
    "text, message",
    [
        ("intervall = 30", "unknown key 'intervall'"),
        ("[daemon]\ninterval = 30", "unknown key 'daemon'"),
        ("interval = -1", "interval = -1: must be from 1 to 86400 seconds"),
        ('interval = "30"', "must be seconds > 0"),
        ("nvml = 1", "nvml = 1: must be true or false"),
        ('listen = "9464"', "is not ADDR:PORT"),
        ('listen = "127.0.0.1:70000"', "port 70000"),
        ('nfd_namespace = "kubernetes.io"', "must be a DNS subdomain"),
        ('log_format = "xml"', "log_format"),
        ("interval = ", "not valid TOML"),
    ],
)
def test_config_errors_name_the_key(tmp_path, text, message):
    f = tmp_path / "c.toml"
    f.write_text(text + "\n")
    with pytest.raises(ConfigError, match=message) as e:
        load(str(f))
    assert str(f) in str(e.value)


@pytest.mark.parametrize(
    "text, message",
    [
        ("interval = inf", "interval = inf: must be a finite number from 1 to 86400"),
        ("interval = nan", "interval = nan: must be a finite number"),
        ("scan_timeout = -inf", "scan_timeout = -inf: must be a finite number"),
        ("interval = 1e308", "interval = 1e\\+308: must be from 1 to 86400 seconds"),
        ("interval = 1e-9", "interval = 1e-09: must be from 1 to 86400 seconds"),
        ("scan_timeout = 99999999999999999999999999", "scan_timeout = a huge integer: must be from 1 to 86400"),
        ("interval = " + "9" * 5000, "a number too large to read"),
        ("x = " + "[" * 5000 + "]" * 5000, "nested too deeply"),
        ("link_window = 1e9", "link_window = 1e\\+09: must be from 1 to 604800 seconds"),
    ],
)
def test_nonfinite_config_refused(tmp_path, text, message):
    """inf, nan, 1e308, huge integers and deep nesting are one clear line, never an internal
    error, and an interval that would make the daemon spin is refused."""
    f = tmp_path / "c.toml"
    f.write_text(text + "\n")
    with pytest.raises(ConfigError, match=message):
        load(str(f))
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    with pytest.raises(ConfigError, match="command line: interval = inf"):
        load(str(empty), {"interval": float("inf")})


def test_flags_are_checked_like_the_file(tmp_path):
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    with pytest.raises(ConfigError, match="command line: interval"):
        load(str(empty), {"interval": 0.0})


@pytest.mark.parametrize("kind", ["fifo", "directory", "device"])
def test_a_config_that_is_not_a_regular_file_is_refused(tmp_path, kind):
    """A FIFO (which would hang a blocking read, or read as empty), a directory or a device
    given as the configuration is one clear line, never an empty configuration."""
    path = {"fifo": tmp_path / "c.toml", "directory": tmp_path, "device": Path("/dev/null")}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    kind_of = r"\((a FIFO|a directory|a character device)\)"
    with pytest.raises(
        ConfigError, match=f"^config {re.escape(str(path))}: not a regular file {kind_of}: not a configuration$"
    ):
        load(str(path))
    assert isinstance(ConfigError("x"), TopoagentError)


def test_the_config_file_is_read_once_per_load_with_its_provenance(tmp_path, monkeypatch):
    """A (re)load reads the file once; where each value came from is told from that read, so a
    file changed (or broken) since still explains the configuration the daemon runs."""
    f = tmp_path / "c.toml"
    f.write_text("interval = 5\n")
    reads: list[str] = []
    real = cfgmod._read_toml
    monkeypatch.setattr(cfgmod, "_read_toml", lambda path: reads.append(path) or real(path))
    reader = ConfigReader(str(f), {"link_window": 600.0, "root": None})
    config = reader.load()
    f.write_text("interval = [broken\n")  # changed under the daemon after the load
    prov = reader.explain()
    assert reads == [str(f)]
    assert config.interval == 5.0 and prov.sources["interval"] == "file"
    assert prov.sources["link_window"] == "flag" and prov.sources["root"] == "default"
    with pytest.raises(ConfigError, match="not valid TOML"):
        reader.load()
    assert reader.explain() is prov  # a failed reload keeps the running configuration's


@pytest.mark.parametrize(
    "text, want",
    [
        ("127.0.0.1:9464", ("127.0.0.1", 9464)),
        ("[::]:1", ("::", 1)),
        ("localhost:80", ("localhost", 80)),
        ("0.0.0.0:9464", ("0.0.0.0", 9464)),
    ],
)
def test_parse_listen(text, want):
    assert parse_listen(text) == want


@pytest.mark.parametrize("text", [":9464", "host", "[zz]:1", "h:0", "a b:1"])
def test_parse_listen_rejects(text):
    with pytest.raises(ValueError):
        parse_listen(text)


# -- sd_notify ------------------------------------------------------------------------------


def test_notify_abstract_socket_and_watchdog():
    name = f"topoagent-unit-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.bind("\0" + name)
        s.settimeout(2)
        n = Notifier({"NOTIFY_SOCKET": "@" + name, "WATCHDOG_USEC": "30000000"})
        assert n.enabled and n.watchdog_interval() == pytest.approx(10.0)
        assert n.ready("scan 1 ok:\n8 GPUs")
        assert s.recv(256) == b"READY=1\nSTATUS=scan 1 ok: 8 GPUs"  # one line per field
        assert n.watchdog() and s.recv(64) == b"WATCHDOG=1"
        assert n.stopping() and s.recv(64) == b"STOPPING=1\nSTATUS=stopping"
        n.close()


def test_notify_off_and_errors_never_raise(tmp_path):
    assert not Notifier({}).ready("x") and Notifier({}).watchdog_interval() is None
    n = Notifier(
        {"NOTIFY_SOCKET": str(tmp_path / "nobody"), "WATCHDOG_USEC": "1000000", "WATCHDOG_PID": str(os.getpid() + 1)}
    )
    assert n.watchdog_interval() is None  # the watchdog is another process's
    assert not n.status("x") and "nobody" in (n.last_error or "")


# -- logging ----------------------------------------------------------------------------------


def test_log_json_off_a_terminal_and_under_systemd():
    out = io.StringIO()
    make_logger("auto", out).warning("device_removed", subject="0000:c3:00.0")
    event = json.loads(out.getvalue())
    assert event["event"] == "device_removed" and event["level"] == "warning" and event["subject"] == "0000:c3:00.0"

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert not wants_json("auto", Tty(), {})
    assert wants_json("auto", Tty(), {"INVOCATION_ID": "abc"})
    assert wants_json("auto", Tty(), {"JOURNAL_STREAM": "8:123"})
    tty = Tty()
    make_logger(
        "auto",
        tty,
    ).info("scan_done", gpus=8)
    line = tty.getvalue()
    assert "scan_done" in line and "gpus=8" in line and not line.startswith("{")


# -- links judged over time ------------------------------------------------------------------

GPU0, NIC2 = "0000:1b:00.0", "0000:18:00.0"


def _links(result, **changes: LinkInfo) -> dict[str, LinkInfo]:
    out = {d.key: d.link for d in result.topology.devices}
    out.update({k.replace("_", ":").replace("x", "."): v for k, v in changes.items()})
    return out


def _watch(result) -> LinkWatch:
    w = LinkWatch(window=600)
    w.update_plan(result)
    return w


def test_watched_links_are_gpus_nics_nvswitches_and_their_bridges(dgx):
    links = watched_links(dgx)
    kinds = {w.kind for w in links.values()}
    assert kinds == {"gpu", "nic", "nvswitch", "bridge"}
    gpu = links[GPU0]
    assert gpu.gpu == GPU0 and gpu.max_gts == 32 and gpu.max_width == 16
    parent = links[dgx.device(GPU0).parent]  # the switch downstream port above gpu0: the same link
    assert parent.gpu == GPU0
    assert links[NIC2].gpu is None
    # A root port whose child tops out at x8 has an x8 link, not a degraded x16 one.
    assert links["0000:00:01.0"].max_width == 8


def _observe(
    w: LinkWatch,
    at: float,
    result,
    gpu0: LinkInfo | None = None,
    nic2: LinkInfo | None = None,
    loaded: bool | None = None,
) -> None:
    links = {d.key: d.link for d in result.topology.devices}
    if gpu0 is not None:
        links[GPU0] = gpu0
    if nic2 is not None:
        links[NIC2] = nic2
    w.observe(at, links, {GPU0: loaded})


def test_idle_gpu_downclocking_is_not_degraded(dgx):
    w = _watch(dgx)
    for t in range(5):
        _observe(w, t * 30, dgx, gpu0=LinkInfo(2.5, 16, 32.0, 16), loaded=False)
    j = w.judge()[GPU0]
    assert not j.degraded and not j.saw_load and j.current_gts == 2.5
    assert w.needs_sampling()  # it is below its maximum: keep looking


def test_gpu_below_max_under_load_is_degraded_unless_it_reached_max(dgx):
    w = _watch(dgx)
    _observe(w, 0, dgx, gpu0=LinkInfo(2.5, 16, 32.0, 16), loaded=False)
    _observe(w, 30, dgx, gpu0=LinkInfo(16.0, 16, 32.0, 16), loaded=True)
    j = w.judge()[GPU0]
    assert j.degraded and j.reason == "16 of 32 GT/s under load" and j.max_seen_gts == 16
    # The downstream port above it reports the same link and follows the GPU's rules.
    port = dgx.device(GPU0).parent
    assert not w.judge()[port].degraded  # its own reading (from the scan) is at full speed
    # Once it reaches 32 GT/s inside the window, it is not stuck low.
    _observe(w, 60, dgx, gpu0=LinkInfo(32.0, 16, 32.0, 16), loaded=True)
    _observe(w, 90, dgx, gpu0=LinkInfo(2.5, 16, 32.0, 16), loaded=False)
    assert not w.judge()[GPU0].degraded
    assert w.judge()[GPU0].max_seen_gts == 32
    # ... until that reading leaves the window and load is seen again below the maximum.
    _observe(w, 1000, dgx, gpu0=LinkInfo(16.0, 16, 32.0, 16), loaded=True)
    assert w.judge()[GPU0].degraded


def test_gpu_width_below_max_is_degraded_without_load(dgx):
    w = _watch(dgx)
    _observe(w, 0, dgx, gpu0=LinkInfo(2.5, 8, 32.0, 16), loaded=None)
    j = w.judge()[GPU0]
    assert j.degraded and j.reason == "x8 of x16"


def test_a_gpu_retrained_narrower_is_one_verdict_in_every_output(dgx):
    """Issue 32 item 11: a GPU retrained to x8 raised LINK_WIDTH_DEGRADED (in the log and the NFD
    file's worst severity) while /metrics said topoagent_pcie_link_degraded 0 and NFD
    pcie.degraded-links=false for up to the link window, because it had been at x16 inside
    the window.  The scan's finding, the metric and the NFD label now say the same at once."""
    from prometheus_client.parser import text_string_to_metric_families

    from topoagent.features.daemon.exports import nfd_features
    from topoagent.features.daemon.metrics import render_text

    snap = dgx.snapshot
    x8 = analyse(
        msgspec.structs.replace(
            snap,
            pci=tuple(
                msgspec.structs.replace(f, link=msgspec.structs.replace(f.link, current_width=8))
                if f.bdf in (GPU0, dgx.device(GPU0).parent)
                else f
                for f in snap.pci
            ),
        )
    )
    assert "LINK_WIDTH_DEGRADED" in {f.code for f in x8.findings if GPU0 in (x8.key(s) for s in f.subjects)}
    w = LinkWatch(3600)
    w.observe_result(0, dgx, {})  # at x16 an hour's window ago ...
    w.observe_result(60, x8, {})  # ... then retrained to x8, idle
    judged = w.judge()
    assert judged[GPU0].degraded and judged[GPU0].reason == "x8 of x16"
    status = _status(x8, judgements=FrozenMap(judged))
    fams = {f.name: f for f in text_string_to_metric_families(render_text(status).decode())}
    link = {s.labels["link"]: s.value for s in fams["topoagent_pcie_link_degraded"].samples}
    assert link[GPU0] == 1
    widths = {(s.labels["bdf"], s.labels["state"]): s.value for s in fams["topoagent_pcie_link_width"].samples}
    assert widths[(GPU0, "current")] == 8 and widths[(GPU0, "capability")] == 16 and widths[(GPU0, "max_seen")] == 16
    nfd = nfd_features(x8, degraded_links=bool(status.degraded))
    assert nfd["topoagent.pcie.degraded-links"] == "true" and nfd["topoagent.findings.worst"] != "none"


def test_nic_that_trains_low_is_degraded_at_once(dgx):
    w = _watch(dgx)
    _observe(w, 0, dgx, nic2=LinkInfo(16.0, 16, 32.0, 16))
    j = w.judge()[NIC2]
    assert j.degraded and j.reason == "16 of 32 GT/s"
    _observe(w, 30, dgx, nic2=LinkInfo(32.0, 16, 32.0, 16))
    assert not w.judge()[NIC2].degraded
    assert not w.needs_sampling()  # nothing on a GPU link is below its maximum


@pytest.mark.parametrize("machine", MACHINES)
def test_one_reading_agrees_with_the_link_findings(fixture_root, machine):
    """From a single scan, the watch flags what the link findings call a fault (warning), and
    the port at the other end of each such link; not capped slots (info), not idle GPUs."""
    r = scan(fixture_root(machine), nvml="off")
    w = LinkWatch(600)
    w.observe_result(0, r, {})
    bad = {k for k, j in w.judge().items() if j.degraded}
    faults = {
        r.key(s)
        for f in r.findings
        if f.code in ("LINK_WIDTH_DEGRADED", "LINK_SPEED_DEGRADED") and f.severity.label == "warning"
        for s in f.subjects
    }
    assert {k for k in bad if r.device(k).kind.value != "bridge"} == faults
    assert {k for k in bad if r.device(k).kind.value == "bridge"} == {r.device(k).parent for k in faults}


def test_faulty_node_links(fixture_root):
    r = scan(fixture_root("faulty-gpu-node"), nvml="off")
    w = LinkWatch(600)
    w.observe_result(0, r, {})
    assert {k: j.reason for k, j in w.judge().items() if j.degraded} == {
        "0000:3f:00.0": "x8 of x16",
        "0000:40:00.0": "x8 of x16",  # a GPU at x8, and its port
        "0000:99:03.0": "16 of 32 GT/s",
        "0000:9d:00.0": "16 of 32 GT/s",  # a NIC at Gen4, and its port
    }


def test_load_probe_falls_back_to_rail_nic_traffic(dgx, monkeypatch):
    import psutil

    netdevs = rail_netdevs(dgx)
    assert netdevs[GPU0] and all(netdevs.values())
    nic = netdevs[GPU0][0]
    counters = {"value": 0}

    class C:
        def __init__(self, n: int) -> None:
            self.bytes_sent, self.bytes_recv = n, 0

    monkeypatch.setattr(psutil, "net_io_counters", lambda pernic: {nic: C(counters["value"])})
    probe = LoadProbe(use_nvml=False, log=make_logger("json", io.StringIO()))
    assert probe.sample(0.0, netdevs)[GPU0] is None  # no rate from one reading
    counters["value"] = 10**9
    busy = probe.sample(1.0, netdevs)
    assert busy[GPU0] is True and busy["0000:43:00.0"] is None  # gpu1's NIC is not in the counters
    counters["value"] += 1000
    assert probe.sample(2.0, netdevs)[GPU0] is False


# -- metrics ----------------------------------------------------------------------------------


def _status(result, **kw) -> Status:
    """One good scan's status, as tests/daemon_helpers.scraped_status gives it, with one export
    written, eight GPUs expected and no audit unless ``kw`` says otherwise."""
    from tests.daemon_helpers import scraped_status

    base = {"exports": FrozenMap({"state": True}), "expected_gpus": 8}
    return scraped_status(result, audited=False, **{**base, **kw})


@pytest.mark.parametrize("machine", MACHINES)
def test_metrics_of_every_fixture_parse_and_are_unique(fixture_root, machine):
    from prometheus_client.parser import text_string_to_metric_families

    from topoagent.features.daemon.metrics import ALWAYS, METRICS, SCANNED, render_text

    r = scan(fixture_root(machine), nvml="off")
    text = render_text(_status(r)).decode()
    seen = set()
    values = []
    series = 0
    table = {m.name: m.when for m in METRICS}
    served = set()
    for fam in text_string_to_metric_families(text):
        assert fam.name.startswith("topoagent_")
        assert fam.name in table, f"{fam.name} is not in docs/daemon.md's table (METRICS)"
        served.update([fam.name] if fam.samples else [])
        for s in fam.samples:
            ident = (s.name, tuple(sorted(s.labels.items())))
            assert ident not in seen, ident
            seen.add(ident)
            values.append((*ident, s.value))
            series += 1
            for k, v in s.labels.items():
                assert "cpu" not in k and "irq" not in k
                if k in ("bdf", "gpu_bdf", "nic_bdf"):
                    assert v.count(":") == 2 and "." in v
    assert series < 50 * len(r.topology.devices) + 50  # per device, not per CPU
    names = {s[0] for s in seen}
    assert {"topoagent_devices", "topoagent_findings", "topoagent_scan_success"} <= names
    # what the table says every scanned host serves, each scanned host serves
    assert {name for name, when in table.items() if when in (ALWAYS, SCANNED)} <= served
    # One series per finding at warning or above (issue 40: the series budget), so counting them
    # per severity is topoagent_findings; info findings are counted there only.
    findings = [dict(labels) for name, labels in seen if name == "topoagent_finding"]
    paged = [f for f in r.findings if f.severity >= Severity.WARNING]
    assert sorted(f["code"] for f in findings) == sorted(f.code for f in paged)
    counts = {dict(labels)["severity"]: value for name, labels, value in values if name == "topoagent_findings"}
    for severity in ("warning", "critical"):
        assert counts[severity] == sum(1 for f in findings if f["severity"] == severity)
    assert counts["info"] == sum(1 for f in r.findings if f.severity is Severity.INFO)


def test_the_metric_table_is_the_generated_one():
    """Fails when METRICS changed and docs/daemon.md was not regenerated."""
    from topoagent.features.daemon.metrics import with_table

    page = (REPO / "docs" / "daemon.md").read_text()
    assert page == with_table(page), "run python -m topoagent.features.daemon.metrics"


def test_metrics_export_each_source_duration(dgx):
    """The seconds ScanResult.timings holds per source (and for the analysis) are a gauge per
    source, as node_exporter's node_scrape_collector_duration_seconds{collector}."""
    import shutil
    import subprocess

    from prometheus_client.parser import text_string_to_metric_families

    from topoagent.features.daemon.metrics import render_text

    assert set(dgx.timings) >= {"sysfs", "analyse"}  # the scan timed its steps
    text = render_text(_status(dgx)).decode()
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    fam = fams["topoagent_source_duration_seconds"]
    assert fam.type == "gauge"
    assert {s.labels["source"]: s.value for s in fam.samples} == dict(dgx.timings)
    assert all(s.value > 0 for s in fam.samples)
    if shutil.which("promtool"):
        checked = subprocess.run(
            ["promtool", "check", "metrics"], input=text, capture_output=True, text=True, check=False, timeout=60
        )
        assert checked.returncode == 0, checked.stdout + checked.stderr


def _with_aer(result, bdf: str, **counts):
    """``result`` analysed again with the AER totals of function ``bdf`` replaced."""
    snap = result.snapshot
    pci = tuple(
        msgspec.structs.replace(f, aer=msgspec.structs.replace(f.aer, **counts)) if f.bdf == bdf and f.aer else f
        for f in snap.pci
    )
    return analyse(msgspec.structs.replace(snap, pci=pci))


def test_aer_counters_the_host_sum_always_and_a_function_once_it_has_counted(dgx):
    """A counter that appears at its first error is no increase to Prometheus (increase() needs
    two samples of one series): the host's sum per severity is exported from the first scan, 0
    included, and a function's own series only once it has counted (the series budget: a DGX
    has ~100 functions with AER files, 3 counters each)."""
    from prometheus_client.parser import text_string_to_metric_families

    from topoagent.features.daemon.metrics import render_text

    def families(result):
        text = render_text(_status(result)).decode()
        return {f.name: f for f in text_string_to_metric_families(text)}

    fams = families(dgx)
    host = {
        s.labels["severity"]: s.value
        for s in fams["topoagent_host_pcie_aer_errors"].samples
        if s.name.endswith("_total")
    }
    assert host == {"fatal": 0, "nonfatal": 0, "correctable": 0}
    assert fams["topoagent_pcie_aer_errors"].type == "counter" and fams["topoagent_pcie_aer_errors"].samples == []
    fams = families(_with_aer(dgx, NIC2, fatal=3, correctable=5))
    host = {
        s.labels["severity"]: s.value
        for s in fams["topoagent_host_pcie_aer_errors"].samples
        if s.name.endswith("_total")
    }
    assert host == {"fatal": 3, "nonfatal": 0, "correctable": 5}
    own = {(s.labels["bdf"], s.labels["severity"]): s.value for s in fams["topoagent_pcie_aer_errors"].samples}
    assert own == {(NIC2, "fatal"): 3, (NIC2, "correctable"): 5}


#: The most ``topoagent_*`` series one node may export (docs/daemon.md, "Series budget").
SERIES_BUDGET = 150

#: Fixtures with an NVML recording of their kind of host (NVLinks, fabric registration).
NVML_OF = {"dgx-h100": "hgx_h100_8gpu", "gb200-tray": "gb200_nvl72_tray"}


def _unprivileged(result):
    """``result`` as a scan without root reads the host: 64 bytes of each config space, no ACS."""
    from tests.fleet_hosts import _unprivileged as header_only

    return analyse(header_only(result.snapshot))


def _idle(result):
    """``result`` with every GPU's link downclocked to 2.5 GT/s, as an idle GPU's is."""
    gpus = {g.bdf for g in result.topology.gpus}
    pci = tuple(
        msgspec.structs.replace(f, link=msgspec.structs.replace(f.link, current_gts=2.5)) if f.bdf in gpus else f
        for f in result.snapshot.pci
    )
    return analyse(msgspec.structs.replace(result.snapshot, pci=pci))


def _series(result) -> list:
    from tests.daemon_helpers import scrape

    return [(s.name, tuple(sorted(s.labels.items()))) for s in scrape(result)]


@pytest.mark.parametrize("machine", machine_names())
def test_every_fixture_stays_within_the_series_budget(fixture_root, machine):
    """Issue 40 item 4: at most 150 series per node on every fixture, healthy and faulty, scanned
    with root and without (where a finding per bridge, ACS_UNKNOWN, was one series each: 182-188)
    and with NVML where a recording fits, as the daemon serves them (every export, the audit's
    per-GPU families); and none whose existence depends on load: an idle GPU's downclocked link
    changes values, never the series (an info finding per idle GPU came and went with load)."""
    r = scan(fixture_root(machine), nvml="off")
    nvml = [scan(fixture_root(machine), nvml=make_fake(NVML_OF[machine]))] if machine in NVML_OF else []
    for variant in (r, _unprivileged(r), *nvml):
        names = _series(variant)
        assert len(names) == len(set(names))
        assert len(names) <= SERIES_BUDGET, (len(names), Counter(name for name, _ in names).most_common(4))
    if r.topology.gpus:
        assert set(_series(_idle(r))) == set(_series(analyse(r.snapshot)))  # (no timings either)


def test_a_dgx_exports_one_degraded_series_per_link(dgx):
    """Issue 32 item 9: a DGX-class node exported 961-1,044 series, 88 % of them per-function
    link width/speed and AER counters: one ``topoagent_pcie_link_degraded`` per physical link."""
    names = _series(dgx)
    links = len({w.link for w in watched_links(dgx).values()})
    assert sum(1 for name, _ in names if name == "topoagent_pcie_link_degraded") == links


def test_metrics_before_the_first_scan_and_after_failures(dgx):
    from prometheus_client.parser import text_string_to_metric_families

    from topoagent.features.daemon.metrics import render_text

    empty = {f.name: f for f in text_string_to_metric_families(render_text(Status(started_at=0.0)).decode())}
    assert "topoagent_build_info" in empty and "topoagent_devices" not in empty
    # Issue 32 item 12: /metrics answered before the first scan with no topoagent_scan_success,
    # so a first scan that never ends raised no alert: it says 0 until one succeeds.
    assert [s.value for s in empty["topoagent_scan_success"].samples] == [0]
    failed = _status(dgx, last=Attempt(2.0, False, 120.0, "timed out"), scans_total=3, failures_total=2)
    fams = {f.name: f for f in text_string_to_metric_families(render_text(failed).decode())}
    assert fams["topoagent_scan_success"].samples[0].value == 0
    assert fams["topoagent_scan_failures"].samples[0].name == "topoagent_scan_failures_total"
    assert fams["topoagent_scan_failures"].samples[0].value == 2
    gpus = [s for s in fams["topoagent_devices"].samples if s.labels["kind"] == "gpu"]
    assert gpus[0].value == 8  # the last good result is still what is served


# -- exports -----------------------------------------------------------------------------------


def test_atomic_write_rewrites_only_on_change(tmp_path):
    p = tmp_path / "f"
    assert atomic_write(str(p), b"one")
    inode = p.stat().st_ino
    assert not atomic_write(str(p), b"one") and p.stat().st_ino == inode
    assert atomic_write(str(p), b"two") and p.read_bytes() == b"two" and p.stat().st_ino != inode
    assert os.listdir(tmp_path) == ["f"]
    with pytest.raises(OSError):
        atomic_write(str(tmp_path / "absent" / "f"), b"x")


def test_exporter_reports_an_unwritable_path_once(tmp_path):
    out = io.StringIO()
    e = Exporter(make_logger("json", out))
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    for _ in range(3):
        assert not e.write("textfile", str(blocked / "topoagent.prom"), b"x")
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [ev["event"] for ev in events] == ["export_failed"]
    assert not e.status["textfile"].ok and "Not a directory" in e.status["textfile"].error
    assert e.write("textfile", str(tmp_path / "topoagent.prom"), b"x")
    assert e.status["textfile"].ok


@contextlib.contextmanager
def unwritable(directory: Path):
    """``directory`` made unwritable for this process: mode 0555, or for root (who ignores
    modes) the immutable attribute; skips where neither works."""
    if os.geteuid() != 0:
        directory.chmod(0o555)
        try:
            yield
        finally:
            directory.chmod(0o755)
        return
    if (
        shutil.which("chattr") is None
        or subprocess.run(["chattr", "+i", str(directory)], check=False, capture_output=True).returncode != 0
    ):
        pytest.skip("cannot make a directory unwritable for root here (chattr +i)")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(directory)], check=True)


def test_an_unchanged_export_in_an_unwritable_directory_fails(tmp_path):
    """The content did not change, so nothing is written -- yet the directory went read-only:
    the export is reported failed on this write, not only when its content next changes."""
    out = io.StringIO()
    e = Exporter(make_logger("json", out))
    path = str(tmp_path / "topoagent")
    assert e.write("nfd", path, b"x") and e.status["nfd"].ok
    with unwritable(tmp_path):
        assert not e.write("nfd", path, b"x")
        assert not e.status["nfd"].ok
    assert not e.write("nfd", path, b"x") and e.status["nfd"].ok  # writable again, same content
    assert [json.loads(line)["event"] for line in out.getvalue().splitlines()] == ["export_failed", "export_recovered"]


@pytest.mark.parametrize("machine", MACHINES)
def test_nfd_features_are_valid_for_every_fixture(fixture_root, machine):
    r = scan(fixture_root(machine), nvml="off")
    for degraded in (False, True):
        features = nfd_features(r, degraded_links=degraded)
        # hw-class, fingerprint, nvswitch.count, platform.kind, gpu.usable-count and unknown included;
        # platform.acs-ok on a platform
        assert len(features) == 15 + (r.topology.platform.kind is not None)
        text = render_nfd(features, "feature.node.kubernetes.io")
        assert len(text.encode()) < 64 * 1024
        assert len(text.splitlines()) > 1
        for line in text.splitlines()[1:]:
            name, _, value = line.partition("=")
            assert valid_nfd_name(name) and valid_nfd_value(value), line
            assert len(name.rpartition("/")[2]) <= 63 and len(value) <= 63


def test_nfd_features_say_what_matters(fixture_root, dgx):
    f = nfd_features(dgx, degraded_links=False)
    assert f["topoagent.gpu.count"] == "8" and f["topoagent.gdr.ready"] == "true"
    none = nfd_features(scan(fixture_root("no-gpu"), nvml="off"), degraded_links=False)
    assert none["topoagent.gpu.count"] == "0" and none["topoagent.gdr.ready"] == "false"
    assert none["topoagent.gpu.numa-nodes"] == "none" and none["topoagent.rail.worst-path"] == "none"
    wrong = scan(fixture_root("wrong-socket-nic"), nvml="off")
    assert nfd_features(wrong, degraded_links=False)["topoagent.rail.worst-path"] in ("SYS", "NODE", "PHB")
    unpriv = nfd_features(scan(fixture_root("unprivileged"), nvml="off"), degraded_links=False)
    assert unpriv["topoagent.acs.blocking"] == "unknown"


@pytest.mark.parametrize("machine", ["unprivileged", "dgx-h100-faults"])
def test_gdr_ready_only_where_proven(fixture_root, machine):
    """Issue 31 item 15: gdr.ready=true stood beside acs.blocking=unknown (ACS unread) and beside
    a GPU fallen off the bus; a pod selecting it landed on a node that cannot do GPUDirect."""
    result = scan(fixture_root(machine), nvml="off")
    codes = {f.code for f in result.findings}
    assert codes & {"ACS_UNKNOWN", "FELL_OFF_BUS"}
    assert nfd_features(result, degraded_links=False)["topoagent.gdr.ready"] == "false"


@pytest.mark.parametrize(
    "value, ok",
    [
        ("true", True),
        ("0_1", True),
        ("PIX", True),
        ("a" * 63, True),
        ("a" * 64, False),
        ("0-55,112-167", False),
        ("-x", False),
        ("x.", False),
        ("", False),
        ("true\n", False),  # `$` matches before a final newline: a full match only
    ],
)
def test_nfd_value_rule(value, ok):
    assert valid_nfd_value(value) is ok


def test_state_document_is_the_contract_plus_daemon_fields(dgx):
    import jsonschema

    from topoagent.features.daemon.exports import state_document

    doc = state_document(
        dgx, scanned_at=0.0, duration=0.25, changes=[{"kind": "device_added"}], daemon={"scans_total": 1}
    )
    schema = json.loads((REPO / "topoagent/schema/scan.schema.json").read_text())
    jsonschema.validate(doc, schema)
    assert doc["scanned_at"] == "1970-01-01T00:00:00Z" and doc["scan_duration_seconds"] == 0.25
    assert doc["changes"] == [{"kind": "device_added"}] and doc["daemon"] == {"scans_total": 1}
    assert list(doc)[:2] == ["schema_version", "tool"]


def test_config_is_a_value():
    c = Config(state_dir="/s")
    with pytest.raises(AttributeError):
        c.interval = 1  # type: ignore[misc]


# -- deploy/ ------------------------------------------------------------------------------------


def test_alert_rules_use_only_metrics_the_daemon_exports(dgx):
    from prometheus_client.parser import text_string_to_metric_families

    from topoagent.features.audit.advise import advise
    from topoagent.features.audit.facts import AuditFacts
    from topoagent.features.daemon.metrics import render_text

    text = (REPO / "deploy/prometheus/topoagent-rules.yml").read_text()
    # (not the names of recording rules: level:metric:operations, whose metric part is a record's)
    used = set(re.findall(r"(?<![:\w])topoagent_[a-z_]+", text))
    audit = advise(dgx, AuditFacts(source="fd"))  # the per-GPU audit families, with no process
    counted = _with_aer(dgx, NIC2, correctable=5)  # a function's own AER series exists once it counted
    fams = list(text_string_to_metric_families(render_text(_status(counted, audit=audit)).decode()))
    exported = {f.name for f in fams} | {s.name for f in fams for s in f.samples}
    assert used and used <= exported, used - exported
    for alert in (
        "TopoagentGpuMissing",
        "TopoagentNvswitchMissing",
        "TopoagentRailCrossesSockets",
        "TopoagentPcieLinkDegraded",
        "TopoagentScanFailing",
        "TopoagentProcessMisplaced",
    ):
        assert f"alert: {alert}" in text


def test_daemonset_manifest():
    text = (REPO / "deploy/kubernetes/topoagent-daemonset.yaml").read_text()
    try:
        import yaml
    except ImportError:
        yaml = None
    if yaml is not None:
        ds = yaml.safe_load(text)
        assert ds["kind"] == "DaemonSet"
        pod = ds["spec"]["template"]["spec"]
        c = pod["containers"][0]
        mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
        assert mounts["/sys"]["readOnly"] is True
        assert "/etc/kubernetes/node-feature-discovery/features.d" in mounts
        assert c["ports"][0]["containerPort"] == 9464
        assert c["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["SYS_ADMIN"]}
    # Without PyYAML, the same facts from the text.
    assert "kind: DaemonSet" in text and "\t" not in text
    assert re.search(r"mountPath: /sys\n\s+readOnly: true", text)
    assert "path: /etc/kubernetes/node-feature-discovery/features.d" in text
    assert "containerPort: 9464" in text and "--nfd-dir=/etc/kubernetes/node-feature-discovery/features.d" in text
    assert 'add: ["SYS_ADMIN"]' in text


def test_the_config_file_type_names_every_key():
    """The TOML is decoded into ConfigFile (unknown keys refused by msgspec): it must know every
    key of Config, and the error table (KEYS) every one too."""
    assert cfgmod.ConfigFile.__struct_fields__ == Config.__struct_fields__ == tuple(cfgmod.KEYS)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("recent_changes = 1.5", "recent_changes = 1.5: must be an integer 0-10000"),
        ("udev = 'no'", "udev = 'no': must be true or false"),
    ],
)
def test_a_value_of_the_wrong_type_is_one_line_naming_the_key(tmp_path, text, message):
    path = tmp_path / "c.toml"
    path.write_text(text + "\n")
    with pytest.raises(ConfigError, match=message) as e:
        load(str(path))
    assert "\n" not in str(e.value) and isinstance(e.value, TopoagentError)
