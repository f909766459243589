"""Run host tools (``nvidia-smi``, ``lspci``) safely and capture what they print.

Arguments are a list, never a shell string; the program is looked up with :func:`shutil.which`
first; output is decoded as UTF-8 with replacement characters; ``LC_ALL=C`` keeps the text in
the format the parsers know.  A tool that is missing, hangs or fails gives a
:class:`ToolResult` whose ``error`` says so in one line: never an exception.  A hung tool's
whole process group is killed at the timeout, so a wedged ``nvidia-smi`` cannot stall a scan.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Mapping, Sequence

import msgspec

from topoagent.core.errors import TopoagentError
from topoagent.core.parse.lspci_verbose import parse_lspci_verbose
from topoagent.core.parse.nvsmi_topo import parse_topo_matrix
from topoagent.core.read import Collection
from topoagent.core.snapshot import SourceStatus

DEFAULT_TIMEOUT = 10.0
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
) -> ToolResult:
    """Run ``argv`` (no shell) with a time limit and return what it printed.

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
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        try:
            out, err = proc.communicate(timeout=_REAP_TIMEOUT)
        except subprocess.TimeoutExpired:
            # Still holding the pipes (a child outside the group, or stuck in the kernel):
            # give up on its output rather than hang the scan.
            out, err = b"", b""
        return ToolResult(args, None, _decode(out), _decode(err), f"timed out after {_seconds(timeout)}")
    except BaseException:
        _kill_group(proc)
        proc.wait()
        raise

    stdout, stderr = _decode(out), _decode(err)
    error = None if proc.returncode == 0 else _exit_error(proc.returncode, stdout, stderr)
    return ToolResult(args, proc.returncode, stdout, stderr, error)


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
