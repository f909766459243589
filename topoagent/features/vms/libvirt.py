"""libvirt domain definitions: from ``virsh`` (a connection URI), or from the files libvirtd keeps.

Two ways in, one result (:class:`LibvirtRead`):

- **virsh**: ``virsh -c URI list --all --name`` for the names, ``list --name --state-running``
  and ``--state-shutoff`` for their states (``domstate`` for the rest), and
  ``dumpxml --inactive NAME`` for each persistent definition -- the one ``--apply`` edits
  and the next start uses.  Every run goes through :func:`topoagent.core.read.tools.run_tool`
  (no shell, a timeout).  The URI ``test:///path/node.xml`` is libvirt's built-in test driver:
  it needs no daemon, which is how the tests run on real libvirt.
- **files**: ``<root>/etc/libvirt/qemu/*.xml`` read through :class:`~topoagent.core.hostfs.HostFS`
  (the QEMU driver's persistent configs).  A domain is ``running`` when libvirtd's status file
  ``<root>/run/libvirt/qemu/NAME.xml`` or its ``NAME.pid`` exists, ``shut off`` when that
  directory exists without them, and ``unknown`` when there is no such directory to ask.

Also here: :func:`define_and_read_back` (``virsh define`` a file and read the stored definition
back in the same virsh session), the one write ``vms --apply``/``--undo`` make.
"""

from __future__ import annotations

import os
import shutil

import msgspec

from topoagent.core.errors import TopoagentError
from topoagent.core.hostfs import HostFS
from topoagent.core.read.tools import ToolResult, run_tool
from topoagent.core.tree import Root, is_this_host

__all__ = [
    "DEFAULT_URI",
    "DomainRecord",
    "LibvirtError",
    "LibvirtRead",
    "define_and_read_back",
    "domain_state",
    "dumpxml",
    "read_domains",
    "read_domains_from_files",
    "read_domains_with_virsh",
    "virsh_available",
]

DEFAULT_URI = "qemu:///system"
VIRSH_TIMEOUT = 30.0
QEMU_CONFIG_DIR = "etc/libvirt/qemu"
QEMU_RUN_DIR = "run/libvirt/qemu"


class LibvirtError(TopoagentError):
    """virsh failed, or a domain's definition could not be read."""


class DomainRecord(msgspec.Struct, frozen=True):
    """One domain: its state (``running``, ``shut off``, ``paused``…, ``unknown``), its XML
    and where the XML came from (for messages)."""

    name: str
    state: str
    xml: str
    origin: str


class LibvirtRead(msgspec.Struct, frozen=True):
    """What was read: the domains, the source (``virsh -c URI`` or the config directory), and
    what could not be read (one line each)."""

    domains: tuple[DomainRecord, ...]
    source: str
    errors: tuple[str, ...] = ()


def virsh_available() -> bool:
    """Whether ``virsh`` (Debian: libvirt-clients) is on the PATH."""
    return shutil.which("virsh") is not None


def _virsh(uri: str, *args: str, timeout: float = VIRSH_TIMEOUT) -> ToolResult:
    return run_tool(["virsh", "-q", "-c", uri, *args], timeout=timeout)


def _checked(out: ToolResult) -> str:
    if out.error is not None:
        raise LibvirtError(f"{' '.join(out.argv)}: {out.error}")
    return out.stdout


def _names(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def domain_state(uri: str, name: str) -> str:
    """``virsh domstate -- NAME``: ``running``, ``shut off``, ``paused``…  Names follow ``--``
    (vsh.c ends option parsing there), so a domain named ``--domain=X`` is a name, not an option."""
    return _checked(_virsh(uri, "domstate", "--", name)).strip() or "unknown"


def dumpxml(uri: str, name: str) -> str:
    """The persistent definition of a domain (``virsh dumpxml --inactive NAME``)."""
    return _checked(_virsh(uri, "dumpxml", "--inactive", "--", name))


def read_domains_with_virsh(uri: str) -> LibvirtRead:
    """Every domain of a libvirt connection; :class:`LibvirtError` when virsh cannot list them."""
    names = _names(_checked(_virsh(uri, "list", "--all", "--name")))
    running = set(_names(_checked(_virsh(uri, "list", "--name", "--state-running"))))
    shutoff = set(_names(_checked(_virsh(uri, "list", "--name", "--state-shutoff"))))
    domains: list[DomainRecord] = []
    errors: list[str] = []
    for name in names:
        try:
            state = "running" if name in running else "shut off" if name in shutoff else domain_state(uri, name)
            domains.append(DomainRecord(name, state, dumpxml(uri, name), f"virsh -c {uri} dumpxml --inactive {name}"))
        except LibvirtError as exc:  # a domain undefined between list and dumpxml, say
            errors.append(str(exc))
    return LibvirtRead(tuple(domains), f"virsh -c {uri}", tuple(errors))


def read_domains_from_files(root: Root) -> LibvirtRead:
    """The QEMU driver's persistent definitions under ``<root>/etc/libvirt/qemu``, each named by
    the path it was read from (below a capture archive's path where the root is one)."""
    fs = HostFS(root)
    base = fs.root

    def where(rel: str) -> str:
        return fs.host_path(rel) if base == "/" else os.path.join(base, rel)

    run_dir_known = fs.isdir(QEMU_RUN_DIR)
    domains: list[DomainRecord] = []
    errors: list[str] = []
    for entry in fs.listdir(QEMU_CONFIG_DIR):
        rel = f"{QEMU_CONFIG_DIR}/{entry}"
        if not entry.endswith(".xml") or fs.isdir(rel):
            continue
        text = fs.text(rel, limit=4 * 1024 * 1024)
        if text is None:
            continue  # unreadable: recorded in fs.errors, reported below
        name = entry[: -len(".xml")]
        if fs.exists(f"{QEMU_RUN_DIR}/{name}.xml") or fs.exists(f"{QEMU_RUN_DIR}/{name}.pid"):
            state = "running"
        else:
            state = "shut off" if run_dir_known else "unknown"
        domains.append(DomainRecord(name, state, text, where(rel)))
    errors.extend(f"{e.path}: {e.error}" for e in fs.errors)
    return LibvirtRead(tuple(domains), where(QEMU_CONFIG_DIR), tuple(errors))


def read_domains(*, root: Root, uri: str | None) -> LibvirtRead:
    """Domains by the rule of the ``vms`` command.

    A URI given: virsh (it must be installed).  None given: on the live host (``root`` is
    ``/``) ``virsh -c qemu:///system`` when virsh is installed and answers, else the files;
    under any other root the files, so a captured or fake tree never asks this machine's libvirt.
    """
    if uri is not None:
        if not virsh_available():
            raise LibvirtError(f"--connect {uri} needs virsh (Debian package libvirt-clients), which is not installed")
        return read_domains_with_virsh(uri)
    if is_this_host(root) and virsh_available():
        try:
            return read_domains_with_virsh(DEFAULT_URI)
        except LibvirtError as exc:
            files = read_domains_from_files(root)
            return LibvirtRead(files.domains, files.source, (str(exc), *files.errors))
    return read_domains_from_files(root)


def _virsh_quote(path: str) -> str:
    """A path as one argument of virsh's own command-line parser (vsh.c: single quotes keep
    everything literally, there is no escape inside them)."""
    if "'" in path or "\n" in path:
        raise LibvirtError(f"{path!r}: a path with a quote or newline cannot be passed to virsh")
    return f"'{path}'"


def define_and_read_back(uri: str, path: str, name: str) -> str:
    """``virsh define PATH`` then ``dumpxml --inactive NAME``, in one virsh session, so what
    libvirt stored is read back even where each connection starts afresh (the test driver).

    virsh runs a ``;``-separated command string in one session but its exit status is the last
    command's, so a failed define is caught from its ``error:`` lines on stderr.
    """
    script = f"define -- {_virsh_quote(path)} ; dumpxml --inactive -- {_virsh_quote(name)}"
    out = run_tool(["virsh", "-q", "-c", uri, script], timeout=VIRSH_TIMEOUT)
    complaints = [line.strip() for line in out.stderr.splitlines() if line.strip().startswith("error:")]
    if complaints:
        raise LibvirtError(f"virsh -c {uri} define {path}: {' '.join(complaints)}")
    return _checked(out)
