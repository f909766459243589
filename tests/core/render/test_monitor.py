"""``scan --exit-codes nagios|npd`` against the monitors' protocols, and the NPD plugin config.

Nagios (Plugin API, "Plugin Output"): the first line is ``STATUS-WORD text | perfdata``; the
status word agrees with the exit code (0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN); perfdata is
``'label'=value[UOM];[warn];[crit];[min];[max]`` separated by blanks; a ``|`` in later lines
would start more perfdata.  node-problem-detector (pkg/custompluginmonitor): exit 0 OK, 1 NonOK,
anything else Unknown; stdout cut at ``max_output_length`` (80 by default).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.plan_helpers import REPO, topoagent

STATUS = {0: "OK", 1: "WARNING", 2: "CRITICAL", 3: "UNKNOWN"}
PERF = re.compile(r"^('[^'=]+'|[^'= ]+)=-?[0-9.]+[a-zA-Z%]*(;-?[0-9.:~@]*){0,4}$")


def nagios_parse(stdout: str) -> tuple[str, str, list[str], list[str]]:
    """(status word, text, perfdata items, long output lines) as a Nagios core reads them."""
    first, *rest = stdout.rstrip("\n").split("\n")
    m = re.match(r"^TOPOAGENT (OK|WARNING|CRITICAL|UNKNOWN) - ([^|]*?)(?: \| (.*))?$", first)
    assert m, first
    return m.group(1), m.group(2), (m.group(3) or "").split(), rest


@pytest.mark.parametrize(
    "name, code",
    [
        ("dgx-h100", 0),
        ("dgx-a100-nps4", 0),
        # a healthy GB200 tray: DRA_PCIE_ROOT_MISMATCH is info (a fact about a claim the host may
        # never see), so Nagios is not WARNING forever (issue 32 item 12)
        ("gb200-tray", 0),
        ("sriov-nic", 1),  # GPU_NIC_VIA_HOST_BRIDGE (NODE) is its warning; DRA's is info
        ("wrong-socket-nic", 2),
        ("faulty-gpu-node", 2),
    ],
)
def test_nagios_first_line_is_status_text_and_perfdata(fixture_root, name, code):
    out = topoagent("scan", "--root", str(fixture_root(name)), "--exit-codes", "nagios")
    assert out.returncode == code, out.stderr
    word, text, perf, long = nagios_parse(out.stdout)
    assert word == STATUS[code]
    assert perf and all(PERF.match(p) for p in perf), perf
    counts = {p.split("=")[0]: int(p.split("=")[1].split(";")[0]) for p in perf}
    assert set(counts) == {"critical", "warning", "info"}
    assert all("|" not in line for line in long)
    assert len(long) == sum(counts.values())  # one line per finding
    if code == 2:
        assert text.startswith(f"{counts['critical']} critical")
        worst = long[0].split()[1]
        assert worst in text  # the worst finding's code is on the first line


def test_wrong_socket_names_the_cause_on_the_first_line(fixture_root):
    out = topoagent("scan", "--root", str(fixture_root("wrong-socket-nic")), "--exit-codes", "nagios")
    first = out.stdout.splitlines()[0]
    # the info is ACS_UNKNOWN: its 256-byte config space shows no ACS (issue 40)
    assert first.startswith("TOPOAGENT CRITICAL - 4 critical, 1 warning, 1 info: GPU_NIC_CROSS_SOCKET gpu0 nic2")
    assert first.endswith("| critical=4;;;0 warning=1;;;0 info=1;;;0")


@pytest.mark.parametrize("args", [("--bogus",), ("--format", "nope"), ("--root", "/nonexistent/x")])
@pytest.mark.parametrize("mode, word", [("nagios", "TOPOAGENT UNKNOWN - "), ("npd", "topoagent: ")])
def test_usage_and_scan_errors_are_unknown_not_critical(args, mode, word):
    for form in (("--exit-codes", mode), (f"--exit-codes={mode}",)):
        out = topoagent("scan", *form, *args)
        assert out.returncode == 3, (args, out.stdout, out.stderr)
        assert out.stdout.startswith(word) and len(out.stdout.splitlines()) == 1
        assert "Traceback" not in out.stderr
    assert topoagent("scan", *args).returncode == 2  # outside a monitor: the usual 2


def test_internal_error_is_unknown(monkeypatch, capsys):
    from topoagent import cli

    def boom(*_a, **_k):
        raise RuntimeError("boom")

    monkeypatch.setattr("topoagent.core.command.scan.run_scan", boom)
    with pytest.raises(SystemExit) as exc:
        cli.main(["scan", "--exit-codes", "nagios", "--root", str(REPO)])
    assert exc.value.code == 3
    assert capsys.readouterr().out.startswith("TOPOAGENT UNKNOWN - internal error: RuntimeError: boom")


@pytest.mark.parametrize(
    "name, code, first",
    [
        ("dgx-h100", 0, "topoagent: no finding"),
        ("wrong-socket-nic", 1, "GPU_NIC_CROSS_SOCKET gpu0 nic2"),
        ("faulty-gpu-node", 1, "ACS_REDIRECT bridge5"),
    ],
)
def test_npd_message_says_the_fault_within_80_characters(fixture_root, name, code, first):
    out = topoagent("scan", "--root", str(fixture_root(name)), "--exit-codes", "npd")
    assert out.returncode == code, out.stderr
    message = out.stdout[:80]  # what NPD keeps with max_output_length 80
    assert message.startswith(first)
    assert len(out.stdout.rstrip("\n")) <= 80


def test_npd_honours_fail_on(fixture_root):
    out = topoagent("scan", "--root", str(fixture_root("sriov-nic")), "--exit-codes", "npd", "--fail-on", "warning")
    assert out.returncode == 1 and out.stdout.strip()
    assert topoagent("scan", "--root", str(fixture_root("sriov-nic")), "--exit-codes", "npd").returncode == 0


# -- the node-problem-detector plugin config --------------------------------------------------


def _duration(text: str) -> float:
    """A Go duration as NPD parses it (time.ParseDuration), for the units used here."""
    m = re.fullmatch(r"(\d+)(ms|s|m|h)", text)
    assert m, text
    return int(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def test_npd_config_is_valid_for_the_custom_plugin_monitor():
    """The checks of NPD's pkg/custompluginmonitor/types/config.go (Validate) and the JSON tags of
    its structs (CustomPluginConfig, pluginGlobalConfig there; CustomRule in types.go): a key
    outside them is silently ignored by Go's decoder, so a misspelt one would never take effect."""
    cfg = json.loads((REPO / "deploy/node-problem-detector/topoagent-custom-plugin-monitor.json").read_text())
    assert set(cfg) <= {"plugin", "pluginConfig", "source", "conditions", "rules", "metricsReporting"}
    assert cfg["source"] and cfg["plugin"] == "custom"
    g = cfg["pluginConfig"]
    assert set(g) <= {
        "invoke_interval",
        "timeout",
        "max_output_length",
        "concurrency",
        "enable_message_change_based_condition_update",
        "skip_initial_status",
    }
    assert _duration(g["timeout"]) <= _duration(g["invoke_interval"])
    assert g["max_output_length"] >= 80 and g["concurrency"] >= 1
    conditions = {c["type"] for c in cfg["conditions"]}
    for rule in cfg["rules"]:
        assert set(rule) <= {"type", "condition", "reason", "path", "args", "timeout", "invoke_interval"}
        assert rule["type"] in ("temporary", "permanent")
        if rule["type"] == "permanent":
            assert rule["condition"] in conditions
        assert _duration(rule["timeout"]) <= _duration(g["timeout"])
        assert rule["args"][:3] == ["scan", "--exit-codes", "npd"]
        assert Path(rule["path"]).name == "topoagent"
