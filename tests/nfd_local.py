"""An independent reader of node-feature-discovery feature files, as NFD's local source and
nfd-master read them (kubernetes-sigs/node-feature-discovery: source/local/local.go
``parseFeatureFile``/``parseDirectives``; label checks as Kubernetes' IsQualifiedName and
IsValidLabelValue, k8s.io/apimachinery/pkg/util/validation).

- Lines are trimmed; a line starting with ``#`` is a comment, and one starting with ``# +`` a
  directive ``key=value`` (``expiry-time``, ``no-label``, ``no-feature``; any other key is an
  error).  A directive applies to the lines *after* it.
- ``expiry-time`` is parsed as Go's ``time.RFC3339``; the default expiry is "now", and a label
  line is dropped while the expiry lies before now.
- A label line is ``name=value`` (``name`` alone means ``true``).
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

DIRECTIVE_PREFIX = "# +"
_RFC3339 = re.compile(r"^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$")
_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def parse_rfc3339(text: str) -> datetime:
    """Go's time.Parse(time.RFC3339, ...) for the forms it accepts; ValueError otherwise."""
    m = _RFC3339.match(text)
    if not m:
        raise ValueError(f"not RFC 3339: {text!r}")
    zone = m.group(8)
    iso = text[:-1] + "+00:00" if zone == "Z" else text
    return datetime.fromisoformat(iso)


def parse_feature_file(text: str, now: datetime) -> tuple[dict[str, str], list[str]]:
    """(labels, directive errors) of a feature file read at ``now``."""
    labels: dict[str, str] = {}
    errors: list[str] = []
    expiry = now
    skip_label = False
    for raw in text.split("\n"):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            if line.startswith(DIRECTIVE_PREFIX):
                key, eq, value = line[len(DIRECTIVE_PREFIX) :].partition("=")
                if key == "expiry-time":
                    if not eq:
                        errors.append(f"invalid directive {line!r}")
                        continue
                    try:
                        expiry = parse_rfc3339(value.strip())
                    except ValueError as exc:
                        errors.append(str(exc))
                elif key == "no-label":
                    skip_label = True
                elif key != "no-feature":
                    errors.append(f"unknown feature file directive {key!r}")
            continue
        if expiry < now:
            continue
        name, eq, value = line.partition("=")
        if skip_label:
            labels.pop(name, None)
        else:
            labels[name] = value if eq else "true"
        skip_label = False
    return labels, errors


def valid_label(name: str, value: str) -> bool:
    """Kubernetes' label rules, which nfd-master applies before it labels the node."""
    prefix, slash, local = name.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix)):
        return False
    if not _NAME.match(local):
        return False
    return value == "" or bool(_NAME.match(value))


def utc(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, tz=timezone.utc)
