"""The published JSON Schemas of topoagent's JSON outputs, generated from the contract types.

``python -m topoagent.schema`` writes ``scan.schema.json``, ``plan.schema.json``,
``vms.schema.json`` and ``audit.schema.json`` (and ``baseline.schema.json``) beside this file from the
types the outputs encode (:class:`~topoagent.core.render.json_report.ScanReport`,
:class:`~topoagent.features.plan.report.PlanReport`, :class:`~topoagent.features.vms.report.VmsReport`,
:class:`~topoagent.features.audit.render.AuditDoc`); a test regenerates them and fails when a file
differs, so a schema cannot drift from its output.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import msgspec

from topoagent.core.baseline import BASELINE_VERSION, Baseline
from topoagent.core.render.json_report import SCHEMA_VERSION as SCAN_VERSION
from topoagent.core.render.json_report import ScanReport
from topoagent.features.audit.render import AUDIT_SCHEMA_VERSION, AuditDoc
from topoagent.features.plan.report import SCHEMA_VERSION as PLAN_VERSION
from topoagent.features.plan.report import PlanReport
from topoagent.features.vms.report import VmsReport

__all__ = ["GENERATED", "generate", "schema_text", "write"]

HERE = Path(__file__).resolve().parent
_BASE = "https://github.com/topoagent/topoagent/schema/"


def scan_schema() -> dict[str, Any]:
    """The schema of ``scan --format json`` (draft 2020-12)."""
    return _document(
        ScanReport,
        "scan.schema.json",
        "topoagent scan --format json",
        f"Schema version {SCAN_VERSION}. Additive changes keep the version; breaking ones bump it.",
    )


def plan_schema() -> dict[str, Any]:
    """The schema of ``plan --format json``."""
    return _document(
        PlanReport,
        "plan.schema.json",
        "topoagent plan --format json",
        f"Schema version {PLAN_VERSION}. Additive changes keep the version; breaking ones bump it. "
        "Device ids (gpu0, nic2) and keys (BDFs) are those of topoagent scan --format json.",
    )


def vms_schema() -> dict[str, Any]:
    """The schema of ``vms --format json``."""
    return _document(
        VmsReport,
        "vms.schema.json",
        "topoagent vms --format json",
        "NUMA affinity of VMs with PCI passthrough devices (libvirt/KVM domains or VMware .vmx "
        "files). Additive fields keep schema_version; breaking changes bump it.",
    )


def audit_schema() -> dict[str, Any]:
    """The schema of ``audit --format json``."""
    return _document(
        AuditDoc,
        "audit.schema.json",
        "topoagent audit --format json",
        f"Schema version {AUDIT_SCHEMA_VERSION}. The processes using each GPU and the audit's findings "
        "(the scan's finding shape; docs/audit.md). Additive changes keep the version; breaking ones bump it.",
    )


def baseline_schema() -> dict[str, Any]:
    """The schema of ``topoagent baseline`` (the expected topology ``scan --expect`` reads)."""
    return _document(
        Baseline,
        "baseline.schema.json",
        "topoagent baseline",
        f"Schema version {BASELINE_VERSION}. The expected topology of a hardware class: its "
        "per-slot facts (docs/fleet.md). Links are minimums; every other fact must be equal.",
    )


#: File name -> the function that makes its schema.
GENERATED = {
    "scan.schema.json": scan_schema,
    "plan.schema.json": plan_schema,
    "vms.schema.json": vms_schema,
    "audit.schema.json": audit_schema,
    "baseline.schema.json": baseline_schema,
}


def _document(root: type, name: str, title: str, description: str) -> dict[str, Any]:
    (_,), defs = msgspec.json.schema_components([root], ref_template="#/$defs/{name}")
    defs = _cleaned(defs)
    body = defs.pop(root.__name__)
    body.pop("title", None)
    body.pop("description", None)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": _BASE + name,
        "title": title,
        "description": description,
        **body,
        "$defs": dict(sorted(defs.items())),
    }


def _cleaned(value: Any) -> Any:
    """``value`` with what msgspec releases print differently but mean the same made one way.

    msgspec copies a Struct's docstring into its schema, indented as written before 0.23 and
    cleaned since: every ``description`` is cleaned as :func:`inspect.cleandoc` cleans a
    docstring.  The alternatives of an optional field (``anyOf``) come null first in 0.18 and
    last in later releases; their order means nothing, so null goes last.  The published schema is then
    the contract alone, the same under every msgspec the lock and the ranges allow.
    """
    if isinstance(value, dict):
        out = {
            k: inspect.cleandoc(v) if k == "description" and isinstance(v, str) else _cleaned(v)
            for k, v in value.items()
        }
        if isinstance(out.get("anyOf"), list):
            out["anyOf"] = sorted(out["anyOf"], key=lambda alt: alt == {"type": "null"})
        return out
    if isinstance(value, list):
        return [_cleaned(v) for v in value]
    return value


def schema_text(name: str) -> str:
    """The text of a generated schema file, as :func:`write` writes it."""
    return json.dumps(GENERATED[name](), indent=2) + "\n"


def generate() -> dict[str, str]:
    """Every generated schema: file name -> text."""
    return {name: schema_text(name) for name in GENERATED}


def write(directory: Path = HERE) -> list[Path]:
    """Write the generated schemas into ``directory``; the paths written."""
    out = []
    for name, text in generate().items():
        path = directory / name
        path.write_text(text)
        out.append(path)
    return out
