"""deploy/: the DaemonSet and the Containerfile as their consumers read them.

The DaemonSet is loaded with PyYAML and checked for what makes it runnable: every mount names a
volume, the host's /sys and /run/udev are mounted read-only, the NVIDIA runtime class is asked
for, and the image is the one deploy/Containerfile builds (topoagent is on no package index).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

import pytest

from tests.daemon_helpers import scrape
from tests.plan_helpers import REPO
from topoagent.core.api import scan

yaml = pytest.importorskip("yaml")

DAEMONSET = REPO / "deploy/kubernetes/topoagent-daemonset.yaml"
CONTAINERFILE = REPO / "deploy/Containerfile"
PODMONITOR = REPO / "deploy/kubernetes/topoagent-podmonitor.yaml"
RULES = REPO / "deploy/prometheus/topoagent-rules.yml"
SCRAPE_CONFIGS = [
    REPO / "deploy/prometheus/topoagent-scrape-kubernetes.yml",
    REPO / "deploy/prometheus/topoagent-scrape-static.yml",
]


@pytest.fixture(scope="module")
def ds() -> dict:
    docs = [d for d in yaml.safe_load_all(DAEMONSET.read_text()) if d]
    assert len(docs) == 1
    return docs[0]


def test_daemonset_is_a_valid_apps_v1_daemonset(ds):
    assert ds["apiVersion"] == "apps/v1" and ds["kind"] == "DaemonSet"
    spec = ds["spec"]
    assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    pod = spec["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert len(volumes) == len(pod["volumes"])
    for c in pod["containers"]:
        for m in c["volumeMounts"]:
            assert m["name"] in volumes, m
        ports = {p["containerPort"] for p in c["ports"]}
        assert c["readinessProbe"]["httpGet"]["port"] in ports
        assert any(a.startswith("--listen=") and a.endswith(":9464") for a in c["args"])


def test_daemonset_mounts_what_the_agent_needs_read_only(ds):
    pod = ds["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in pod["containers"][0]["volumeMounts"]}
    for path in ("/sys", "/run/udev"):
        assert mounts[path].get("readOnly") is True, path
        assert volumes[mounts[path]["name"]]["hostPath"]["path"] == path
    # The known-good GPU count must outlive the pod (TopoagentGpuMissing after a restart).
    state = mounts["/var/lib/topoagent"]
    assert "hostPath" in volumes[state["name"]]


def test_daemonset_asks_for_the_nvidia_runtime(ds):
    pod = ds["spec"]["template"]["spec"]
    assert pod["runtimeClassName"] == "nvidia"
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all" and "utility" in env["NVIDIA_DRIVER_CAPABILITIES"]


def test_the_image_is_built_from_the_source_tree(ds):
    text = DAEMONSET.read_text()
    assert "pip install topoagent" not in text and "deploy/Containerfile" in text
    cf = CONTAINERFILE.read_text()
    assert re.search(r"^FROM \S*python:3\.\d+-slim$", cf, re.M)
    assert re.search(r"pip install --no-cache-dir \.( |$)", cf, re.M)  # this tree, not an index
    for src in re.findall(r"^COPY (.+) \S+$", cf, re.M):
        for path in src.split():
            assert (REPO / path).exists(), path
    assert "libudev1" in cf and 'ENTRYPOINT ["topoagent"]' in cf


# -- the scrape: the job the rules match ------------------------------------------------------


def _rules_job() -> str:
    """The one job every shipped rule reads (``job="..."`` in each expression)."""
    jobs = set(re.findall(r'\bjob="([^"]+)"', RULES.read_text()))
    assert len(jobs) == 1, jobs
    return jobs.pop()


def test_the_podmonitor_scrapes_the_daemonset_as_the_rules_job(ds):
    """prometheus-operator takes the job from the pod label jobLabel names (else it is
    "<namespace>/<name>"): that label's value on the DaemonSet's pods must be the rules' job,
    and the PodMonitor must select those pods, in their namespace, on their metrics port."""
    docs = [d for d in yaml.safe_load_all(PODMONITOR.read_text()) if d]
    assert len(docs) == 1
    pm = docs[0]
    assert pm["apiVersion"] == "monitoring.coreos.com/v1" and pm["kind"] == "PodMonitor"
    pod_labels = ds["spec"]["template"]["metadata"]["labels"]
    assert pod_labels[pm["spec"]["jobLabel"]] == _rules_job() == "topoagent"
    assert pm["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert pm["spec"]["namespaceSelector"]["matchNames"] == [ds["metadata"]["namespace"]]
    ports = {p["name"] for c in ds["spec"]["template"]["spec"]["containers"] for p in c["ports"]}
    assert [e["port"] for e in pm["spec"]["podMetricsEndpoints"]] == ["metrics"] and "metrics" in ports


def test_the_daemonset_is_not_scraped_by_an_annotation_job_as_well(ds):
    """An annotation-driven job (kubernetes-pods) would scrape the pods under another job name,
    which no rule reads: one scrape, by the topoagent job."""
    annotations = ds["spec"]["template"]["metadata"].get("annotations") or {}
    assert not any(k.startswith("prometheus.io/") for k in annotations)


def test_the_scrape_configs_name_the_rules_job_and_load_the_rules(ds):
    for path in SCRAPE_CONFIGS:
        config = yaml.safe_load(path.read_text())
        assert [j["job_name"] for j in config["scrape_configs"]] == [_rules_job()], path
        assert [(path.parent / f).resolve() for f in config["rule_files"]] == [RULES.resolve()]
    kube = yaml.safe_load(SCRAPE_CONFIGS[0].read_text())["scrape_configs"][0]
    keep = {tuple(r["source_labels"]): r["regex"] for r in kube["relabel_configs"] if r.get("action") == "keep"}
    assert keep[("__meta_kubernetes_pod_label_app_kubernetes_io_name",)] == "topoagent"
    assert ds["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"] == "topoagent"
    assert keep[("__meta_kubernetes_pod_container_port_name",)] == "metrics"


def _promtool_has_kubernetes_sd(tmp_path) -> bool:
    """Debian's promtool is built without kubernetes_sd (it refuses the key)."""
    probe = tmp_path / "probe.yml"
    probe.write_text("scrape_configs:\n  - job_name: p\n    kubernetes_sd_configs:\n      - role: pod\n")
    p = subprocess.run(["promtool", "check", "config", str(probe)], capture_output=True, text=True, timeout=60)
    return p.returncode == 0


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed (Debian package prometheus)")
@pytest.mark.parametrize("path", SCRAPE_CONFIGS, ids=lambda p: p.name)
def test_the_scrape_configs_pass_promtool_check_config(path, tmp_path):
    """promtool check config on each shipped scrape configuration (with the rules it loads).
    Where promtool lacks kubernetes_sd, the file is checked with its service discovery replaced
    by one static target: every other key (relabelling included) is still checked."""
    checked = path
    if "kubernetes_sd_configs" in path.read_text() and not _promtool_has_kubernetes_sd(tmp_path):
        config = yaml.safe_load(path.read_text())
        for job in config["scrape_configs"]:
            del job["kubernetes_sd_configs"]
            job["static_configs"] = [{"targets": ["node-1:9464"]}]
        config["rule_files"] = [str(RULES)]
        checked = tmp_path / path.name
        checked.write_text(yaml.safe_dump(config))
    p = subprocess.run(["promtool", "check", "config", str(checked)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "SUCCESS" in p.stdout + p.stderr and "1 rule files found" in p.stdout + p.stderr


# -- one cause, one page: the rules on real scrapes ---------------------------------------------


def _series(instance: str, samples: list) -> list[dict]:
    """promtool input series of one node's scrape under the rules' job, constant for an hour."""
    out = []
    for s in samples:
        labels = {**s.labels, "job": "topoagent", "instance": instance}
        body = ", ".join(f"{k}={json.dumps(v)}" for k, v in sorted(labels.items()))
        out.append({"series": f"{s.name}{{{body}}}", "values": f"{s.value:g}x60"})
    return out


def _firing(nodes: dict[str, list]) -> dict[str, Counter]:
    """Each node's alerts firing after 40 minutes of its scrape, as promtool evaluates the rules:
    the test expects nothing and reads the count per alert and node back from the "got" line
    of promtool's failure (one run for every node, rather than one per expected answer)."""
    series = [x for name, samples in nodes.items() for x in _series(name, samples)]
    case = {
        "rule_files": [str(RULES)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "promql_expr_test": [
                    {
                        "expr": 'count by (alertname, instance) (ALERTS{alertstate="firing"})',
                        "eval_time": "40m",
                        "exp_samples": [],
                    }
                ],
            }
        ],
    }
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "case.yml"
        path.write_text(json.dumps(case))  # JSON is YAML
        p = subprocess.run(["promtool", "test", "rules", str(path)], capture_output=True, text=True, timeout=300)
    got: dict[str, Counter] = {name: Counter() for name in nodes}
    if p.returncode == 0:
        return got  # nothing fires anywhere
    found = re.search(r"^\s*got: (.*)$", p.stdout + p.stderr, re.M)
    assert found, p.stdout + p.stderr
    for labels, value in re.findall(r"\{([^}]*)\} (\S+?)(?:,|$)", found.group(1)):
        pairs = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        got[pairs["instance"]][pairs["alertname"]] += int(float(value))
    return got


def _rules() -> dict[str, str]:
    doc = yaml.safe_load(RULES.read_text())
    return {r["alert"]: r["expr"] for g in doc["groups"] for r in g["rules"] if "alert" in r}


def _causes(result, samples) -> Counter:
    """The pages one node's scrape should raise, one per cause: each finding code whose entry
    names an alert, once per node (once per device where the alert is by subject; once for all
    where it is by node alone), and each link the link watch judged degraded."""
    from topoagent.core.findings import CATALOGUE, Severity

    rules = _rules()
    keys: dict[str, set] = {}
    for f in result.findings:
        alert = CATALOGUE[f.code].alert
        if not alert or f.severity < Severity.WARNING:
            continue
        per = re.search(r"or on \(([^)]*)\)", rules[alert]).group(1)
        key = (f.code if "code" in per else "", f.subjects if "subject" in per else ())
        keys.setdefault(alert, set()).add(key)
    want = Counter({alert: len(k) for alert, k in keys.items()})
    links = {s.labels["link"] for s in samples if s.name == "topoagent_pcie_link_degraded" and s.value == 1}
    if links:
        want["TopoagentPcieLinkDegraded"] = len(links)
    gpus = {s.name: s.value for s in samples if s.name in ("topoagent_gpus", "topoagent_gpus_expected")}
    if gpus["topoagent_gpus"] < gpus["topoagent_gpus_expected"]:
        want["TopoagentGpuMissing"] = 1
    return want


#: Fault fixtures, each among healthy hosts of its class (its twin), or alone.
FAULT_FIXTURES = {
    "dgx-h100-faults": "dgx-h100",
    "gb200-tray-faults": "gb200-tray",
    "gb300-tray-faults": "gb300-tray",
    "hgx-b300-faults": "hgx-b300",
    "faulty-gpu-node": None,
    "wrong-socket-nic": None,
}


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed (Debian package prometheus)")
def test_every_fault_fixture_pages_once_per_cause(fixture_root):
    """Issue 40 item 3: each fault fixture's real scrape, beside three scrapes of its healthy twin
    (so a fingerprint apart from its class is an outlier), raises one page per cause -- platform
    faults included -- and its twins none; a fault that a node-level alert pages is not paged
    again by TopoagentTopologyOutlier."""
    nodes, want = {}, {}
    for faulty, twin in FAULT_FIXTURES.items():
        result = scan(fixture_root(faulty), nvml="off")
        nodes[faulty] = scrape(result)
        want[faulty] = _causes(result, nodes[faulty]) or Counter({"TopoagentTopologyOutlier": 1})
        for i in range(3 if twin else 0):
            nodes[f"{twin}-{i}"] = scrape(scan(fixture_root(twin), nvml="off"))
            want[f"{twin}-{i}"] = Counter()
    assert all(want[f] for f in FAULT_FIXTURES)
    assert want["gb300-tray-faults"]["TopoagentPlatformMisconfigured"] == 2  # ACS masks, IOMMU groups
    assert _firing(nodes) == want


#: The DGX hosts of tests/fleet_hosts.py that differ from the build by one fault, and the page
#: each must raise -- the pairs issue 40 found paging twice, then the rest.
ONE_PAGE = {
    "gpu-x8": "TopoagentPcieLinkDegraded",
    "nic-numa": "TopoagentNumaSwitchMismatch",
    "acs-on": "TopoagentGpuDirectBlocked",
    "gpu-offbus": "TopoagentDeviceFellOffBus",
    "gpu-gone": "TopoagentGpuMissing",
    "mgmt-gone": "TopoagentTopologyOutlier",  # no finding: the class tells
    "nic-moved": "TopoagentTopologyOutlier",  # GPU_NIC_VIA_HOST_BRIDGE, a warning that pages nothing
}


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed (Debian package prometheus)")
@pytest.mark.parametrize("expect", [False, True], ids=["fleet", "fleet+baseline"])
def test_each_fault_of_a_dgx_fleet_pages_once(fixture_root, expect):
    """A class of DGX H100 hosts (four good ones, an idle one, one scanned without root), and one
    host per fault: each faulty host raises exactly one page and the others none -- also where
    each daemon compares its node with the build's baseline (``expect``: every difference is an
    EXPECT_* finding too, paged by TopoagentNotAsExpected only where no hardware alert pages)."""
    from tests.fleet_hosts import FAULTY, MOVED, NIC0, _at, variant
    from topoagent.core.result import analyse, with_expected

    good = scan(fixture_root("dgx-h100"), nvml="off")
    build = good.baseline
    hosts = {**{f"good-{i}": "good" for i in range(4)}, "idle": "idle", "unprivileged": "unprivileged"}
    hosts.update({name: name for name in (*FAULTY, *MOVED)})
    nodes, want = {}, {}
    for host, name in [*hosts.items(), ("nic-numa", None)]:
        snap = variant(good.snapshot, name) if name else _at((NIC0,), numa_node=1)(good.snapshot)
        result = analyse(snap)
        if expect:
            result = with_expected(result, build)
        nodes[host] = scrape(result, expected_gpus=8)
        want[host] = 0 if host in ("idle", "unprivileged") or host.startswith("good") else 1
    got = _firing(nodes)
    assert {h: sum(c.values()) for h, c in got.items()} == want, got
    for host, alert in ONE_PAGE.items():
        if expect and alert == "TopoagentTopologyOutlier":
            alert = "TopoagentNotAsExpected"  # the node's own baseline says it first
        assert got[host] == Counter({alert: 1}), (host, got[host])
