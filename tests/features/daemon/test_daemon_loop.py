"""The daemon loop in-process, with its edges replaced: scans that raise, unwritable exports,
config reloads, link samples, and an HTTP endpoint facing malformed, slow and too many clients."""

from __future__ import annotations

import http.client
import io
import json
import os
import socket
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import msgspec
import pytest

from tests.daemon_helpers import quiet_config
from topoagent.core.api import scan
from topoagent.core.snapshot import LinkInfo
from topoagent.features.daemon import http as daemon_http
from topoagent.features.daemon.config import Config, ConfigError
from topoagent.features.daemon.log import make_logger
from topoagent.features.daemon.loop import Daemon
from topoagent.features.daemon.notify import Notifier

pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families

GPU0 = "0000:1b:00.0"


def wait_for(pred, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.02)


class ManualClock:
    """The daemon's clock for tests: its time moves only when the test calls :meth:`advance`.

    The loop still waits for real on its file descriptors (finished jobs, udev, stop and
    reload requests); a deadline in the future (timer, debounce, link sample, scan timeout)
    passes only when the test advances the clock past it, so nothing waits in real time.
    """

    def __init__(self) -> None:
        self.now = 1000.0
        self.wake = lambda: None  # the daemon's wake(), set by Running
        self._cond = threading.Condition()
        self._waiting_at: float | None = None

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return 1_700_000_000.0 + self.now

    def wait(self, selector, timeout: float | None) -> list:
        if timeout == 0:
            return selector.select(0)
        with self._cond:
            self._waiting_at = self.now
            self._cond.notify_all()
        try:
            return selector.select(None)  # woken by an fd, or by advance() through the wake pipe
        finally:
            with self._cond:
                self._waiting_at = None

    def advance(self, seconds: float) -> None:
        with self._cond:
            self.now += seconds
        self.wake()

    def idle(self) -> bool:
        """Whether the loop is waiting again, having seen the current time."""
        return self._waiting_at == self.now


class Running:
    """A Daemon run in a thread (no signal handlers) on a :class:`ManualClock`, its log
    captured as JSON lines."""

    def __init__(self, config: Config, **kw) -> None:
        self.out = io.StringIO()
        self.clock = ManualClock()
        self.daemon = Daemon(
            config,
            log=make_logger("json", self.out),
            notifier=Notifier({}),
            install_signals=False,
            clock=self.clock,
            **kw,
        )
        self.clock.wake = self.daemon.wake
        self.thread = threading.Thread(target=self.daemon.run, daemon=True)
        self.thread.start()
        self.url = f"http://{config.listen}"

    def scans(self, n: int) -> None:
        wait_for(lambda: self.daemon.status.scans_total >= n)

    def settle(self) -> None:
        """Until the loop has done all it had to (no job in flight) and waits on the clock."""
        wait_for(lambda: self.daemon._job is None and self.clock.idle())

    def advance(self, seconds: float) -> None:
        """Move the daemon's clock on and let the loop act on it."""
        self.settle()
        self.clock.advance(seconds)
        self.settle()

    def events(self) -> list[dict]:
        return [json.loads(line) for line in self.out.getvalue().splitlines()]

    def metrics(self) -> dict[str, list]:
        with urllib.request.urlopen(self.url + "/metrics", timeout=5) as r:
            return {f.name: f.samples for f in text_string_to_metric_families(r.read().decode())}

    def stop(self) -> None:
        self.daemon.request_stop()
        self.thread.join(timeout=5)
        assert not self.thread.is_alive()


@pytest.fixture(scope="module")
def dgx(fixture_root):
    return scan(fixture_root("dgx-h100"), nvml="off")


@pytest.fixture
def config(tmp_path, fixture_root) -> Config:
    return quiet_config(fixture_root("dgx-h100"), tmp_path)


def one(fams, name, **labels) -> float:
    family = name.removesuffix("_total")
    hits = [s.value for s in fams[family] if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(hits) == 1, (name, hits)
    return hits[0]


def test_a_scan_that_raises_is_counted_and_the_last_good_state_served(config, dgx):
    calls = []

    def flaky(cfg: Config):
        calls.append(cfg)
        if len(calls) == 2:
            raise OSError(5, "Input/output error")
        return dgx

    from tests.nfd_local import parse_feature_file, utc

    nfd = Path(config.nfd_dir) / "topoagent"
    d = Running(config, scan=flaky)
    try:
        d.scans(1)
        good_at = d.daemon.status.good_at
        first = nfd.read_text()
        d.daemon.request_reload()
        d.scans(2)
        # The failed scan: NFD labels say so, and still expire three intervals after the good one.
        text = nfd.read_text()
        assert text.splitlines()[0] == first.splitlines()[0]  # the same expiry-time
        labels, errors = parse_feature_file(text, utc(good_at + 60))
        assert not errors and labels["feature.node.kubernetes.io/topoagent.scan-ok"] == "false"
        assert parse_feature_file(text, utc(good_at + 3 * config.interval + config.scan_timeout + 1))[0] == {}
        fams = d.metrics()
        assert one(fams, "topoagent_scan_success") == 0
        assert one(fams, "topoagent_scan_failures_total") == 1
        assert one(fams, "topoagent_devices", kind="gpu") == 8
        failed = [e for e in d.events() if e["event"] == "scan_failed"]
        assert len(failed) == 1 and "Input/output error" in failed[0]["error"]
        assert failed[0]["serving"] == "the last good scan"
        state = json.loads((Path(config.state_dir) / "state.json").read_text())
        assert state["daemon"]["last_scan"]["success"] is False and state["daemon"]["scan_failures_total"] == 1
        d.daemon.request_reload()
        d.scans(3)
        assert one(d.metrics(), "topoagent_scan_success") == 1
        assert "topoagent.scan-ok=true" in nfd.read_text()
    finally:
        d.stop()


def test_first_scan_failing_still_serves_metrics(config):
    def broken(cfg: Config):
        raise RuntimeError("nothing to read")

    d = Running(config, scan=broken)
    try:
        d.scans(1)
        fams = d.metrics()
        assert one(fams, "topoagent_scan_success") == 0 and "topoagent_devices" not in fams
        assert not (Path(config.state_dir) / "state.json").exists()
    finally:
        d.stop()


def test_unwritable_exports_are_reported_not_fatal(config, dgx, tmp_path):
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("")
    cfg = msgspec.structs.replace(config, textfile_dir=str(blocked), nfd_dir=str(tmp_path / "absent"))
    d = Running(cfg, scan=lambda c: dgx)
    try:
        d.scans(1)
        d.daemon.request_reload()
        d.scans(2)
        fams = d.metrics()
        assert one(fams, "topoagent_export_ok", export="state") == 1
        assert one(fams, "topoagent_export_ok", export="nfd") == 0
        assert one(fams, "topoagent_export_ok", export="textfile") == 0
        failed = [(e["export"], e["error"]) for e in d.events() if e["event"] == "export_failed"]
        assert sorted(failed) == [("nfd", "No such file or directory"), ("textfile", "Not a directory")]  # once each
    finally:
        d.stop()


def test_an_nfd_file_over_the_limit_is_a_failed_export_not_a_crash(config, dgx, monkeypatch):
    from topoagent.features.daemon import exports

    monkeypatch.setattr(exports, "NFD_LIMIT", 100)  # NFD reads at most 64 kB; a tiny limit here
    d = Running(config, scan=lambda c: dgx)
    try:
        d.scans(1)
        d.daemon.request_reload()
        d.scans(2)
        assert d.thread.is_alive()
        fams = d.metrics()
        assert one(fams, "topoagent_export_ok", export="nfd") == 0
        assert one(fams, "topoagent_export_ok", export="state") == 1
        failed = [e for e in d.events() if e["event"] == "export_failed"]
        assert [(e["export"], e["error"]) for e in failed] == [("nfd", "NFD feature file would exceed 64 kB")]
    finally:
        d.stop()


def test_reload_applies_the_new_config_or_keeps_the_old(config, dgx, tmp_path):
    configs = [
        msgspec.structs.replace(config, interval=60.0, textfile_dir=str(tmp_path)),
        ConfigError("config /etc/topoagent/config.toml: unknown key 'x'"),
        msgspec.structs.replace(config, listen="127.0.0.1:1"),
    ]

    def reload() -> Config:
        c = configs.pop(0)
        if isinstance(c, Exception):
            raise c
        return c

    d = Running(config, scan=lambda c: dgx, reload=reload)
    try:
        d.scans(1)
        d.daemon.request_reload()
        d.scans(2)
        assert d.daemon.config.interval == 60.0 and (tmp_path / "topoagent.prom").exists()
        d.daemon.request_reload()
        d.scans(3)
        assert d.daemon.config.interval == 60.0  # a bad file changes nothing
        d.daemon.request_reload()
        d.scans(4)
        assert d.daemon.config.listen == config.listen  # needs a restart: kept, and said so
        names = [e["event"] for e in d.events()]
        assert "config_reload_failed" in names and "config_needs_restart" in names
    finally:
        d.stop()


def test_links_are_sampled_between_scans_while_a_gpu_link_is_low(config, dgx):
    low = {d.key: d.link for d in dgx.topology.devices}
    low[GPU0] = LinkInfo(2.5, 16, 32.0, 16)
    slow_gpu = msgspec.structs.replace(
        dgx,
        topology=msgspec.structs.replace(
            dgx.topology,
            devices=tuple(
                msgspec.structs.replace(d, link=low[GPU0]) if d.key == GPU0 else d for d in dgx.topology.devices
            ),
        ),
    )
    samples: list[float] = []
    d = None

    def sample(cfg: Config):
        samples.append(d.clock.now)
        return low

    d = Running(msgspec.structs.replace(config, link_sample_interval=10.0), scan=lambda c: slow_gpu, sample=sample)
    try:
        d.scans(1)
        d.advance(9.0)
        assert samples == []  # not before the interval
        for _ in range(3):
            d.advance(1.0)
            d.advance(9.0)
        assert samples == [1010.0, 1020.0, 1030.0]  # one sample per interval, while the link is low
        assert not d.daemon.status.judgements[GPU0].degraded  # idle: no load was ever seen
    finally:
        d.stop()
    # A healthy host is not sampled at all between scans.
    samples.clear()
    d = Running(msgspec.structs.replace(config, link_sample_interval=10.0), scan=lambda c: dgx, sample=sample)
    try:
        d.scans(1)
        d.advance(50.0)
        assert d.daemon.status.scans_total == 1 and samples == []
    finally:
        d.stop()


# -- HTTP ----------------------------------------------------------------------------------------


@pytest.fixture
def served(config, dgx, monkeypatch):
    monkeypatch.setattr(daemon_http._Handler, "timeout", 0.5)
    monkeypatch.setattr(daemon_http, "REQUEST_DEADLINE", 0.5)
    monkeypatch.setattr(daemon_http, "MAX_CONNECTIONS", 3)
    d = Running(config, scan=lambda c: dgx)
    d.scans(1)
    yield d
    d.stop()


def request(d: Running, method: str, path: str, timeout: float = 5) -> tuple[int, dict, bytes]:
    host, port = d.daemon.config.address
    c = http.client.HTTPConnection(host, port, timeout=timeout)
    c.request(method, path)
    r = c.getresponse()
    out = r.status, dict(r.getheaders()), r.read()
    c.close()
    return out


def test_only_metrics_and_read_only(served):
    status, headers, body = request(served, "GET", "/metrics?x=1")
    assert status == 200 and b"topoagent_devices" in body
    status, headers, body = request(served, "HEAD", "/metrics")
    assert status == 200 and int(headers["Content-Length"]) > 1000 and body == b""
    for path in ("/nope", "/metrics/", "/state.json", "/../etc/passwd"):
        assert request(served, "GET", path)[0] == 404, path
    for method in ("POST", "PUT", "DELETE"):
        status, headers, _ = request(served, method, "/metrics")
        assert status == 405 and headers["Allow"] == "GET, HEAD"
    # OpenMetrics when asked for.
    req = urllib.request.Request(served.url + "/metrics", headers={"Accept": "application/openmetrics-text"})
    with urllib.request.urlopen(req, timeout=5) as r:
        assert r.headers["Content-Type"].startswith("application/openmetrics-text")
        assert r.read().rstrip().endswith(b"# EOF")


def fake_page(result, **_) -> str:
    return f"<html><body>{len(result.topology.gpus)} GPUs</body></html>"


def test_root_serves_the_drawing_of_the_last_scan(served, monkeypatch):
    from topoagent.features.draw import html

    monkeypatch.setattr(html, "render", fake_page)
    status, headers, body = request(served, "GET", "/")
    assert (
        status == 200
        and headers["Content-Type"].startswith("text/html")
        and body == b"<html><body>8 GPUs</body></html>"
    )
    assert request(served, "HEAD", "/")[2] == b""


def test_malformed_slow_and_too_many_clients(served):
    host, port = served.daemon.config.address
    # Garbage instead of a request line: 400, and the server carries on.
    for garbage, answer in (
        (b"GET / HTTP/1.0 extra words\r\n\r\n", b"HTTP/1.0 400"),
        (b"GET / HTTP/7.1\r\n\r\n", b"HTTP/1.0 505"),
        (b"\x00\x01\xff / HTTP/1.0\r\n\r\n", b"HTTP/1.0 501"),
        (b"GET /metrics HTTP/1.0\r\n" + b"X: y\r\n" * 200 + b"\r\n", b"HTTP/1.0 431"),
    ):
        with socket.create_connection((host, port), timeout=5) as s:
            s.sendall(garbage)
            assert s.recv(100).startswith(answer), garbage
    with socket.create_connection((host, port), timeout=5) as s:
        s.sendall(b"GET /" + b"a" * 70000 + b" HTTP/1.0\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.0 414")
    # A slow client is dropped after the timeout (0.5 s here), having received nothing.
    slow = socket.create_connection((host, port), timeout=5)
    slow.sendall(b"GET /metr")
    start = time.monotonic()
    assert slow.recv(100) == b""
    assert time.monotonic() - start < 3
    slow.close()
    # Too many at once: the connection idle longest is closed to make room for the new one.
    idle = [socket.create_connection((host, port), timeout=5) for _ in range(3)]
    time.sleep(0.1)
    extra = socket.create_connection((host, port), timeout=5)
    assert idle[0].recv(100) == b""
    extra.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
    assert extra.recv(100).startswith(b"HTTP/1.0 200")
    extra.close()
    for s in idle:
        s.close()
    time.sleep(0.7)
    assert request(served, "GET", "/metrics")[0] == 200
    assert not [e for e in served.events() if e["event"] == "http_error"]


def test_request_deadline_is_for_the_whole_request(served):
    """A client sending a header line more often than the read timeout is still dropped once
    the whole request's deadline (0.5 s here) has passed."""
    host, port = served.daemon.config.address
    with socket.create_connection((host, port), timeout=5) as s:
        s.sendall(b"GET /metrics HTTP/1.0\r\n")
        dropped = False
        for _ in range(40):  # up to ~12 s of trickling
            time.sleep(0.3)
            try:
                s.sendall(b"X-Slow: 1\r\n")
            except OSError:
                dropped = True
                break
            s.settimeout(0.01)
            try:
                if s.recv(100) == b"":
                    dropped = True
                    break
            except TimeoutError:
                pass
            finally:
                s.settimeout(5)
        assert dropped


def test_slow_clients_scrape_answered(config, dgx):
    """200 idle or trickling clients (real sockets on 127.0.0.1) cannot starve a scrape: the
    pool closes the connection idle longest to make room.  The server accepts connections one
    at a time, so the scrape, queued behind 168 evictions, may wait for them on a loaded
    machine: it is given a minute, the test is whether it is answered, not how fast."""
    d = Running(config, scan=lambda c: dgx)
    clients = []
    try:
        d.scans(1)
        host, port = d.daemon.config.address
        for i in range(200):
            c = socket.create_connection((host, port), timeout=5)
            if i % 2:
                c.sendall(b"GET /metrics HTTP/1.0\r\nX-Slow: 1\r\n")
            clients.append(c)
        status, _, body = request(d, "GET", "/metrics", timeout=60)
        assert status == 200 and b"topoagent_devices" in body
    finally:
        for c in clients:
            c.close()
        d.stop()


class FakeUdev:
    """Stands in for the pyudev monitor: a pipe to wake the loop, events handed over by tests."""

    def __init__(self) -> None:
        self.r, self.w = os.pipe()
        self.pending: list[tuple[str, str, str]] = []

    def fileno(self) -> int:
        return self.r

    def emit(self, *events: tuple[str, str, str]) -> None:
        self.pending.extend(events)
        os.write(self.w, b"x")

    def drain(self) -> list[tuple[str, str, str]]:
        os.read(self.r, 4096)
        out, self.pending = self.pending, []
        return out

    def close(self) -> None:
        os.close(self.r)
        os.close(self.w)


def test_hotplug_bursts_are_debounced_into_one_scan(config, dgx, monkeypatch):
    from topoagent.features.daemon import udev

    fake = FakeUdev()
    monkeypatch.setattr(udev.UdevWatch, "open", classmethod(lambda cls, log, live, enabled=True: fake))
    d = Running(msgspec.structs.replace(config, debounce=3.0), scan=lambda c: dgx)
    try:
        d.scans(1)
        for i in range(5):  # a GPU being hot-added: a burst of events, each within the debounce
            fake.emit(("add", "pci", f"0000:c3:00.{i}"))
            wait_for(lambda: not fake.pending)
            d.advance(2.0)
        assert d.daemon.status.scans_total == 1  # 10 s of events, each pushing the scan back
        d.advance(1.0)  # 3 s after the last event
        d.scans(2)
        d.advance(60.0)
        assert d.daemon.status.scans_total == 2  # one scan for the whole burst
        assert d.daemon.status.last.trigger == "udev"
        logged = [e for e in d.events() if e["event"] == "udev_events"]
        assert sum(e["count"] for e in logged) == 5 and logged[0]["events"] == ["add pci 0000:c3:00.0"]
    finally:
        d.stop()


def test_a_long_burst_is_scanned_after_max_debounce(config, dgx, monkeypatch):
    from topoagent.features.daemon import udev
    from topoagent.features.daemon.loop import MAX_DEBOUNCE

    fake = FakeUdev()
    monkeypatch.setattr(udev.UdevWatch, "open", classmethod(lambda cls, log, live, enabled=True: fake))
    d = Running(msgspec.structs.replace(config, debounce=3.0), scan=lambda c: dgx)
    try:
        d.scans(1)
        start = d.clock.now
        while d.daemon.status.scans_total == 1:  # events every 2 s never let the burst end
            assert d.clock.now - start < MAX_DEBOUNCE + 3
            fake.emit(("change", "pci", "0000:c3:00.0"))
            wait_for(lambda: not fake.pending)
            d.advance(2.0)
        assert d.clock.now - start == MAX_DEBOUNCE  # scanned once the burst was 30 s old
        assert d.daemon.status.last.trigger == "udev"
    finally:
        d.stop()


def test_a_hung_scan_is_abandoned_after_the_timeout_and_not_piled_on(config, dgx):
    release = threading.Event()
    calls = []

    def scan_fn(cfg: Config):
        calls.append(cfg)
        if len(calls) == 2:
            release.wait(30)  # a read stuck in the kernel, until the test lets it go
        return dgx

    d = Running(config, scan=scan_fn)  # scan_timeout = 5 s
    try:
        d.scans(1)
        d.daemon.request_reload()
        wait_for(lambda: len(calls) == 2)
        d.clock.advance(4.9)
        wait_for(d.clock.idle)
        assert d.daemon.status.scans_total == 1  # not yet: still inside the timeout
        d.clock.advance(0.2)
        d.scans(2)
        last = d.daemon.status.last
        assert (last.success, last.error, last.trigger) == (False, "timed out after 5 s", "sighup")
        assert d.daemon.status.result is not None  # the last good scan is still served
        # While that scan is stuck, another is not started on top of it: counted instead.
        d.daemon.request_reload()
        d.scans(3)
        assert "still hung" in d.daemon.status.last.error and len(calls) == 2
        release.set()
        wait_for(lambda: d.daemon._hung is None or not d.daemon._hung.thread.is_alive())
        d.daemon.request_reload()
        d.scans(4)
        assert d.daemon.status.last.success and len(calls) == 3  # a late result was not taken as news
        assert d.daemon.status.failures_total == 2
    finally:
        release.set()
        d.stop()


def test_udev_says_once_why_it_is_off():
    from topoagent.features.daemon.udev import UdevWatch

    out = io.StringIO()
    log = make_logger("json", out)
    assert UdevWatch.open(log, live=False) is None
    assert UdevWatch.open(log, live=True, enabled=False) is None
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [e["event"] for e in events] == ["udev_disabled", "udev_disabled"]
    assert "--root" in events[0]["reason"] and "timer" in events[0]["reason"]


def test_udev_without_the_hosts_run_udev_says_so(tmp_path):
    """A container without /run/udev mounted: libudev's monitor would open and stay silent."""
    from topoagent.features.daemon.udev import UdevWatch

    out = io.StringIO()
    assert UdevWatch.open(make_logger("json", out), live=True, control=str(tmp_path / "control")) is None
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [e["event"] for e in events] == ["udev_unavailable"]
    assert "/run/udev" in events[0]["reason"] and "timer" in events[0]["reason"]


def test_real_udev_monitor_opens_and_never_blocks(tmp_path):
    from topoagent.features.daemon.udev import UdevWatch

    out = io.StringIO()
    control = tmp_path / "control"  # udevd's socket stands in: this test is about the monitor
    control.touch()
    watch = UdevWatch.open(make_logger("json", out), live=True, control=str(control))
    if watch is None:
        pytest.skip("no libudev/netlink here: " + out.getvalue().strip())
    try:
        assert watch.fileno() >= 0
        start = time.monotonic()
        assert isinstance(watch.drain(), list)
        assert time.monotonic() - start < 1
    finally:
        watch.close()
