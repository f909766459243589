"""Backups of libvirt domain definitions, for ``topoagent vms --apply`` and ``--undo``.

Before ``vms --apply DOMAIN --yes`` defines a new definition, the current one is saved as
``<state-dir>/vms/DOMAIN.xml``; ``vms --undo DOMAIN`` defines that file again and removes it.
A backup that already exists is kept, never overwritten: after two applies without an undo it
still holds the definition from before the first, which is what undo must restore.

Files are written whole (a temporary file in the same directory, fsynced, then renamed) and
readable by the owner only: a definition can hold secrets (VNC passwords, disk paths).
"""

from __future__ import annotations

import errno
import os
import stat

from topoagent.core.errors import TopoagentError
from topoagent.core.read.textinput import read_fd
from topoagent.core.write.files import unlink_quietly, untrusted, write_atomically, write_new
from topoagent.features.vms.domain import MAX_XML_BYTES

__all__ = [
    "BackupError",
    "backup_path",
    "discard_staged",
    "load_backup",
    "remove_backup",
    "save_backup",
    "stage_definition",
]

SUBDIR = "vms"


class BackupError(TopoagentError):
    """A backup that cannot be written, read or removed, or a domain name unfit for a file name."""


def backup_path(state_dir: str, domain: str) -> str:
    """``<state_dir>/vms/<domain>.xml``; refuses names that are not one plain file name."""
    if not domain or domain in (".", "..") or "/" in domain or "\0" in domain:
        raise BackupError(f"domain name {domain!r} cannot name a backup file")
    return os.path.join(state_dir, SUBDIR, f"{domain}.xml")


def _backup_dir(state_dir: str) -> str:
    """``<state_dir>/vms``, each of the two made 0700 where missing.  ``os.makedirs`` gives its
    ``mode`` only to the last directory (Python >= 3.7; the ones on the way get 0777 & ~umask),
    and a state directory made 0775 under umask 002 would fail the trust check undo applies."""
    directory = os.path.join(state_dir, SUBDIR)
    os.makedirs(state_dir, mode=0o700, exist_ok=True)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    return directory


def _write_private(state_dir: str, prefix: str, text: str) -> str:
    """``text`` in a new file of the backup directory, mode 0600 and fsynced: its path."""
    try:
        return write_new(_backup_dir(state_dir), prefix, text.encode("utf-8"), mode=0o600)
    except OSError as exc:
        raise BackupError(f"{state_dir}: {exc.strerror or exc}") from None


def save_backup(state_dir: str, domain: str, xml: str) -> tuple[str, bool]:
    """Save ``xml`` as the domain's backup unless one exists: (its path, whether written now)."""
    path = backup_path(state_dir, domain)
    if os.path.exists(path):
        return path, False
    try:
        _backup_dir(state_dir)
        write_atomically(path, xml.encode("utf-8"), mode=0o600)
    except OSError as exc:
        raise BackupError(f"{path}: {exc.strerror or exc}") from None
    return path, True


def stage_definition(state_dir: str, domain: str, xml: str) -> str:
    """The new definition ``--apply --yes`` hands to ``virsh define``, written beside the
    backups (owner only, like them); the caller removes it with :func:`discard_staged`."""
    backup_path(state_dir, domain)  # refuses a name unfit for a file
    return _write_private(state_dir, f".{domain}.new.", xml)


def discard_staged(path: str) -> None:
    """Remove a file made by :func:`stage_definition` (gone already is fine)."""
    unlink_quietly(path)


def _read_trusted(path: str) -> bytes:
    """The backup's bytes, refused -- as the journal is (:func:`~topoagent.core.write.files.untrusted`)
    -- when it, its directory or the state directory is another user's or writable by others,
    or when it is a link: undo defines what it holds."""
    for d in (os.path.dirname(os.path.dirname(path)), os.path.dirname(path)):
        why = untrusted(os.stat(d))
        if why is not None:
            raise BackupError(f"{d} {why}: not trusted, nothing read")
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise BackupError(f"{path}: not a regular file")
        why = untrusted(st)
        if why is not None:
            raise BackupError(f"{path} {why}: not trusted, nothing read")
        return read_fd(fd, MAX_XML_BYTES)
    finally:
        os.close(fd)


def load_backup(state_dir: str, domain: str) -> tuple[str, str]:
    """(path, text) of the domain's backup; :class:`BackupError` when there is none or it is
    not to be trusted."""
    path = backup_path(state_dir, domain)
    try:
        data = _read_trusted(path)
        if len(data) > MAX_XML_BYTES:
            raise BackupError(f"{path}: larger than {MAX_XML_BYTES // (1024 * 1024)} MiB: not a domain definition")
        return path, data.decode("utf-8")
    except FileNotFoundError:
        raise BackupError(
            f"no backup of {domain} in {os.path.dirname(path)} (nothing was applied to it, or it was undone already)"
        ) from None
    except OSError as exc:
        why = "a symbolic link: refused" if exc.errno == errno.ELOOP else exc.strerror or str(exc)
        raise BackupError(f"{path}: {why}") from None
    except UnicodeDecodeError as exc:
        raise BackupError(f"{path}: {exc}") from None


def remove_backup(state_dir: str, domain: str) -> None:
    """Remove the domain's backup after a verified undo."""
    path = backup_path(state_dir, domain)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise BackupError(f"{path}: {exc.strerror or exc}") from None
