"""topoagent.core.analysis.links: a link is judged against its capability (the lower of its two ends'
maxima), and the scan's link findings, the daemon's link watch and its metrics judge alike."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from tests.core.test_bad_input import BDF, minimal_tree
from tests.paths import REPO
from topoagent.core.analysis.links import LinkCapability, capability, link_partner, shortfall
from topoagent.core.api import scan
from topoagent.features.daemon.linkwatch import LinkWatch, watched_links

PORT = "0000:16:01.0"


def _nic_below_port(tmp_path, nic: dict[str, str], port: dict[str, str], device: str = "0x1572"):
    """An Intel NIC (``device``) on a root port, each end with the given link files."""
    root = minimal_tree(tmp_path)
    dev = root / f"sys/devices/pci0000:16/{PORT}/{BDF}"
    for name, value in {"class": "0x020000", "vendor": "0x8086", "device": device, **nic}.items():
        (dev / name).write_text(value + "\n")
    for name, value in port.items():
        (dev.parent / name).write_text(value + "\n")
    return scan(root, nvml="off")


def _link(cur_w, max_w, cur_s, max_s) -> dict[str, str]:
    return {
        "current_link_width": str(cur_w),
        "max_link_width": str(max_w),
        "current_link_speed": f"{cur_s} GT/s PCIe",
        "max_link_speed": f"{max_s} GT/s PCIe",
    }


def _findings(r):
    return {(f.code, f.severity.label) for f in r.findings if f.code.startswith("LINK_")}


def _degraded(r):
    w = LinkWatch(600)
    w.observe_result(0, r, {})
    return {j.bdf: j.reason for j in w.judge().values() if j.degraded}


@pytest.mark.parametrize(
    "cur, want",
    [
        ((16, 32, "32.0"), (False, False)),
        ((8, 32, "32.0"), (True, False)),
        ((16, 32, "16.0"), (False, True)),
        ((None, None, None), (False, False)),  # unknown is not short
    ],
)
def test_shortfall(cur, want):
    width, _, gts = cur
    assert shortfall(float(gts) if gts else None, width, LinkCapability(32.0, 16)) == want


def test_a_root_port_above_a_narrower_card_is_not_degraded(tmp_path):
    """Port: x16 Gen5 of its own; card: x8 Gen3 at its best.  The link can do x8 8 GT/s: the
    port reads "8 of max 32", which is no fault -- neither for the findings nor for the watch."""
    r = _nic_below_port(tmp_path, _link(8, 8, "8.0", "8.0"), _link(8, 16, "8.0", "32.0"))
    port, nic = r.topology.by_bdf(PORT), r.topology.by_bdf(BDF)
    assert link_partner(r.topology, port) is nic and link_partner(r.topology, nic) is port
    assert capability(r.topology, port) == capability(r.topology, nic) == LinkCapability(8.0, 8)
    assert _findings(r) == set()
    assert _degraded(r) == {}
    links = watched_links(r)
    assert (links[PORT].max_width, links[PORT].max_gts) == (8, 8.0)
    # ... and the JSON says so beside the port's own maximum (link.cap_*, additive).
    from topoagent.core.render.json_report import report

    entry = next(d for d in report(r).devices if d.bdf == PORT)
    assert (entry.link.max_width, entry.link.max_gts, entry.link.cap_width, entry.link.cap_gts) == (16, 32.0, 8, 8.0)


def test_a_wide_card_in_a_narrow_slot_is_capped_not_degraded(tmp_path):
    """An x16 Gen4 card in an x8 Gen3 slot, trained x8 8 GT/s: the link runs as fast as both ends
    allow, so no finding at all -- a finding must not exist for what its evidence shows is not a
    fault (issue 40: a healthy GB300's ConnectX-8 bridges below Gen5 root ports raised 8) -- and
    the watch agrees."""
    r = _nic_below_port(tmp_path, _link(8, 16, "8.0", "16.0"), _link(8, 8, "8.0", "8.0"))
    assert _findings(r) == set()
    assert _degraded(r) == {}


def test_below_what_both_ends_support_is_degraded_for_both(tmp_path):
    r = _nic_below_port(tmp_path, _link(4, 16, "8.0", "16.0"), _link(4, 16, "8.0", "16.0"))
    assert _findings(r) == {("LINK_WIDTH_DEGRADED", "warning"), ("LINK_SPEED_DEGRADED", "warning")}
    assert _degraded(r) == {BDF: "x4 of x16, 8 of 16 GT/s", PORT: "x4 of x16, 8 of 16 GT/s"}


def test_the_watch_honours_link_quirks_as_the_findings_do(tmp_path):
    """An X722 LAN function's x1 link registers mean nothing (topoagent.core.quirks): no finding,
    not watched, never degraded -- nor is the port above, which reports the same link."""
    r = _nic_below_port(tmp_path, _link(1, 8, "2.5", "8.0"), _link(1, 8, "2.5", "8.0"), device="0x37d2")
    assert _findings(r) == set()
    assert BDF not in watched_links(r)
    assert _degraded(r) == {}
    assert capability(r.topology, r.topology.by_bdf(PORT)) == LinkCapability()


def _dual_port_nic_below_port(tmp_path):
    """A dual-port ConnectX-6 Dx (functions .0 and .1, one x16 link) trained x4 below its
    root port: every end of the one link reads x4 of x16."""
    low = _link(4, 16, "16.0", "16.0")
    r0 = _nic_below_port(tmp_path, low, low, device="0x101d")
    second = tmp_path / f"sys/devices/pci0000:16/{PORT}/{BDF[:-1]}1"
    second.mkdir()
    for name, value in {"class": "0x020000", "vendor": "0x15b3", "device": "0x101d", **low}.items():
        (second / name).write_text(value + "\n")
    (tmp_path / "sys/devices" / f"pci0000:16/{PORT}/{BDF}" / "vendor").write_text("0x15b3\n")
    links = tmp_path / "sys/bus/pci/devices"
    os.symlink(os.path.relpath(second, links), links / second.name)
    assert r0 is not None
    return scan(tmp_path, nvml="off")


def test_a_multi_function_device_shares_one_link_name(tmp_path):
    """A dual-port NIC's .0 and .1 and the port above them report one physical link: one
    ``link`` name (function 0 of the lower end), not one per function."""
    r = _dual_port_nic_below_port(tmp_path)
    second = BDF[:-1] + "1"
    assert r.topology.by_bdf(second) is not None
    links = watched_links(r)
    assert {PORT, BDF, second} <= set(links)
    assert {links[k].link for k in (PORT, BDF, second)} == {BDF}
    assert set(_degraded(r)) == {PORT, BDF, second}  # all three ends read x4 of x16


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed (Debian package prometheus)")
def test_one_degraded_link_under_a_dual_port_nic_is_one_alert(tmp_path):
    """The daemon's own exposition of the dual-port NIC, fed to promtool against the shipped
    rules (HTTP scrape and textfile copy both present): TopoagentPcieLinkDegraded fires once."""
    from prometheus_client.parser import text_string_to_metric_families

    from tests.features.daemon.test_daemon_parts import _status
    from topoagent.features.daemon.metrics import render_text

    r = _dual_port_nic_below_port(tmp_path / "tree")
    fams = {f.name: f for f in text_string_to_metric_families(render_text(_status(r)).decode())}
    degraded = [s for s in fams["topoagent_pcie_link_degraded"].samples if s.value == 1]
    # one physical link, one series (the series budget): named by function 0 at its lower end
    assert [s.labels for s in degraded] == [{"link": BDF, "kind": "nic"}]
    series = []
    for job, instance in (("topoagent", "n1:9464"), ("node", "n1:9100")):
        for s in degraded:
            labels = ", ".join(f'{k}="{v}"' for k, v in sorted({**s.labels, "job": job, "instance": instance}.items()))
            series.append({"series": f"{s.name}{{{labels}}}", "values": "1x30"})
    case = {
        "rule_files": [str(REPO / "deploy/prometheus/topoagent-rules.yml")],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "alert_rule_test": [
                    {
                        "eval_time": "20m",
                        "alertname": "TopoagentPcieLinkDegraded",
                        "exp_alerts": [
                            {
                                "exp_labels": {
                                    "family": "pcie",
                                    "severity": "warning",
                                    "job": "topoagent",
                                    "instance": "n1:9464",
                                    "link": BDF,
                                },
                                "exp_annotations": {
                                    "summary": f"Degraded PCIe link {BDF} on n1:9464",
                                    "description": f"The PCIe link of {BDF} on n1:9464 runs below the width or speed "
                                    "both its ends support. Reseat the card or riser; check BIOS bifurcation and PCIe "
                                    "generation.",
                                },
                            }
                        ],
                    }
                ],
            }
        ],
    }
    path = tmp_path / "case.yml"
    path.write_text(json.dumps(case))  # JSON is YAML
    p = subprocess.run(["promtool", "test", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
