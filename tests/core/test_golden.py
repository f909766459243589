"""Golden end-to-end outputs of `topoagent scan` for every machine description.

Regenerate after an intended change with ``python -m pytest tests/core/test_golden.py --update-golden``
and review the diff like code.
"""

import json
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from tests.fakesysfs import machine_names
from tests.paths import REPO, TESTS
from topoagent.cli import cli

GOLDEN = TESTS / "golden"
SCHEMA = json.loads((REPO / "topoagent/schema/scan.schema.json").read_text())
FORMATS = {"tree": "tree.txt", "json": "scan.json", "matrix": "matrix.txt"}
MACHINES = machine_names()


def scan(root: Path, fmt: str) -> tuple[int, str]:
    # JSON goldens are indented (--pretty) so that their diffs review like code.
    extra = ["--pretty"] if fmt == "json" else []
    result = CliRunner().invoke(cli, ["scan", "--root", str(root), "--format", fmt, *extra])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output.replace(str(root), "<ROOT>")


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_golden(machine, fmt, fixture_root, golden):
    code, out = scan(fixture_root(machine), fmt)
    # Exit 2 only for the GPU matrix of a host without GPUs: the one-line refusal is its golden.
    assert code in (0, 1) or (code == 2 and fmt == "matrix" and out.startswith("topoagent: no GPUs on this host"))
    text = f"{out}" if fmt != "tree" and code != 2 else f"{out}# exit {code}\n"
    path = GOLDEN / machine / FORMATS[fmt]
    golden(path, text)


@pytest.mark.parametrize("machine", MACHINES)
def test_json_validates_and_is_deterministic(machine, fixture_root):
    root = fixture_root(machine)
    _, first = scan(root, "json")
    _, second = scan(root, "json")
    assert first == second
    doc = json.loads(first)
    jsonschema.validate(doc, SCHEMA)
    ids = [d["id"] for d in doc["devices"]]
    assert len(ids) == len(set(ids))
    for p in doc["paths"]:
        assert ids.index(p["a"]) < ids.index(p["b"])


def test_compact_json_is_the_pretty_json(fixture_root):
    root = fixture_root("dgx-h100")
    compact = CliRunner().invoke(cli, ["scan", "--root", str(root), "--format", "json"]).output
    _, pretty = scan(root, "json")
    assert "\n" not in compact.rstrip("\n")
    assert json.loads(compact) == json.loads(pretty.replace("<ROOT>", str(root)))
