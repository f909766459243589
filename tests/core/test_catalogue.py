"""The findings catalogue: documented, and every code raised by some fixture."""

import json
import re

from tests.paths import REPO
from topoagent.core.analysis.findings import CATALOGUE


def test_every_code_is_documented_once():
    doc = (REPO / "docs/findings.md").read_text()
    headings = re.findall(r"^## ([A-Z0-9_]+)$", doc, re.MULTILINE)
    assert sorted(headings) == sorted(CATALOGUE)


def test_every_code_is_raised_by_a_fixture():
    raised = {
        f["code"] for p in (REPO / "tests/golden").glob("*/scan.json") for f in json.loads(p.read_text())["findings"]
    }
    # NVLink P2P needs NVML (tests/core/test_nvml_join.py, recorded HGX H100); disagreements need a
    # second source (tests/core/test_crosscheck.py); overlapping nodes a damaged copy of a fixture
    # (tests/core/test_cpu_files.py); EXPECT_* an expected topology to compare with (scan --expect,
    # fleet: tests/features/fleet/test_fleet.py, faulty copies of dgx-h100 against its baseline).
    expect = {
        "EXPECT_DEVICE_MISSING",
        "EXPECT_DEVICE_EXTRA",
        "EXPECT_PLACEMENT",
        "EXPECT_LINK",
        "EXPECT_PATH",
        "EXPECT_STATE",
    }
    assert set(CATALOGUE) - raised == {"NVLINK_P2P_DISABLED", "SOURCES_DISAGREE", "NUMA_NODES_OVERLAP"} | expect
