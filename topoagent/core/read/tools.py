"""Run host tools (``nvidia-smi``, ``lspci``) safely and capture what they print.

Arguments are a list, never a shell string; the program is looked up with :func:`shutil.which`
first; output is decoded as UTF-8 with replacement characters; ``LC_ALL=C`` keeps the text in
the format the parsers know.  A tool that is missing, hangs or fails gives a
:class:`ToolResult` whose ``error`` says so in one line: never an exception.  Both its time and
its output are bounded: at the timeout, or once it has printed more than ``limit`` bytes, its
whole process group is killed, so a wedged ``nvidia-smi`` cannot stall a scan and a tool that
floods its output cannot fill memory (a ``scontrol`` printing without end once drove a
health check to 15 GB).
"""

from __future__ import annotations

import os
import selectors
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence

import msgspec

from topoagent.core.errors import TopoagentError
from topoagent.core.parse.lspci_verbose import parse_lspci_verbose
from topoagent.core.parse.nvsmi_topo import parse_topo_matrix
from topoagent.core.read import Collection
from topoagent.core.snapshot import SourceStatus

DEFAULT_TIMEOUT = 10.0
#: What a tool may print, stdout and stderr together, before it is stopped: ``lspci -vvv`` of a
#: host with thousands of functions is a few MiB.
DEFAULT_LIMIT = 32 * 1024 * 1024
#: How long to wait for a killed tool to go away before giving up on it.
_REAP_TIMEOUT = 2.0


class ToolResult(msgspec.Struct, frozen=True):
    """What one run of a tool gave.

    ``error`` is None when the tool ran and exited 0; otherwise one line: ``not installed``,
    ``timed out after 10 s``, ``exit status 255: <first line of its complaint>``,
    ``killed by signal 9 (SIGKILL)``, ``could not run: <reason>``.  ``returncode`` is None when
    the tool never finished (not installed, could not start, timed out).
    """

    argv: tuple[str, ...]
    returncode: int | None
    stdout: str
    stderr: str
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the tool ran and exited 0."""
        return self.error is None


def _decode(data: bytes | None) -> str:
    return data.decode("utf-8", errors="replace") if data else ""


def _first_line(*texts: str) -> str | None:
    for text in texts:
        for line in text.splitlines():
            if line.strip():
                return line.strip()
    return None


def _size(limit: int) -> str:
    return f"{limit // (1024 * 1024)} MiB" if limit >= 1024 * 1024 else f"{limit // 1024} KiB"


def _seconds(timeout: float) -> str:
    return f"{timeout:g} s"


def _exit_error(returncode: int, stdout: str, stderr: str) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "unknown signal"
        return f"killed by signal {-returncode} ({name})"
    # nvidia-smi prints its complaints on stdout ("NVIDIA-SMI has failed because ..."), so
    # fall back to stdout when stderr is empty.
    why = _first_line(stderr, stdout)
    return f"exit status {returncode}: {why}" if why else f"exit status {returncode}"


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            proc.kill()
        except ProcessLookupError:
            pass


def run_tool(
    argv: Sequence[str],
    *,
    timeout: float = DEFAULT_TIMEOUT,
    env: Mapping[str, str] | None = None,
    limit: int = DEFAULT_LIMIT,
) -> ToolResult:
    """Run ``argv`` (no shell) with a time limit and an output limit; return what it printed.

    ``env`` replaces the inherited environment (``os.environ`` when None); ``LC_ALL=C`` is set
    in either case.  The program is searched on that environment's ``PATH``.
    """
    if isinstance(argv, (str, bytes)) or not argv:
        raise ValueError("argv must be a non-empty sequence of arguments, not a string")
    args = tuple(str(a) for a in argv)
    run_env = dict(os.environ if env is None else env)
    run_env["LC_ALL"] = "C"

    program = shutil.which(args[0], path=run_env.get("PATH", os.defpath))
    if program is None:
        return ToolResult(args, None, "", "", "not installed")

    try:
        proc = subprocess.Popen(
            [program, *args[1:]],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=run_env,
            close_fds=True,
            start_new_session=True,  # its own process group, so a timeout kills the lot
        )
    except OSError as exc:
        return ToolResult(args, None, "", "", f"could not run: {exc.strerror or exc}")

    try:
        out, err, stopped = _bounded_output(proc, timeout, limit)
    except BaseException:
        _kill_group(proc)
        proc.wait()
        raise
    if stopped is not None:
        _kill_group(proc)
        try:
            proc.wait(timeout=_REAP_TIMEOUT)
        except subprocess.TimeoutExpired:
            pass  # stuck in the kernel: give up on it rather than hang the scan
        return ToolResult(args, None, _decode(out), _decode(err), stopped)

    stdout, stderr = _decode(out), _decode(err)
    error = None if proc.returncode == 0 else _exit_error(proc.returncode, stdout, stderr)
    return ToolResult(args, proc.returncode, stdout, stderr, error)


def _bounded_output(proc: subprocess.Popen[bytes], timeout: float, limit: int) -> tuple[bytes, bytes, str | None]:
    """Read the tool's stdout and stderr until it closes both and exits, at most ``limit``
    bytes in all and for at most ``timeout`` seconds; the bytes, and why it was stopped (None
    when it finished by itself)."""
    assert proc.stdout is not None and proc.stderr is not None
    deadline = time.monotonic() + timeout
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    chunks: dict[int, list[bytes]] = {out_fd: [], err_fd: []}
    total, stopped = 0, None
    with selectors.DefaultSelector() as sel:
        for stream in (proc.stdout, proc.stderr):
            sel.register(stream, selectors.EVENT_READ)
        while sel.get_map() and stopped is None:
            left = deadline - time.monotonic()
            if left <= 0:
                stopped = f"timed out after {_seconds(timeout)}"
                break
            for key, _ in sel.select(left):
                data = os.read(key.fd, 1 << 16)
                if not data:
                    sel.unregister(key.fileobj)
                    continue
                chunks[key.fd].append(data)
                total += len(data)
                if total > limit:
                    stopped = f"printed more than {_size(limit)}: stopped"
    if stopped is None:
        try:
            proc.wait(timeout=max(deadline - time.monotonic(), 0.001))
        except subprocess.TimeoutExpired:
            stopped = f"timed out after {_seconds(timeout)}"
    proc.stdout.close()
    proc.stderr.close()
    return b"".join(chunks[out_fd]), b"".join(chunks[err_fd]), stopped


def nvidia_smi_topo(*, timeout: float = DEFAULT_TIMEOUT) -> ToolResult:
    """``nvidia-smi topo -m``: the GPU/NIC path-class matrix, CPU and NUMA affinity."""
    return run_tool(["nvidia-smi", "topo", "-m"], timeout=timeout)


def lspci_tree(*, timeout: float = DEFAULT_TIMEOUT) -> ToolResult:
    """``lspci -t -v -nn -D``: the bus tree with names and ``[vendor:device]`` ids.

    The tree always labels root buses ``[dddd:bb]`` with their domain (pciutils ls-tree.c);
    ``-D`` is passed anyway so the intent is plain.  ``-nn`` adds numeric ids to the names.
    """
    return run_tool(["lspci", "-t", "-v", "-nn", "-D"], timeout=timeout)


def lspci_verbose(*, timeout: float = DEFAULT_TIMEOUT) -> ToolResult:
    """``lspci -D -vvv -nn``: every function with domain, numeric ids, capabilities and ACS.

    Without root, lspci cannot read extended config space and says ``<access denied>``; the
    parser must treat what it cannot see as unknown.
    """
    return run_tool(["lspci", "-D", "-vvv", "-nn"], timeout=timeout)


#: The tools a cross-check runs, their parsers, and the view each parsed output becomes.
_CROSS_CHECKS = (
    ("nvidia-smi", nvidia_smi_topo, parse_topo_matrix),
    ("lspci", lspci_verbose, parse_lspci_verbose),
)


def collect(c: Collection) -> None:
    """Run ``nvidia-smi topo -m`` and ``lspci -vvv`` on this host for a cross-check.

    Each tool adds a source status (``ok``, ``unavailable`` when missing or failing, ``error``
    when its output cannot be read) and, when read, its parsed output to ``c.views``; the
    analysis compares those views with the scan (:func:`topoagent.core.findings.crosscheck.compare`).
    """
    snap = c.require_snapshot()
    runners = c.inputs.runners or {}
    statuses = []
    for name, default_run, parse in _CROSS_CHECKS:
        out = runners[name]() if name in runners else default_run(timeout=c.inputs.tool_timeout)
        command = " ".join(out.argv)
        if out.error is not None:
            statuses.append(SourceStatus(name, "unavailable", f"{command}: {out.error}"))
            continue
        try:
            c.views[name] = parse(out.stdout)
        except TopoagentError as exc:
            statuses.append(SourceStatus(name, "error", f"{command}: {exc}"))
            continue
        statuses.append(SourceStatus(name, "ok", f"cross-checked: {command}"))
    c.snapshot = msgspec.structs.replace(snap, sources=snap.sources + tuple(statuses))
