"""The daemon loop: scan, diff, log, export; wait for the timer, a hotplug event or a signal.

One thread owns all state.  It sleeps in ``select`` on a self-pipe (signals and finished jobs
write a byte to it) and the udev monitor's socket, with a timeout to the next deadline (timer
scan, debounced hotplug scan, link sample, watchdog ping), so an idle daemon costs nothing.

Scans and link samples run in a worker thread, one at a time, so a scan that hangs in a
kernel read cannot stop the loop: after ``scan_timeout`` it is abandoned (a thread cannot be
killed; it is left to finish or not), logged and counted as failed, and the last good state
keeps being served.  While an abandoned scan is still stuck no new one is started: each timer
tick counts another failure instead of piling up threads.

Signals: SIGHUP reloads the configuration and rescans; SIGTERM and SIGINT stop the loop (the
HTTP server stops within its half-second poll), well inside two seconds.
"""

from __future__ import annotations

import errno
import os
import queue
import selectors
import signal
import threading
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

import msgspec
from prometheus_client.exposition import choose_encoder

from topoagent.core.api import run
from topoagent.core.errors import TopoagentError
from topoagent.core.frozen import FrozenMap
from topoagent.core.inputs import NVML_AUTO, NVML_OFF, Inputs
from topoagent.core.read.archive import resolve_root
from topoagent.core.read.expectation import load_expectation
from topoagent.core.read.pci import read_links
from topoagent.core.result import ScanResult, with_expected, with_findings
from topoagent.core.snapshot import LinkInfo
from topoagent.features.audit.advise import AuditReport
from topoagent.features.audit.read import audit_host
from topoagent.features.daemon import http
from topoagent.features.daemon.changes import ScanChange, device_faults, diff, link_verdict_changes
from topoagent.features.daemon.clock import Clock, SystemClock
from topoagent.features.daemon.config import Config, ConfigError, Provenance, changed_keys
from topoagent.features.daemon.exports import (
    EXPECTED_FILE,
    NFD_FILE,
    STATE_FILE,
    TEXTFILE,
    Exporter,
    ExportError,
    iso_time,
    nfd_expiry,
    nfd_features,
    read_count,
    render_nfd,
    state_document,
)
from topoagent.features.daemon.identity import recall_identity
from topoagent.features.daemon.labels import pin_names
from topoagent.features.daemon.linkwatch import LinkWatch, rail_netdevs
from topoagent.features.daemon.load import LoadProbe
from topoagent.features.daemon.lock import AlreadyRunning, LockRefused, StateLock
from topoagent.features.daemon.log import log_change, make_logger
from topoagent.features.daemon.metrics import make_registry, render_text
from topoagent.features.daemon.notify import Notifier
from topoagent.features.daemon.status import Attempt, Status
from topoagent.features.daemon.udev import UdevWatch
from topoagent.features.draw import html as draw_html

__all__ = ["Daemon", "SetupError", "default_audit", "default_sample", "default_scan"]

#: A burst of hotplug events is waited out for ``debounce`` seconds, but never longer than this.
MAX_DEBOUNCE = 30.0


class SetupError(TopoagentError):
    """The daemon cannot start (port taken, state directory locked): one line, exit 2."""


def default_scan(config: Config) -> ScanResult:
    """The one orchestration, with the inputs a daemon has: a root (a directory or a capture
    archive, read into memory at each scan and named by its own path), and NVML on or off."""
    result = run(Inputs(root=resolve_root(config.root), nvml=NVML_AUTO if config.nvml else NVML_OFF))
    if config.expect:
        # Read at each scan: a new baseline dropped in place counts from the next scan; one
        # that cannot be read fails the scan, with the reason, like any other scan error.
        result = with_expected(result, load_expectation(config.expect))
    return result


def default_audit(config: Config, result: ScanResult) -> AuditReport | None:
    """The processes using each GPU and how they are placed (``topoagent audit``), where the
    configuration asks for it: NVML's running processes on the live host, else open device
    nodes below the root."""
    if not config.audit:
        return None
    ask = config.live and config.nvml
    why = None if ask else ("not asked (nvml = false)" if config.live else "not asked (not the live host)")
    return audit_host(result, resolve_root(config.root), ask_nvml=ask, why_not=why)


def default_sample(config: Config) -> dict[str, LinkInfo]:
    """Every PCI function's link now, by stable key (BDF), and nothing else."""
    return read_links(resolve_root(config.root))


class _Job:
    def __init__(
        self,
        ident: int,
        kind: str,
        trigger: str,
        fn: Callable[[], Any],
        done: queue.SimpleQueue[Any],
        wake: Callable[[], None],
        clock: Clock,
    ) -> None:
        self.ident, self.kind, self.trigger = ident, kind, trigger
        self.started = clock.monotonic()
        self.started_wall = clock.time()

        def work() -> None:
            try:
                out: tuple[str, Any] = ("ok", fn())
            except BaseException as exc:  # noqa: BLE001 - reported, never fatal: this is the point of the worker
                out = ("error", exc)
            done.put((ident, out))
            wake()

        self.thread = threading.Thread(target=work, name=f"topoagent-{kind}", daemon=True)
        self.thread.start()


class Daemon:
    """The agent as a service.  ``run()`` blocks until stopped and returns the exit status.

    ``scan``, ``sample`` and ``reload`` are the daemon's edges (the orchestration, a link
    reading, the configuration); None means :func:`default_scan` and :func:`default_sample`.
    ``clock`` (``monotonic()``, ``time()``, ``wait(selector, timeout)``) is where the loop
    reads the time and waits; None means :class:`~topoagent.features.daemon.clock.SystemClock`.
    ``explain`` says where the values of the configuration (re)loaded came from
    (:func:`topoagent.features.daemon.config.provenance`), for the ``config`` event.
    """

    def __init__(
        self,
        config: Config,
        *,
        log: Any = None,
        notifier: Notifier | None = None,
        scan: Callable[[Config], ScanResult] | None = None,
        sample: Callable[[Config], Mapping[str, LinkInfo]] | None = None,
        audit: Callable[[Config, ScanResult], AuditReport | None] | None = None,
        reload: Callable[[], Config] | None = None,
        install_signals: bool = True,
        clock: Clock | None = None,
        explain: Callable[[], Provenance] | None = None,
    ) -> None:
        self.config = config
        self.clock: Clock = clock if clock is not None else SystemClock()
        self._explain_fn = explain
        self.log = log if log is not None else make_logger(config.log_format)
        self.notifier = notifier if notifier is not None else Notifier()
        self._scan_fn = scan if scan is not None else default_scan
        self._sample_fn = sample if sample is not None else default_sample
        self._audit_fn = audit if audit is not None else default_audit
        self._reload_fn = reload
        self._install_signals = install_signals
        self.status = Status(started_at=self.clock.time(), interval=config.interval)
        #: The most physical GPUs seen (the known-good count), as kept in the state directory.
        self._most_gpus = read_count(os.path.join(config.state_dir, EXPECTED_FILE))
        self.linkwatch = LinkWatch(config.link_window)
        self.exporter = Exporter(self.log)
        self.recent: deque[dict[str, Any]] = deque(maxlen=config.recent_changes)
        self._load = LoadProbe(config.nvml, self.log) if config.live else None
        self._load_lock = threading.Lock()
        self._done: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._signals: deque[int] = deque()  # signal numbers, handled by the loop
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._stopping = False
        self._job: _Job | None = None
        self._job_ids = 0
        self._hung: _Job | None = None
        self._scan_due: float | None = None
        self._scan_trigger = "start"
        self._burst_started: float | None = None
        self._sample_due: float | None = None
        self._watchdog_due: float | None = None
        self._ready = False
        self._registry: Any = None
        self._html_cache: tuple[int, str] | None = None
        self._http: Any = None
        self._udev: Any = None
        self._lock: Any = None

    # -- public controls (any thread) -----------------------------------------------------------
    def wake(self) -> None:
        """Wake the loop now (safe from any thread)."""
        try:
            os.write(self._wake_w, b"!")
        except OSError:
            pass  # pipe full: the loop is awake anyway

    def request_stop(self) -> None:
        """Ask the loop to stop, as SIGTERM does (safe from any thread)."""
        self._signals.append(signal.SIGTERM)
        self.wake()

    def request_reload(self) -> None:
        """Ask the loop to reload its configuration, as SIGHUP does (safe from any thread)."""
        self._signals.append(signal.SIGHUP)
        self.wake()

    # -- the HTTP app ---------------------------------------------------------------------------
    def metrics(self, accept: str | None) -> tuple[bytes, str]:
        """The metrics in the exposition format the ``Accept`` header asks for, and its content type."""
        encoder, ctype = choose_encoder(accept or "")
        return encoder(self._registry), ctype

    def html(self) -> str | None:
        """The topology page (``draw --format html``) of the last good scan, made once per scan."""
        result = self.status.result
        if result is None:
            return None
        cached = self._html_cache
        if cached is not None and cached[0] == id(result):
            return cached[1]
        page = draw_html.render(result)
        self._html_cache = (id(result), page)
        return page

    # -- start and stop -------------------------------------------------------------------------
    def _setup(self) -> None:
        cfg = self.config
        lock = StateLock(cfg.state_dir)
        try:
            lock.acquire()
            self._lock = lock
        except (AlreadyRunning, LockRefused) as exc:
            raise SetupError(str(exc)) from None
        except OSError as exc:
            # Not fatal (an unwritable state directory is reported like any export path), but
            # then nothing stops a second daemon on this directory: say so.
            self.log.warning("state_lock_unavailable", path=lock.path, error=exc.strerror or str(exc))
        self._registry = make_registry(lambda: self.status, process=True)
        host, port = cfg.address
        try:
            self._http = http.start((host, port), self, self.log)
        except OSError as exc:
            self._release()
            raise SetupError(
                f"cannot listen on {cfg.listen}: {exc.strerror or exc}"
                + (" (another topoagent daemon?)" if exc.errno == errno.EADDRINUSE else "")
            ) from None
        self._udev = UdevWatch.open(self.log, live=cfg.live, enabled=cfg.udev)
        self.log.info(
            "started",
            listen=cfg.listen,
            root=cfg.root,
            state_dir=cfg.state_dir,
            nfd_dir=cfg.nfd_dir,
            textfile_dir=cfg.textfile_dir,
            interval=cfg.interval,
            pid=os.getpid(),
            watchdog=self.notifier.watchdog_interval(),
        )
        self._log_config()

    def _release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def _teardown(self) -> None:
        self.notifier.stopping()
        if self._http is not None:
            self._http.stop()
        if self._udev is not None:
            self._udev.close()
        if self._load is not None:
            self._load.close()
        self._release()
        self.notifier.close()
        self.log.info("stopped", scans=self.status.scans_total, failures=self.status.failures_total)

    def _on_signal(self, signum: int, _frame: Any) -> None:
        self._signals.append(signum)
        self.wake()

    # -- the loop -------------------------------------------------------------------------------
    def run(self) -> int:
        """Set up, loop until SIGTERM/SIGINT (or :meth:`request_stop`), tear down; 0."""
        self._setup()
        previous: dict[int, Any] = {}
        if self._install_signals:
            for sig in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, self._on_signal)
        sel = selectors.DefaultSelector()
        try:
            sel.register(self._wake_r, selectors.EVENT_READ, "wake")
            if self._udev is not None:
                sel.register(self._udev.fileno(), selectors.EVENT_READ, "udev")
            interval = self.notifier.watchdog_interval()
            clock = self.clock
            self._watchdog_due = clock.monotonic() + interval if interval else None
            self._schedule_scan(clock.monotonic(), "start")
            while not self._stopping:
                self._tick(clock.monotonic())
                if self._stopping:
                    break
                for key, _ in clock.wait(sel, self._timeout(clock.monotonic())):
                    if key.data == "wake":
                        self._drain_wake()
                    elif key.data == "udev":
                        self._on_udev(clock.monotonic())
        finally:
            sel.close()
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            self._teardown()
        return 0

    def _timeout(self, now: float) -> float | None:
        if self._job is not None:
            # A due scan or sample waits for the running job, whose end wakes the loop.
            deadlines = [self._job.started + self.config.scan_timeout]
        else:
            deadlines = [d for d in (self._scan_due, self._sample_due) if d is not None]
        if self._watchdog_due is not None:
            deadlines.append(self._watchdog_due)
        return max(0.0, min(deadlines) - now) if deadlines else None

    def _drain_wake(self) -> None:
        try:
            while os.read(self._wake_r, 4096):
                pass
        except BlockingIOError:
            pass

    def _tick(self, now: float) -> None:
        while self._signals:
            sig = self._signals.popleft()
            if sig == signal.SIGHUP:
                self._reload(now)
            else:
                self.log.info("stopping", signal=signal.Signals(sig).name)
                self._stopping = True
                return
        self._collect_jobs()
        if self._job is not None and now - self._job.started > self.config.scan_timeout:
            self._abandon(now)
        if self._watchdog_due is not None and now >= self._watchdog_due:
            self.notifier.watchdog()
            interval = self.notifier.watchdog_interval() or 1.0
            self._watchdog_due = max(self._watchdog_due + interval, now + interval / 2)
        if self._job is None and self._scan_due is not None and now >= self._scan_due:
            self._start_scan()
        if self._job is None and self._sample_due is not None and now >= self._sample_due:
            self._start_sample()

    # -- scheduling -----------------------------------------------------------------------------
    def _schedule_scan(self, at: float, trigger: str) -> None:
        if self._scan_due is None or at < self._scan_due:
            self._scan_due, self._scan_trigger = at, trigger

    def _on_udev(self, now: float) -> None:
        events = self._udev.drain()
        if not events:
            return
        self.log.info("udev_events", count=len(events), events=[f"{a} {s} {n}" for a, s, n in events[:5]])
        # Debounce: wait for the burst to end, but not past MAX_DEBOUNCE from its first event.
        if self._burst_started is None:
            self._burst_started = now
        at = min(now + self.config.debounce, self._burst_started + MAX_DEBOUNCE)
        if self._scan_trigger == "udev" and self._scan_due is not None:
            self._scan_due = at  # push the pending hotplug scan back
        else:
            self._schedule_scan(at, "udev")

    def _reload(self, now: float) -> None:
        self.log.info("reload", reason="SIGHUP")
        if self._reload_fn is not None:
            try:
                new = self._reload_fn()
            except ConfigError as exc:
                self.log.error("config_reload_failed", error=str(exc), keeping="the running configuration")
                new = self.config
            fixed = [k for k in ("listen", "state_dir") if getattr(new, k) != getattr(self.config, k)]
            if fixed:
                self.log.warning("config_needs_restart", keys=fixed, keeping=[getattr(self.config, k) for k in fixed])
                new = msgspec.structs.replace(new, listen=self.config.listen, state_dir=self.config.state_dir)
            if new.log_format != self.config.log_format:
                self.log = self.exporter.log = make_logger(new.log_format)
            changed = changed_keys(self.config, new)
            self.config = new
            self._log_config(changed)
            self.linkwatch.window = new.link_window
            if self.recent.maxlen != new.recent_changes:
                self.recent = deque(self.recent, maxlen=new.recent_changes)
        self._schedule_scan(now, "sighup")

    def _log_config(self, changed: Mapping[str, Any] | None = None) -> None:
        """The ``config`` event: every effective value and where it came from (default, file,
        flag), a warning for each flag that overrides the file, and on a reload what changed."""
        prov = None
        if self._explain_fn is not None:
            try:
                prov = self._explain_fn()
            except ConfigError as exc:  # the file changed under us: the values are still right
                self.log.warning("config_sources_unknown", error=str(exc))
        for key, file_value in (prov.shadowed if prov is not None else {}).items():
            if file_value != getattr(self.config, key):
                self.log.warning("config_flag_overrides_file", key=key, flag=getattr(self.config, key), file=file_value)
        fields: dict[str, Any] = {"settings": msgspec.structs.asdict(self.config)}
        if prov is not None:
            fields["sources"] = prov.sources
        if changed is not None:
            fields["changed"] = changed
        self.log.info("config", when="reload" if changed is not None else "start", **fields)

    # -- jobs -----------------------------------------------------------------------------------
    def _new_job(self, kind: str, trigger: str, fn: Callable[[], Any]) -> _Job:
        self._job_ids += 1
        return _Job(self._job_ids, kind, trigger, fn, self._done, self.wake, self.clock)

    def _start_scan(self) -> None:
        trigger = self._scan_trigger
        self._scan_due = None
        self._burst_started = None
        if self._hung is not None and self._hung.thread.is_alive():
            now = self.clock.time()
            error = f"the scan started {now - self._hung.started_wall:.0f} s ago is still hung"
            self._failed(Attempt(now, False, 0.0, error, trigger))
            return
        self._hung = None
        cfg = self.config

        def work() -> tuple[ScanResult, dict[str, bool | None], AuditReport | None]:
            result = self._scan_fn(cfg)
            return result, self._sample_load(result), self._audit(cfg, result)

        self._job = self._new_job("scan", trigger, work)

    def _start_sample(self) -> None:
        self._sample_due = None
        cfg, result = self.config, self.status.result

        def work() -> tuple[Mapping[str, LinkInfo], dict[str, bool | None]]:
            return self._sample_fn(cfg), self._sample_load(result)

        self._job = self._new_job("sample", "timer", work)

    def _audit(self, cfg: Config, result: ScanResult) -> AuditReport | None:
        """The audit of the processes using the GPUs; None (and a warning) where it failed: a
        process audit that breaks never costs the scan."""
        try:
            return self._audit_fn(cfg, result)
        except Exception as exc:  # noqa: BLE001 - the scan stands; the audit's metrics go stale, the log says why
            self.log.warning("audit_failed", error=_describe(exc))
            return None

    def _sample_load(self, result: ScanResult | None) -> dict[str, bool | None]:
        if self._load is None or result is None:
            return {}
        with self._load_lock:
            return self._load.sample(self.clock.monotonic(), rail_netdevs(result))

    def _abandon(self, now: float) -> None:
        job = self._job
        assert job is not None
        self._job = None
        if job.kind == "scan":
            self._hung = job
            error = f"timed out after {self.config.scan_timeout:g} s"
            self._failed(Attempt(job.started_wall, False, now - job.started, error, job.trigger))
        else:
            self.log.warning("link_sample_timeout", timeout=self.config.scan_timeout)
            self._schedule_sample(now)

    def _collect_jobs(self) -> None:
        while True:
            try:
                ident, (outcome, value) = self._done.get_nowait()
            except queue.Empty:
                return
            job = self._job
            if job is None or job.ident != ident:
                continue  # an abandoned job finished late: its news is stale
            self._job = None
            duration = self.clock.monotonic() - job.started
            if job.kind == "scan":
                if outcome == "ok":
                    result, load, audit = value
                    self._scanned(result, load, Attempt(job.started_wall, True, duration, None, job.trigger), audit)
                else:
                    self._failed(Attempt(job.started_wall, False, duration, _describe(value), job.trigger))
            elif outcome == "ok":
                links, load = value
                self._sampled(links, load)
            else:
                self.log.warning("link_sample_failed", error=_describe(value))
                self._schedule_sample(self.clock.monotonic())

    # -- outcomes -------------------------------------------------------------------------------
    def _judge(self) -> tuple[FrozenMap[str, Any], tuple[ScanChange, ...]]:
        old = self.status.judgements
        new = self.linkwatch.judge()
        before = {k: (j.kind, j.reason or "") for k, j in old.items() if j.degraded}
        after = {k: (j.kind, j.reason or "") for k, j in new.items() if j.degraded}
        return FrozenMap(new), link_verdict_changes(before, after)

    def _record(self, changes: tuple[ScanChange, ...]) -> None:
        at = iso_time(self.clock.time())
        for c in changes:
            log_change(self.log, c)
            self.recent.append({"at": at, **c.as_dict()})

    def _scanned(
        self, result: ScanResult, load: dict[str, bool | None], attempt: Attempt, audit: AuditReport | None = None
    ) -> None:
        first = self.status.result is None
        result = recall_identity(self.status.result, result)
        if audit is not None:  # one result: every view of its findings carries the audit's too
            result = with_findings(result, audit.findings)
        changes = diff(self.status.result, result)
        self.linkwatch.observe_result(self.clock.time(), result, load)
        judgements, link_changes = self._judge()
        if first:
            link_changes = ()  # the first scan is the baseline: its state is logged below, not as changes
            changes = device_faults(None, result)  # but the faults it finds are logged as events
        changes += link_changes
        self._record(changes)
        st = self.status
        new = msgspec.structs.replace(
            st,
            result=result,
            good_at=attempt.at,
            good_duration=attempt.duration,
            last=attempt,
            scans_total=st.scans_total + 1,
            changes_total=st.changes_total + len(changes),
            judgements=judgements,
            names=pin_names(st.names, result.topology.devices),
            audit=audit,
        )
        topo = result.topology
        worst = result.worst()
        self.log.info(
            "scan_done",
            trigger=attempt.trigger,
            seconds=round(attempt.duration, 3),
            devices=len(topo.devices),
            gpus=len(topo.gpus),
            nics=len(topo.nics),
            findings=len(result.findings),
            worst=worst.label if worst is not None else None,
            changes=len(changes),
            degraded_links=list(new.degraded),
        )
        self._after_attempt(
            new,
            f"{len(topo.gpus)} GPUs, {len(topo.nics)} NICs, {len(result.findings)} findings, {len(changes)} changes",
        )

    def _failed(self, attempt: Attempt) -> None:
        st = self.status
        new = msgspec.structs.replace(
            st, last=attempt, scans_total=st.scans_total + 1, failures_total=st.failures_total + 1
        )
        self.log.error(
            "scan_failed",
            trigger=attempt.trigger,
            error=attempt.error,
            seconds=round(attempt.duration, 3),
            failures=new.failures_total,
            serving="the last good scan" if st.result is not None else "no scan yet",
        )
        self._after_attempt(
            new,
            f"scan failed ({attempt.error}); "
            + ("serving the last good scan" if st.result is not None else "no good scan yet"),
        )

    def _after_attempt(self, status: Status, summary: str) -> None:
        """Write the exports of a new status, then publish it (so /metrics never runs ahead of
        the files), schedule what comes next and tell systemd."""
        self.status = self._export(status)
        self._html_cache = None
        now = self.clock.monotonic()
        self._schedule_scan(now + self.config.interval, "timer")
        self._schedule_sample(now)
        attempt = status.last
        assert attempt is not None
        text = f"scan {status.scans_total} {'ok' if attempt.success else 'failed'} ({attempt.trigger}): {summary}"
        if not self._ready:
            self._ready = True
            self.notifier.ready(text)
        else:
            self.notifier.status(text)

    def _schedule_sample(self, now: float) -> None:
        if self.linkwatch.needs_sampling():
            if self._sample_due is None:
                self._sample_due = now + self.config.link_sample_interval
        else:
            self._sample_due = None

    def _sampled(self, links: Mapping[str, LinkInfo], load: dict[str, bool | None]) -> None:
        self.linkwatch.observe(self.clock.time(), links, load)
        judgements, changes = self._judge()
        self._record(changes)
        st = self.status
        new = msgspec.structs.replace(st, judgements=judgements, changes_total=st.changes_total + len(changes))
        self.status = self._export(new) if changes else new
        self._schedule_sample(self.clock.monotonic())

    # -- exports --------------------------------------------------------------------------------
    @staticmethod
    def _daemon_section(st: Status) -> dict[str, Any]:
        last = st.last
        return {
            "started_at": iso_time(st.started_at),
            "last_scan": None
            if last is None
            else {
                "at": iso_time(last.at),
                "success": last.success,
                "trigger": last.trigger,
                "duration_seconds": round(last.duration, 6),
                "error": last.error,
            },
            "scans_total": st.scans_total,
            "scan_failures_total": st.failures_total,
            "links": [j.as_dict() for j in st.judgements.values()],
        }

    def _export(self, st: Status) -> Status:
        """Write every configured export of ``st``; ``st`` with the exports' outcomes."""
        cfg = self.config
        st = msgspec.structs.replace(st, interval=cfg.interval, expected_gpus=self._expected_gpus(st))
        if st.result is not None:
            doc = state_document(
                st.result,
                scanned_at=st.good_at or 0.0,
                duration=st.good_duration or 0.0,
                changes=list(self.recent),
                daemon=self._daemon_section(st),
            )
            self.exporter.write_json("state", os.path.join(cfg.state_dir, STATE_FILE), doc)
            if cfg.nfd_dir:
                scan_ok = st.last is None or st.last.success
                features = nfd_features(st.result, degraded_links=bool(st.degraded), scan_ok=scan_ok)
                expires = nfd_expiry(st.good_at or self.clock.time(), cfg.interval, cfg.scan_timeout)
                path = os.path.join(cfg.nfd_dir, NFD_FILE)
                try:
                    text = render_nfd(features, cfg.nfd_namespace, expires)
                except ExportError as exc:  # NFD would refuse the file: reported like a failed write
                    self.exporter.fail("nfd", path, str(exc))
                else:
                    self.exporter.write("nfd", path, text.encode())
        st = self._with_exports(st)
        if cfg.textfile_dir:
            self.exporter.write("textfile", os.path.join(cfg.textfile_dir, TEXTFILE), render_text(st))
            st = self._with_exports(st)
        return st

    def _expected_gpus(self, st: Status) -> int | None:
        """``expected_gpus`` from the configuration, else the most physical GPUs ever seen (a
        new maximum is written to the state directory, so a restart does not forget a lost GPU)."""
        if st.result is None:
            return self.config.expected_gpus if self.config.expected_gpus is not None else self._most_gpus
        seen = sum(1 for g in st.result.topology.gpus if not g.is_vf)
        if self._most_gpus is None or seen > self._most_gpus:
            self._most_gpus = seen
            self.exporter.write("expected", os.path.join(self.config.state_dir, EXPECTED_FILE), f"{seen}\n".encode())
        return self.config.expected_gpus if self.config.expected_gpus is not None else self._most_gpus

    def _with_exports(self, st: Status) -> Status:
        return msgspec.structs.replace(
            st, exports=FrozenMap({n: s.ok for n, s in sorted(self.exporter.status.items())})
        )


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
