"""One host, one story (issue 40): every output of a scan is a view of one ``ScanResult``, so
side by side they tell the same verdict.

For every fixture machine (the fault fixtures among them) each output is produced the way its
consumer gets it -- the commands through the CLI, the daemon's ``/metrics`` text and NFD file
from a daemon status -- read back from its own text, and every pair of outputs that states a
property must state the same value of it:

- the devices present (the GPUs, by id where the output names them, else their count; the NICs);
- each GPU's usable state (which GPUs a finding makes unusable);
- the worst severity;
- the exit status (or drain, or NonOK) for the same ``--fail-on``;
- what is unknown (the kinds of fact the scan could not read).

Nothing here restates the expected answer: the outputs are compared with each other, and each
property is required to be stated by at least three of them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import msgspec
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.paths import TESTS
from tests.plan_helpers import run_cli
from topoagent.core.analysis.unknown import FACTS
from topoagent.core.api import scan
from topoagent.core.findings.catalogue import Output, codes_for
from topoagent.features.daemon.exports import nfd_features
from topoagent.features.daemon.metrics import render_text
from topoagent.features.daemon.status import Attempt, Status

MACHINES = sorted(p.stem for p in (TESTS / "fixtures/machines").glob("*.toml"))
THRESHOLDS = ("critical", "warning", "info")
SEVERITIES = ("info", "warning", "critical")  # least first: max() by index is the worst

#: A view: property -> the value an output states.
View = dict[str, Any]


def _worst(labels: list[str]) -> str | None:
    return max(labels, key=SEVERITIES.index) if labels else None


def _unknown_in(line: str | None) -> tuple[str, ...]:
    """The facts a text output's ``Unknown:`` line names (each starts the line or follows ``; ``)."""
    if line is None:
        return ()
    return tuple(f for f in FACTS if re.search(rf"(?:^Unknown: |; ){f} \(", line))


def _line(text: str, start: str) -> str | None:
    return next((x for x in text.splitlines() if x.startswith(start)), None)


def _cli(*args: str) -> Any:
    out = run_cli(*args)
    assert out.returncode in (0, 1), (args, out.returncode, out.stderr)
    return out


# -- the outputs, each read back from its own text -------------------------------------------------


def _tree(root: str) -> View:
    runs = {t: _cli("scan", "--root", root, "--all", "--fail-on", t) for t in THRESHOLDS}
    text = runs["critical"].stdout
    gpu_lines = re.findall(r"\[GPU\] (gpu\d+) .*", text)
    heads = re.findall(r"^  (CRITICAL|WARNING|INFO) \(\d+\)$", text, re.MULTILINE)
    return {
        "gpus": {m.split()[0] for m in gpu_lines} or set(),
        "gpu_count": len(gpu_lines),
        "nics": set(re.findall(r"\[NIC\] (nic\d+) ", text)),
        "unusable": {m.group(1) for m in re.finditer(r"\[GPU\] (gpu\d+) .*unusable: ", text)},
        "worst": _worst([h.lower() for h in heads]),
        "unknown": _unknown_in(_line(text, "Unknown: ")),
        **{f"exit:{t}": r.returncode for t, r in runs.items()},
    }


def _json(root: str) -> tuple[View, dict[str, Any]]:
    runs = {t: _cli("scan", "--root", root, "--format", "json", "--fail-on", t) for t in THRESHOLDS}
    doc = json.loads(runs["critical"].stdout)
    gpus = [d for d in doc["devices"] if d["kind"] == "gpu"]
    view = {
        "gpus": {d["id"] for d in gpus},
        "gpu_count": len(gpus),
        "nics": {d["id"] for d in doc["devices"] if d["kind"] == "nic"},
        "unusable": {d["id"] for d in gpus if d["usable"] is False},
        "worst": _worst([f["severity"] for f in doc["findings"]]),
        "unknown": tuple(u["fact"] for u in doc["unknown"]),
        **{f"exit:{t}": r.returncode for t, r in runs.items()},
    }
    return view, doc


def _matrix(root: str, doc: dict[str, Any]) -> View:
    out = run_cli("scan", "--root", root, "--format", "matrix")
    if not any(d["kind"] == "gpu" for d in doc["devices"]):
        assert out.returncode == 2  # no GPU: no matrix (README)
        return {}
    text = out.stdout
    view: View = {
        "gpu_count": len(re.findall(r"^GPU\d+\t", text, re.MULTILINE)),
        "unusable": set(re.findall(r"^  GPU\d+ \((gpu\d+)\) is unusable: ", text, re.MULTILINE)),
    }
    if view["gpu_count"] > 1:  # the matrix says what it cannot show of the pairs it prints
        view["nvlinks unknown"] = "?    = Unknown: NVLinks" in text
    return view


def _monitors(root: str) -> dict[str, View]:
    nagios = run_cli("scan", "--root", root, "--exit-codes", "nagios")
    perf = dict(re.findall(r"(critical|warning|info)=(\d+);", nagios.stdout.splitlines()[0]))
    npd = {t: run_cli("scan", "--root", root, "--exit-codes", "npd", "--fail-on", t) for t in THRESHOLDS}
    return {
        "nagios": {
            "worst": _worst([s for s, n in perf.items() if int(n)]),
            "nagios exit": nagios.returncode,
        },
        "npd": {f"exit:{t}": r.returncode for t, r in npd.items()},
    }


def _plan(root: str, doc: dict[str, Any]) -> dict[str, View]:
    text = _cli("plan", "--root", root)
    rows = re.findall(r"^(gpu\d+)  .*$", text.stdout, re.MULTILINE)
    plan_json = json.loads(_cli("plan", "--root", root, "--format", "json").stdout)
    views = {
        "plan text": {
            "gpus": set(rows),
            "gpu_count": len(rows),
            "unusable": set(re.findall(r"^(gpu\d+) .*unusable: ", text.stdout, re.MULTILINE)),
            "worst": _worst(re.findall(r"^  \[(critical|warning|info)\] ", text.stdout, re.MULTILINE)),
            "unknown": _unknown_in(_line(text.stdout, "Unknown: ")),
            "exit:critical": text.returncode,
        },
        "plan json": {
            "gpus": {g["gpu"] for g in plan_json["gpus"]},
            "gpu_count": len(plan_json["gpus"]),
            "unusable": {g["gpu"] for g in plan_json["gpus"] if not g["usable"]},
            "worst": _worst([f["severity"] for f in plan_json["findings"]]),
            "unknown": tuple(u["fact"] for u in plan_json["unknown"]),
        },
    }
    if any(d["kind"] == "gpu" for d in doc["devices"]):
        slurm = run_cli("plan", "--root", root, "--format", "slurm")
        if slurm.returncode == 0:  # (a host whose sockets are unknown may get no gres.conf: exit 2)
            left = re.findall(r"^# (gpu\d+) \(.*\) left out: unusable", slurm.stdout, re.MULTILINE)
            lines = re.findall(r"^Name=gpu ", slurm.stdout, re.MULTILINE)
            views["plan slurm"] = {"gpu_count": len(lines) + len(left), "unusable": set(left)}
        nccl = run_cli("plan", "--root", root, "--format", "nccl-topo")
        if nccl.returncode in (0, 1):  # an NCCL topology holds the GPUs NCCL on the host can use
            views["plan nccl-topo"] = {"usable_count": len(re.findall(r"<gpu\b", nccl.stdout))}
    dra = json.loads(_cli("plan", "--root", root, "--format", "dra").stdout)
    views["plan dra"] = {"gpus": {d["device"] for d in dra["devices"] if d["kind"] == "gpu"}}
    rails = json.loads(_cli("plan", "--root", root, "--format", "rails").stdout)
    views["plan rails"] = {"gpu_count": len(rails["gpus"])}
    return views


def _acting(root: str, doc: dict[str, Any]) -> dict[str, View]:
    health = {t: _cli("health", "--root", root, "--node", "n1", "--fail-on", t) for t in THRESHOLDS}
    audits = {t: _cli("audit", "--root", root, "--no-nvml", "--format", "json", "--fail-on", t) for t in THRESHOLDS}
    audit = json.loads(audits["critical"].stdout)
    views = {
        "health": {
            f"exit:{t}": 0 if "nothing at or above" in r.stdout.splitlines()[0] else 1 for t, r in health.items()
        },
        "audit json": {
            "gpus": {g["gpu"] for g in audit["gpus"]},
            "gpu_count": len(audit["gpus"]),
            "unusable": {g["gpu"] for g in audit["gpus"] if not g["usable"]},
            "worst": _worst([f["severity"] for f in audit["findings"]]),
            **{f"exit:{t}": r.returncode for t, r in audits.items()},
        },
    }
    # exec: each GPU the JSON calls unusable, and the first it does not, asked for by id
    gpus = [d for d in doc["devices"] if d["kind"] == "gpu"]
    asked = [d["id"] for d in gpus if d["usable"] is False] + [d["id"] for d in gpus if d["usable"]][:1]
    refused = set()
    for gpu in asked:
        out = run_cli("exec", "--root", root, "--gpu", gpu, "--dry-run", "--", "true")
        if "is unusable" in out.stderr:
            refused.add(gpu)
    views["exec"] = {"unusable": refused}
    views["exec asked"] = {"gpus": set(asked)}
    return views


def _draw(root: str) -> View:
    svg = _cli("draw", "--root", root, "--format", "svg").stdout
    tiles = re.findall(r'<g class="ta-tile [^"]*" id="[^"]*" data-id="([^"]*)"[^>]*data-usable="(true|false)"', svg)
    return {
        "gpus": {i for i, _ in tiles if i.startswith("gpu")},
        "gpu_count": sum(1 for i, _ in tiles if i.startswith("gpu")),
        "nics": {i for i, _ in tiles if i.startswith("nic")},
        "unusable": {i for i, u in tiles if u == "false"},
    }


def _daemon(root: str, doc: dict[str, Any]) -> dict[str, View]:
    """The daemon's exports of the same scan: ``/metrics`` (the textfile's text) and NFD."""
    result = scan(root, nvml="off")
    text = render_text(Status(started_at=0.0, result=result, last=Attempt(0.0, True, 0.1))).decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    ids = {d["bdf"]: d["id"] for d in doc["devices"]}
    unusable_codes = set(codes_for(Output.GPU_UNUSABLE))
    findings = families["topoagent_finding"].samples
    gpus = int(families["topoagent_gpus"].samples[0].value)
    info = families["topoagent_topology_info"].samples[0].labels["unknown"]
    per_sev = {s.labels["severity"]: s.value for s in families["topoagent_findings"].samples}
    nic_count = next(s.value for s in families["topoagent_devices"].samples if s.labels["kind"] == "nic")
    nfd = nfd_features(result, degraded_links=False)
    nfd_unknown, acs = nfd["topoagent.unknown"], nfd["topoagent.acs.blocking"]
    gpu_subjects = {d["bdf"] for d in doc["devices"] if d["kind"] == "gpu"}
    return {
        "metrics": {
            "gpu_count": gpus,
            "nic_count": int(nic_count),
            "unusable": {
                ids[s.labels["subject"]]
                for s in findings
                if s.labels["code"] in unusable_codes and s.labels["subject"] in gpu_subjects
            },
            "worst": _worst([s for s, n in per_sev.items() if n]),
            "unknown": () if info == "none" else tuple(info.split(",")),
        },
        "nfd": {
            "gpu_count": int(nfd["topoagent.gpu.count"]),
            "usable_count": int(nfd["topoagent.gpu.usable-count"]),
            "worst": None if nfd["topoagent.findings.worst"] == "none" else nfd["topoagent.findings.worst"],
            "unknown": () if nfd_unknown == "none" else tuple(nfd_unknown.split(".")),
            # acs.blocking=true: a redirect was read, which says nothing of the bridges not read
            **({} if acs == "true" else {"acs unknown": acs == "unknown"}),
        },
    }


def _derived(view: View) -> View:
    """A view with what its own statements imply of the narrower properties others state alone
    (a count from the ids; the usable count; whether ACS and NVLinks are among the unknown)."""
    out = dict(view)
    if "gpus" in view:
        out.setdefault("gpu_count", len(view["gpus"]))
    if "gpu_count" in view and "unusable" in view:
        out["usable_count"] = view["gpu_count"] - len(view["unusable"])
    if "nics" in view:
        out["nic_count"] = len(view["nics"])
    if "unknown" in view:
        out["acs unknown"] = "acs" in view["unknown"]
        if out.get("gpu_count", 2) > 1:  # the matrix states this where it prints GPU pairs
            out["nvlinks unknown"] = "nvlinks" in view["unknown"]
    return out


@pytest.mark.parametrize("machine", MACHINES)
def test_every_output_tells_the_same_story(fixture_root, machine):
    root = str(fixture_root(machine))
    json_view, doc = _json(root)
    views: dict[str, View] = {"scan tree": _tree(root), "scan json": json_view, "matrix": _matrix(root, doc)}
    views.update(_monitors(root))
    views.update(_plan(root, doc))
    views.update(_acting(root, doc))
    views["draw svg"] = _draw(root)
    views.update(_daemon(root, doc))
    asked = views.pop("exec asked")["gpus"]
    refused = views.pop("exec")["unusable"]
    nagios_exit = views["nagios"].pop("nagios exit")
    stated = {name: _derived(v) for name, v in views.items()}
    properties = sorted({p for v in stated.values() for p in v})
    assert {"gpus", "gpu_count", "unusable", "worst", "unknown", "exit:critical"} <= set(properties)
    for prop in properties:
        said = {name: v[prop] for name, v in stated.items() if prop in v}
        assert len(said) >= 3, (prop, sorted(said))
        values = list(said.values())
        assert all(v == values[0] for v in values), f"{machine}: outputs disagree on {prop}: {said}"
    # exec refuses exactly the GPUs the others call unusable, of those it was asked to run on
    assert refused == stated["scan json"]["unusable"] & asked
    assert asked or not stated["scan json"]["gpus"]
    # Nagios's exit status is its worst severity's (0 OK for info or none, 1 WARNING, 2 CRITICAL)
    assert nagios_exit == {"critical": 2, "warning": 1}.get(stated["scan json"]["worst"], 0)


# -- the newcomer's list (issue 40), each a regression test ---------------------------------------


def test_plan_tells_the_scans_story_of_a_gpu_that_fell_off_the_bus(fixture_root):
    """dgx-h100-faults: gpu0 fell off the bus, nic5 (gpu1's rail NIC) counted fatal AER errors.
    The plan gave gpu0 a rank, left nic5's errors out and exited 0 where scan exits 1."""
    root = str(fixture_root("dgx-h100-faults"))
    scanned = run_cli("scan", "--root", root)
    planned = run_cli("plan", "--root", root, "--format", "json")
    assert scanned.returncode == planned.returncode == 1
    plan = json.loads(planned.stdout)
    gpu0, gpu1 = plan["gpus"][0], plan["gpus"][1]
    assert (gpu0["gpu"], gpu0["usable"], gpu0["ranks"], gpu0["cpus"]) == ("gpu0", False, [], "")
    assert gpu1["usable"] and gpu1["ranks"][0]["local_rank"] == 0  # local rank 0 is the first usable GPU
    nic5 = next(n for n in gpu1["notes"] if n["code"] == "PCIE_AER_ERRORS")
    assert nic5["severity"] == "critical" and nic5["subjects"] == ["nic5"]
    assert all("gpu0" not in g["gpus"] for g in plan["numa_groups"])
    assert run_cli("plan", "--root", root, "--format", "env", "--local-rank", "0").stdout.count("-> gpu1 ") == 1
    refused = run_cli("plan", "--root", root, "--format", "env", "--gpu", "0")
    assert refused.returncode == 2 and "gpu0 is unusable: FELL_OFF_BUS" in refused.stderr
    text = run_cli("plan", "--root", root).stdout
    assert "[critical] PCIE_AER_ERRORS (nic5)" in text and re.search(r"^gpu0 .*unusable: FELL_OFF_BUS", text, re.M)
    gres = run_cli("plan", "--root", root, "--format", "slurm").stdout
    assert "# gpu0 (0000:1b:00.0) left out: unusable: FELL_OFF_BUS" in gres and "/dev/nvidia0 " not in gres


def test_acs_unread_on_a_gpus_path_is_unknown_in_every_output(fixture_root):
    """wrong-socket-nic (256-byte config space): the Sources line and /metrics said ACS was
    unknown, NFD said acs.blocking=false and no ACS_UNKNOWN was raised -- the README promises
    "ACS is reported as unknown (ACS_UNKNOWN), never as fine"."""
    root = fixture_root("wrong-socket-nic")
    result = scan(root, nvml="off")
    acs = next(f for f in result.findings if f.code == "ACS_UNKNOWN")
    assert acs.severity.label == "info" and "no PCIe extended space" in acs.message
    assert {result.topology.by_id(b).role.value for b in acs.subjects} == {"root_port"}  # above each GPU
    unknown = next(u for u in result.unknown if u.fact == "acs")
    assert unknown.subjects == acs.subjects
    assert nfd_features(result, degraded_links=False)["topoagent.acs.blocking"] == "unknown"
    text = render_text(Status(started_at=0.0, result=result, last=Attempt(0.0, True, 0.1))).decode()
    assert re.search(r'topoagent_topology_info\{[^}]*unknown="acs,nvlinks"', text)
    assert "ACS unknown there" in run_cli("scan", "--root", str(root)).stdout


def test_nvlinks_unknown_without_nvml_are_said_where_they_are_printed(fixture_root):
    """dgx-h100 scanned from its tree (NVML off): the matrix printed NODE/SYS between GPUs that
    nvidia-smi shows NV18 between, and only /metrics said unknown="nvlinks"."""
    from tests.fakenvml import make_fake
    from topoagent.core.render.matrix import render as matrix

    root = fixture_root("dgx-h100")
    text = run_cli("scan", "--root", str(root), "--format", "matrix").stdout
    gpu0 = next(x for x in text.splitlines() if x.startswith("GPU0\t")).split("\t")
    assert gpu0[2:9] == ["?"] * 7 and "PIX" in gpu0  # GPU pairs unknown, its NIC's path known
    assert "?    = Unknown: NVLinks between GPU0 GPU1" in text
    doc = json.loads(run_cli("scan", "--root", str(root), "--format", "json").stdout)
    pairs = [p for p in doc["paths"] if p["a"].startswith("gpu") and p["b"].startswith("gpu")]
    assert pairs and not any(p["links_known"] for p in pairs)
    assert [u["fact"] for u in doc["unknown"]] == ["nvlinks"]
    assert (
        "Unknown: nvlinks (gpu0, gpu1, gpu2 and 5 more: NVML not asked" in run_cli("scan", "--root", str(root)).stdout
    )
    # with NVML's view of the same host (a recorded HGX H100), the cells are nvidia-smi's and nothing is unknown
    known = scan(root, nvml=make_fake("hgx_h100_8gpu"))
    assert not known.unknown
    shown = next(x for x in matrix(known).splitlines() if x.startswith("GPU0\t")).split("\t")
    assert shown[2:9] == ["NV18"] * 7 and "Unknown" not in matrix(known)


def test_the_daemons_audit_findings_are_in_every_view_of_its_findings(tmp_path):
    """The daemon's audit raised PROCESS_* findings that topoagent_finding{code} and NFD's
    findings.worst left out: one result holds them all now."""
    from tests.daemon_helpers import quiet_config
    from tests.fakesysfs import generate, load_machine
    from tests.features.audit.test_audit import PROCESSES
    from tests.features.daemon.test_daemon_loop import Running

    desc = load_machine("dgx-h100")
    desc["machine"]["nvidia_procfs"] = True
    desc["process"] = PROCESSES
    host = generate(desc, tmp_path / "dgx")
    config = msgspec.structs.replace(quiet_config(host, tmp_path / "state"), audit=True)
    d = Running(config)
    try:
        d.scans(1)
        d.settle()
        status = d.daemon.status
        assert status.audit is not None and status.audit.findings
        codes = {f.code for f in status.audit.findings}
        assert codes <= {f.code for f in status.result.findings}
        fams = d.metrics()
        shown = {s.labels["code"] for s in fams["topoagent_finding"]}
        assert codes <= shown
        assert not any(s.labels["subject"].startswith("pid:") for s in fams["topoagent_finding"])
        worst = max(f.severity for f in status.result.findings)
        assert worst == max(f.severity for f in status.audit.findings)  # the fixture's scan finds less
        assert f"topoagent.findings.worst={worst.label}\n" in (Path(config.nfd_dir) / "topoagent").read_text()
    finally:
        d.stop()


def test_no_finding_where_the_evidence_shows_no_fault(fixture_root):
    """A healthy GB300 tray raised 8 LINK_SPEED_DEGRADED (info) whose own text said the slot
    cannot go faster; an MI300X gres.conf printed Links=0 beside an XGMI matrix without a word."""
    gb300 = scan(fixture_root("gb300-tray"), nvml="off")
    assert not [f for f in gb300.findings if f.code.startswith("LINK_")]
    mi300x = str(fixture_root("mi300x"))
    gres = run_cli("plan", "--root", mi300x, "--format", "slurm").stdout
    assert re.search(r"^Name=gpu .*Links=-1,0,0,0,0,0,0,0$", gres, re.M)
    assert "# Links= as gpu/rsmi writes them: -1 for the GPU itself, 0 for every other" in gres
    assert "XGMI" in run_cli("scan", "--root", mi300x, "--format", "matrix").stdout


def test_a_recalled_identity_keeps_the_expectation(scratch_root, fixture_root):
    """The daemon with ``expect`` set, a fallen-off GPU whose ids only its last good scan knew:
    the recall re-analysed the facts and dropped every EXPECT_* finding and the note that the
    comparison ran.  The expectation is now compared after the recall."""
    from topoagent.core.findings import CATALOGUE
    from topoagent.core.result import with_expected
    from topoagent.features.daemon.identity import recall_identity

    before = scan(fixture_root("dgx-h100-faults"), nvml="off")
    expected = scan(fixture_root("dgx-h100"), nvml="off").baseline
    root = scratch_root("dgx-h100-faults")
    gone = root / "sys/bus/pci/devices/0000:1b:00.0"
    for name in ("vendor", "device", "class"):
        (gone / name).unlink()
    new = with_expected(scan(root, nvml="off"), expected)
    assert new.topology.by_bdf("0000:1b:00.0").kind.value != "gpu"  # unknown without its ids
    recalled = recall_identity(before, new)
    assert recalled.topology.by_bdf("0000:1b:00.0").kind.value == "gpu"
    expect = [f for f in recalled.findings if CATALOGUE[f.code].family == "expect"]
    assert recalled.expectation is not None and recalled.expectation.differences == len(expect) > 0
    assert recalled.findings == with_expected(recall_identity(before, scan(root, nvml="off")), expected).findings
