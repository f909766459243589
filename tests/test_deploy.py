"""deploy/: the DaemonSet and the Containerfile as their consumers read them.

The DaemonSet is loaded with PyYAML and checked for what makes it runnable: every mount names a
volume, the host's /sys and /run/udev are mounted read-only, the NVIDIA runtime class is asked
for, and the image is the one deploy/Containerfile builds (topoagent is on no package index).
"""

from __future__ import annotations

import re

import pytest

from tests.plan_helpers import REPO

yaml = pytest.importorskip("yaml")

DAEMONSET = REPO / "deploy/kubernetes/topoagent-daemonset.yaml"
CONTAINERFILE = REPO / "deploy/Containerfile"


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
