"""The published schemas are generated from the contract types (``python -m topoagent.schema``)."""

from __future__ import annotations

import json

import jsonschema
import pytest

from topoagent.schema import GENERATED, HERE, generate


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_the_published_schema_is_the_generated_one(name):
    """Fails when the contract types changed and the schema file was not regenerated."""
    assert (HERE / name).read_text() == generate()[name], f"run python -m topoagent.schema to update {name}"


def test_the_generated_scan_schema_checks_what_the_contract_promises():
    schema = json.loads(generate()["scan.schema.json"])
    jsonschema.Draft202012Validator.check_schema(schema)
    device = schema["$defs"]["DeviceEntry"]
    assert "class" in device["properties"] and "class_" not in device["properties"]
    assert set(schema["required"]) == {
        "schema_version",
        "tool",
        "host",
        "sockets",
        "numa_nodes",
        "host_bridges",
        "devices",
        "paths",
        "rails",
        "findings",
        "recommendations",
        "probe_errors",
        "unknown",
        "slots",
    }
    bad = {"id": "gpu0", "bdf": "0000:1B:00.0"}  # upper-case hex is not a BDF the contract writes
    errors = list(
        jsonschema.Draft202012Validator(schema).iter_errors(
            {**json.loads((HERE.parent.parent / "tests/golden/dgx-h100/scan.json").read_text()), "devices": [bad]}
        )
    )
    assert any("0000:1B:00.0" in e.message for e in errors)
