"""deploy/: the DaemonSet and the Containerfile as their consumers read them.

The DaemonSet is loaded with PyYAML and checked for what makes it runnable: every mount names a
volume, the host's /sys and /run/udev are mounted read-only, the NVIDIA runtime class is asked
for, and the image is the one deploy/Containerfile builds (topoagent is on no package index).
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from tests.plan_helpers import REPO

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
