"""The daemon's configuration: a flat TOML file, overridden by command-line flags.

``/etc/topoagent/config.toml`` is read when it exists (``--config FILE`` names another, which
must exist).  Every key is optional; an unknown key, or a value of the wrong type, is an error
naming the key, so a typo never silently falls back to a default::

    listen = "127.0.0.1:9464"       # ADDR:PORT of /metrics ("[::1]:9464" for IPv6)
    state_dir = "/var/lib/topoagent"
    nfd_dir = "/etc/kubernetes/node-feature-discovery/features.d"   # "" = off
    textfile_dir = ""               # node_exporter textfile collector directory, "" = off
    interval = 300                  # seconds between timer scans
    expected_gpus = 8               # GPUs this node should have (default: the most seen)
    scan_timeout = 120              # a scan running longer is abandoned and counted failed
    expect = "/etc/topoagent/baseline.json"  # expected topology (topoagent baseline), "" = none
    audit = true                    # audit the processes using each GPU at every scan

The full table is :data:`KEYS` (and ``docs/daemon.md``).  Pure, apart from reading the file.
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from topoagent.core.errors import InputError
from topoagent.core.read.textinput import read_regular
from topoagent.core.tree import is_this_host
from topoagent.core.write.files import DEFAULT_STATE_DIR

__all__ = [
    "DEFAULT_CONFIG",
    "DEFAULT_LISTEN",
    "KEYS",
    "Config",
    "ConfigError",
    "ConfigReader",
    "Provenance",
    "changed_keys",
    "load",
    "load_explained",
    "parse_listen",
    "provenance",
]

DEFAULT_CONFIG = "/etc/topoagent/config.toml"
#: 127.0.0.1 only by default: topology is not a secret, but nothing should be exposed unasked.
DEFAULT_LISTEN = "127.0.0.1:9464"


class ConfigError(InputError):
    """A configuration that cannot be used; the message names the file and the key."""


def default_state_dir() -> str:
    """``$STATE_DIRECTORY`` (set by systemd's ``StateDirectory=``; the first of a ``:`` list),
    else ``/var/lib/topoagent``."""
    given = os.environ.get("STATE_DIRECTORY", "").split(":")[0]
    return given or DEFAULT_STATE_DIR


class Config(msgspec.Struct, frozen=True):
    """Everything the daemon is told.  Field names are the TOML keys."""

    root: str = "/"
    listen: str = DEFAULT_LISTEN
    state_dir: str = msgspec.field(default_factory=default_state_dir)
    nfd_dir: str | None = None
    textfile_dir: str | None = None
    interval: float = 300.0
    expected_gpus: int | None = None
    nvml: bool = True
    udev: bool = True
    scan_timeout: float = 120.0
    debounce: float = 2.0
    link_sample_interval: float = 30.0
    link_window: float = 3600.0
    recent_changes: int = 50
    nfd_namespace: str = "feature.node.kubernetes.io"
    log_format: str = "auto"
    #: An expected topology (``topoagent baseline``): each scan's differences are EXPECT_* findings.
    expect: str | None = None
    #: Audit the processes using each GPU at every scan (``topoagent audit``; per-GPU metrics).
    audit: bool = True

    @property
    def address(self) -> tuple[str, int]:
        """``listen`` as ``(host, port)``."""
        return parse_listen(self.listen)

    @property
    def live(self) -> bool:
        """Whether the daemon scans the machine it runs on (udev, NVML and load make sense)."""
        return is_this_host(self.root)


def parse_listen(text: str) -> tuple[str, int]:
    """``ADDR:PORT`` (``127.0.0.1:9464``, ``[::1]:9464``, ``localhost:9464``) as (host, port)."""
    m = re.fullmatch(r"\[([0-9A-Fa-f:.]+)\]:([0-9]{1,5})|([^:\[\]\s]+):([0-9]{1,5})", text.strip())
    if not m:
        raise ConfigError(f"{text!r} is not ADDR:PORT (e.g. 127.0.0.1:9464 or [::1]:9464)")
    host = m.group(1) or m.group(3)
    port = int(m.group(2) or m.group(4))
    if not 1 <= port <= 65535:
        raise ConfigError(f"port {port} is not in 1-65535")
    if m.group(1):
        try:
            ipaddress.IPv6Address(host)
        except ValueError as exc:  # its message names the address
            raise ConfigError(str(exc)) from None
    return host, port


def _positive(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0


def _path(v: Any) -> bool:
    return isinstance(v, str) and "\0" not in v


def _listen(v: Any) -> bool:
    if not isinstance(v, str):
        return False
    parse_listen(v)
    return True


def _namespace(v: Any) -> bool:
    # A DNS subdomain NFD accepts as a label namespace; kubernetes.io/k8s.io are refused by
    # nfd-master except its own feature.node. and profile.node. namespaces.
    if not isinstance(v, str) or len(v) > 253:
        return False
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", v):
        return False
    reserved = v.endswith(("kubernetes.io", "k8s.io"))
    return not reserved or v in ("feature.node.kubernetes.io", "profile.node.kubernetes.io")


#: key -> (check, what a valid value is).  Durations are seconds.
KEYS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "root": (_path, "a directory (the host tree to read; / for this host)"),
    "listen": (_listen, "ADDR:PORT, e.g. 127.0.0.1:9464"),
    "state_dir": (_path, "a directory"),
    "nfd_dir": (_path, 'a directory, or "" for none'),
    "textfile_dir": (_path, 'a directory, or "" for none'),
    "interval": (_positive, "seconds > 0"),
    "expected_gpus": (lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 4096, "an integer 0-4096"),
    "nvml": (lambda v: isinstance(v, bool), "true or false"),
    "udev": (lambda v: isinstance(v, bool), "true or false"),
    "scan_timeout": (_positive, "seconds > 0"),
    "debounce": (lambda v: _positive(v) or v == 0, "seconds >= 0"),
    "link_sample_interval": (_positive, "seconds > 0"),
    "link_window": (_positive, "seconds > 0"),
    "recent_changes": (
        lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 10000,
        "an integer 0-10000",
    ),
    "nfd_namespace": (_namespace, "a DNS subdomain such as feature.node.kubernetes.io or example.com"),
    "log_format": (lambda v: v in ("auto", "json", "console"), '"auto", "json" or "console"'),
    "expect": (_path, 'a baseline file (topoagent baseline), or "" for none'),
    "audit": (lambda v: isinstance(v, bool), "true or false"),
}

#: The largest configuration file read (the flat table above is well under 1 KiB).
MAX_CONFIG_BYTES = 1024 * 1024

_FLOATS = {f.name for f in msgspec.structs.fields(Config) if f.type in ("float", float)}
_OPTIONAL_DIRS = ("nfd_dir", "textfile_dir", "expect")


class ConfigFile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The configuration file as msgspec decodes it: the keys of :class:`Config`, each left
    unset when the file does not name it; any other key is refused."""

    root: str | msgspec.UnsetType = msgspec.UNSET
    listen: str | msgspec.UnsetType = msgspec.UNSET
    state_dir: str | msgspec.UnsetType = msgspec.UNSET
    nfd_dir: str | msgspec.UnsetType = msgspec.UNSET
    textfile_dir: str | msgspec.UnsetType = msgspec.UNSET
    interval: int | float | msgspec.UnsetType = msgspec.UNSET
    expected_gpus: int | None | msgspec.UnsetType = msgspec.UNSET
    nvml: bool | msgspec.UnsetType = msgspec.UNSET
    udev: bool | msgspec.UnsetType = msgspec.UNSET
    scan_timeout: int | float | msgspec.UnsetType = msgspec.UNSET
    debounce: int | float | msgspec.UnsetType = msgspec.UNSET
    link_sample_interval: int | float | msgspec.UnsetType = msgspec.UNSET
    link_window: int | float | msgspec.UnsetType = msgspec.UNSET
    recent_changes: int | msgspec.UnsetType = msgspec.UNSET
    nfd_namespace: str | msgspec.UnsetType = msgspec.UNSET
    log_format: str | msgspec.UnsetType = msgspec.UNSET
    expect: str | msgspec.UnsetType = msgspec.UNSET
    audit: bool | msgspec.UnsetType = msgspec.UNSET


#: Every number's allowed range, in seconds unless said: finite, and neither so small that the
#: daemon spins (``interval = 1e-9``) nor so large that a timer overflows (``inf``, ``1e308``).
DAY = 86400
RANGES: dict[str, tuple[float, float]] = {
    "interval": (1, DAY),
    "scan_timeout": (1, DAY),
    "debounce": (0, 3600),
    "link_sample_interval": (1, DAY),
    "link_window": (1, 7 * DAY),
    "recent_changes": (0, 10000),
}


def check_ranges(values: Mapping[str, Any], where: str) -> None:
    """Refuse any number in ``values`` that is not finite or lies outside :data:`RANGES`, with
    one line naming the key (checked on start and on every reload; a failing reload keeps the
    running configuration)."""
    for key, (lo, hi) in RANGES.items():
        value = values.get(key)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            continue  # absent, or the wrong type: the key's own check says so
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{where}: {key} = {value}: must be a finite number from {lo:g} to {hi:g}")
        if not lo <= value <= hi:
            shown = f"{value:g}" if isinstance(value, float) or value.bit_length() < 64 else "a huge integer"
            raise ConfigError(
                f"{where}: {key} = {shown}: must be from {lo:g} to {hi:g} seconds"
                if key != "recent_changes"
                else f"{where}: {key} = {shown}: must be from {lo} to {hi}"
            )


def _read_toml(path: str) -> dict[str, Any]:
    """The keys a configuration file sets (typed by :class:`ConfigFile`); ConfigError naming
    the file, and the key at fault, for anything else."""
    try:
        # The project's one reader of named input files: non-blocking, bounded and regular files
        # only, so a FIFO, a device or a directory named by mistake is refused with one line
        # rather than read as an empty configuration (or left to hang).
        data = read_regular(path, MAX_CONFIG_BYTES)
    except InputError as exc:
        raise ConfigError(f"config {path}: {exc}: not a configuration") from None
    except FileNotFoundError:
        raise ConfigError(f"config {path}: no such file") from None
    except OSError as exc:
        raise ConfigError(f"config {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"config {path}: larger than {MAX_CONFIG_BYTES // 1024} KiB: not a configuration")
    try:
        text = data.decode("utf-8")
        given = msgspec.toml.decode(text, type=ConfigFile)
    except ImportError:  # Python 3.10: msgspec reads TOML through the tomli package
        raise ConfigError(f"config {path}: reading TOML on Python 3.10 needs the tomli package") from None
    except msgspec.ValidationError as exc:
        raise ConfigError(_type_error(f"config {path}", text, str(exc))) from None
    except (UnicodeDecodeError, msgspec.DecodeError) as exc:
        raise ConfigError(f"config {path}: not valid TOML: {exc}") from None
    except ValueError:  # an integer of thousands of digits (Python's int-to-str limit)
        raise ConfigError(f"config {path}: a number too large to read: not a configuration") from None
    except RecursionError:  # arrays or inline tables nested thousands deep: the table is flat
        raise ConfigError(f"config {path}: nested too deeply: not a configuration") from None
    return {k: v for k, v in msgspec.structs.asdict(given).items() if v is not msgspec.UNSET}


def _type_error(where: str, text: str, why: str) -> str:
    """msgspec's complaint about a key (``Object contains unknown field `x```, ``Expected `bool`,
    got `int` - at `$.nvml```) as the one line a person reads."""
    unknown = re.search(r"unknown field `([^`]*)`", why)
    if unknown:
        return f"{where}: unknown key {unknown.group(1)!r} (known keys: {', '.join(KEYS)})"
    at = re.search(r"at `\$\.([A-Za-z_]+)`", why)
    if at is None or at.group(1) not in KEYS:
        return f"{where}: {why}"
    key = at.group(1)
    value = msgspec.toml.decode(text).get(key)  # decoded once already: this cannot fail
    return f"{where}: {key} = {value!r}: must be {KEYS[key][1]}"


def _check(values: Mapping[str, Any], where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in values.items():
        if key not in KEYS:
            raise ConfigError(f"{where}: unknown key {key!r} (known keys: {', '.join(KEYS)})")
        check, wanted = KEYS[key]
        try:
            ok = check(value)
        except ValueError as exc:
            raise ConfigError(f"{where}: {key} = {value!r}: {exc}") from None
        if not ok:
            raise ConfigError(f"{where}: {key} = {value!r}: must be {wanted}")
        if key in _FLOATS:
            value = float(value)
        if key in _OPTIONAL_DIRS and value == "":
            value = None
        out[key] = value
    return out


def load(path: str | None = None, overrides: Mapping[str, Any] | None = None) -> Config:
    """The configuration: defaults, then the file, then ``overrides`` (flags; None = not given).

    ``path`` None reads :data:`DEFAULT_CONFIG` if it exists; a named file must exist.
    Raises :class:`ConfigError` naming the file and key at fault.
    """
    return load_explained(path, overrides)[0]


def _file_values(path: str | None) -> dict[str, Any]:
    """The checked keys the configuration file sets (read once); {} when ``path`` is None and
    :data:`DEFAULT_CONFIG` does not exist."""
    file = path if path is not None else DEFAULT_CONFIG
    if path is None and not os.path.exists(file):
        return {}
    table = _read_toml(file)
    check_ranges(table, f"config {file}")
    return _check(table, f"config {file}")


def load_explained(path: str | None = None, overrides: Mapping[str, Any] | None = None) -> tuple[Config, Provenance]:
    """The configuration :func:`load` gives and its :func:`provenance`, from one read of the
    file (so the provenance describes exactly the configuration returned)."""
    in_file = _file_values(path)
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    check_ranges(given, "command line")
    flags = _check(given, "command line")
    return Config(**{**in_file, **flags}), provenance(in_file, flags)


# -- where each value came from (logged at start and on each reload) --------------------------


class Provenance(msgspec.Struct, frozen=True):
    """Where each key of a configuration came from: ``sources`` maps every key to ``default``,
    ``file`` or ``flag``; ``shadowed`` holds the file's value of each key a flag overrode."""

    sources: dict[str, str]
    shadowed: dict[str, Any]


def provenance(in_file: Mapping[str, Any], overrides: Mapping[str, Any] | None = None) -> Provenance:
    """Where a configuration took each value from, given the keys its file set (as read for
    it: the file is not read again) and the flags (flags win over the file, the file over the
    defaults; a flag of None is not given)."""
    flags = {k for k, v in (overrides or {}).items() if v is not None}
    sources = {
        f.name: "flag" if f.name in flags else "file" if f.name in in_file else "default"
        for f in msgspec.structs.fields(Config)
    }
    return Provenance(sources, {k: v for k, v in in_file.items() if k in flags})


class ConfigReader:
    """The daemon's configuration edge: :meth:`load` reads the file once per (re)load and keeps
    where each value came from; :meth:`explain` answers from that, never re-reading the file
    (which may have changed, or become unreadable, since)."""

    def __init__(self, path: str | None, overrides: Mapping[str, Any] | None = None) -> None:
        self.path = path
        self.overrides = dict(overrides or {})
        self._provenance: Provenance | None = None

    def load(self) -> Config:
        """The configuration now (:class:`ConfigError` as :func:`load`; the last provenance stays)."""
        config, self._provenance = load_explained(self.path, self.overrides)
        return config

    def explain(self) -> Provenance:
        """Where the values of the last configuration loaded came from."""
        if self._provenance is None:
            self.load()
        assert self._provenance is not None
        return self._provenance


def changed_keys(old: Config, new: Config) -> dict[str, list[Any]]:
    """The keys whose value differs between two configurations: key -> [old, new]."""
    before, after = msgspec.structs.asdict(old), msgspec.structs.asdict(new)
    return {k: [before[k], after[k]] for k in before if before[k] != after[k]}
