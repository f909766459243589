"""Names are data, never structure (issue 20, item 5): hostile names in every field a host can
set -- host name, DMI, netdev, RDMA, VM names, ``.vmx`` values -- through every output format.
XML outputs must parse and hold the name as data; text outputs carry no raw control
characters and no line a name added."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st

from tests.formats import formats, renderer
from tests.paths import TESTS
from topoagent.cli import cli
from topoagent.core.api import scan
from topoagent.core.render.escape import shown, text_output, xml_attr, xml_text

NIC = "0000:18:00.0"  # dgx-h100: mlx5_0 / ibp24s0, a rail NIC
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
HOSTILE = [
    "\x1b[31m",
    "\n",
    "\r",
    '"',
    "'",
    "<",
    ">",
    "&",
    "]]>",
    "\x07",
    "\x7f",
    "\x85",
    "é",
    " ",
    "|0A",
    "--x",
    "%",
    "\t",
    "\x00",
]
#: A name as a host could set it: hostile pieces between ordinary characters.
names = st.lists(
    st.sampled_from(HOSTILE) | st.text("abc_-.0123456789", min_size=1, max_size=3), min_size=1, max_size=6
).map("".join)
FILE_NAME = names.map(lambda n: n.replace("\x00", "").replace("/", "") or "x").filter(lambda n: n not in (".", ".."))

#: A few names per run, new ones each run (not derandomized): every run renders each drawn name
#: through every format, so runs add up to many names without one run paying for them all.
FUZZ = settings(
    max_examples=8,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


@pytest.fixture(scope="module")
def base(module_tmp):
    """The module's own DGX tree: each hostile tree is made in it and undone (no copy)."""
    from tests.fakesysfs import generate

    return generate("dgx-h100", module_tmp / "dgx")


@pytest.fixture(scope="module")
def benign(base):
    """The scan of the tree with its own names."""
    return scan(str(base), nvml="off")


@contextlib.contextmanager
def hostile_tree(base: Path, host: str, dmi: str, netdev: str, rdma: str) -> Iterator[Path]:
    """``base`` with the names given to the host, its DMI product, one NIC's netdev and RDMA
    device; put back on leaving."""
    hostname, product = base / "proc/sys/kernel/hostname", base / "sys/class/dmi/id/product_name"
    saved = hostname.read_bytes(), product.read_bytes()
    dev = Path(os.path.realpath(base / f"sys/bus/pci/devices/{NIC}"))
    moves = [(dev / "net/ibp24s0", dev / "net" / netdev), (dev / "infiniband/mlx5_0", dev / "infiniband" / rdma)]
    moves += [
        (base / "sys/class" / cls / old, base / "sys/class" / cls / new)
        for cls, old, new in (("net", "ibp24s0", netdev), ("infiniband", "mlx5_0", rdma))
    ]
    done: list[tuple[Path, Path]] = []
    try:
        hostname.write_text(host.replace("\x00", "") + "\n")
        product.write_text(dmi.replace("\x00", "") + "\n")
        for old, new in moves:
            if old != new and os.path.lexists(old):
                os.rename(old, new)
                done.append((old, new))
        yield base
    finally:
        for old, new in reversed(done):
            os.rename(new, old)
        hostname.write_bytes(saved[0])
        product.write_bytes(saved[1])


def check_text(fmt: str, out: str, benign: str) -> None:
    assert not RAW_CONTROL.search(out), (fmt, out)
    assert out.count("\n") == benign.count("\n"), fmt  # no line added by a name


@FUZZ
@given(host=names, dmi=names, netdev=FILE_NAME, rdma=FILE_NAME)
def test_hostile_host_names_in_every_scan_plan_and_draw_format(base, benign, host, dmi, netdev, rdma):
    with hostile_tree(base, host, dmi, netdev, rdma) as root:
        result = scan(str(root), nvml="off")
    assert result.topology.snapshot.hostname is not None
    for command in ("scan", "plan", "draw"):
        for fmt in formats(command):
            if fmt == "env":  # one rank's: tested through the CLI below
                continue
            out = renderer(command, fmt)(result)
            if fmt in ("json", "rails", "dra"):  # JSON documents: names are JSON strings
                json.loads(out)
            elif fmt in ("svg", "nccl-topo"):
                doc = ET.fromstring(out)  # well-formed, the names held as data
                if fmt == "nccl-topo":
                    nets = [e.get("name") for e in doc.iter("net")]
                    assert xml_text(rdma).replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&") in nets
                else:
                    assert not RAW_CONTROL.search(out)
            elif fmt in ("html", "dot"):
                assert not RAW_CONTROL.search(out), (fmt, out)
            else:
                check_text(f"{command} {fmt}", out, renderer(command, fmt)(benign))


def test_hostname_newline_adds_no_slurm_line(base):
    with hostile_tree(base, "evil\nNodeName=x Gres=gpu:99", "d", "ibp24s0", "mlx5_0") as root:
        out = renderer("plan", "slurm")(scan(str(root), nvml="off"))
    assert all(line.startswith(("#", "Name=gpu")) for line in out.splitlines()), out
    assert "evil\\x0aNodeName=x" in out


def test_rdma_name_with_quote_makes_well_formed_nccl_topo(base):
    with hostile_tree(base, "h", "d", "ibp24s0", 'mlx5_0" evil="1<&') as root:
        doc = ET.fromstring(renderer("plan", "nccl-topo")(scan(str(root), nvml="off")))
    assert 'mlx5_0" evil="1<&' in [e.get("name") for e in doc.iter("net")]
    assert all(e.get("evil") is None for e in doc.iter())


def test_control_characters_make_well_formed_svg(base):
    with hostile_tree(base, "host\x1b\x07\x0b", "dmi\x01", "ib\x1bx", "mlx\x02") as root:
        ET.fromstring(renderer("draw", "svg")(scan(str(root), nvml="off")))


VMX = """displayName = "{name}"
pciPassthru0.present = "TRUE"
pciPassthru0.id = "00000:024:00.0"
sched.cpu.affinity = "{value}"
"""
ESXCLI = TESTS / "vms_samples/esxcli-hardware-pci-list-esxi7.txt"


def vmx_escape(text: str) -> str:
    """VMware's own escaping in .vmx values: |XX is the byte XX in hex."""
    return "".join(f"|{ord(c):02X}" if c in '|"#\n\r\x1b\x07' or ord(c) < 0x20 else c for c in text)


@FUZZ
@given(name=names, value=names)
def test_hostile_vm_names_and_vmx_values(tmp_path, name, value):
    # An affinity that is empty once NULs are gone is no hostile value but no affinity at all,
    # which rightly drops the affinity note: the line count below compares like with like.
    assume(value.replace("\x00", "").strip())
    vmx = tmp_path / "vm.vmx"
    vmx.write_text(VMX.format(name=vmx_escape(name.replace("\x00", "")), value=vmx_escape(value.replace("\x00", ""))))
    benign = tmp_path / "ok.vmx"
    benign.write_text(VMX.format(name="ok", value="0-3"))
    for fmt in ("text", "json"):
        out = CliRunner().invoke(cli, ["vms", "--esxcli-pci", str(ESXCLI), "--vmx", str(vmx), "--format", fmt])
        assert out.exception is None or isinstance(out.exception, SystemExit), out.exception
        if fmt == "json":
            json.loads(out.output)
            continue
        ok = CliRunner().invoke(cli, ["vms", "--esxcli-pci", str(ESXCLI), "--vmx", str(benign), "--format", fmt])
        assert not RAW_CONTROL.search(out.output), out.output
        assert out.output.count("\n") == ok.output.count("\n"), out.output


@pytest.mark.parametrize(
    "fn, raw, want",
    [
        (shown, "a\x1b[31mb\nc", "a\\x1b[31mb\\x0ac"),
        (text_output, "a\x1bb\n\tc\x85", "a\\x1bb\n\tc\\x85"),
        (xml_text, "<a&b>\x01\n", "&lt;a&amp;b&gt;\ufffd\n"),
        (xml_attr, "\"'<&>\t\n\r\x1b", "&quot;&#x27;&lt;&amp;&gt;&#9;&#10;&#13;\ufffd"),
    ],
)
def test_one_rule_per_format(fn, raw, want):
    assert fn(raw) == want


# A two-line marker in every name a host or an input sets: the second line is a command that
# would leave a file behind if any output let it start a line of its own.
def _marker(field: str) -> str:
    return f"{field}\ntouch PWNED-{field} #"


@pytest.fixture(scope="module")
def planted(module_tmp):
    from tests.fakesysfs import generate

    base = generate("wrong-socket-nic", module_tmp / "planted")
    nic = next(p for p in (base / "sys/class/infiniband").iterdir())
    bdf = os.path.basename(os.path.realpath(nic / "device"))
    dev = Path(os.path.realpath(base / f"sys/bus/pci/devices/{bdf}"))
    netdev = next((dev / "net").iterdir()).name
    root = base
    (root / "proc/sys/kernel/hostname").write_text(_marker("host") + "\n")
    (root / "sys/class/dmi/id/product_name").write_text(_marker("dmi") + "\n")
    new_net, new_rdma = _marker("netdev"), _marker("rdma")
    os.rename(dev / "net" / netdev, dev / "net" / new_net)
    os.rename(dev / "infiniband" / nic.name, dev / "infiniband" / new_rdma)
    os.rename(root / "sys/class/net" / netdev, root / "sys/class/net" / new_net)
    os.rename(root / "sys/class/infiniband" / nic.name, root / "sys/class/infiniband" / new_rdma)
    return root


def _no_planted_line(out: str) -> None:
    assert not any(line.lstrip().startswith("touch ") for line in out.splitlines()), out


def test_planted_markers_start_no_line_in_any_scan_plan_or_draw_format(planted):
    result = scan(str(planted), nvml="off")
    assert any("rdma" in f.message for f in result.findings)  # a message quotes the NIC's name
    for command in ("scan", "plan", "draw"):
        for fmt in formats(command):
            if fmt == "env":  # quoted values may hold a newline: run by the shell below instead
                continue
            out = renderer(command, fmt)(result)
            if fmt in ("json", "rails", "dra"):
                json.loads(out)
            elif fmt in ("svg", "nccl-topo"):
                ET.fromstring(out)
            else:
                _no_planted_line(out)


def test_eval_of_plan_env_runs_nothing_a_name_carries(planted, tmp_path):
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash")
    for rank in range(4):
        out = CliRunner().invoke(
            cli, ["plan", "--root", str(planted), "--no-nvml", "--format", "env", "--local-rank", str(rank)]
        )
        assert out.exit_code == 1, out.output  # the plan's verdict is the scan's: GPU_NIC_CROSS_SOCKET
        comments = [line for line in out.output.splitlines() if line.startswith("#")]
        assert any("rdma\\x0atouch" in line for line in comments), out.output  # the name, on its comment line
        subprocess.run([bash, "-c", 'eval "$1"', "_", out.output], check=True, cwd=tmp_path)
    assert not list(tmp_path.glob("PWNED*"))


def test_exec_dry_run_keeps_a_hostile_cuda_visible_devices_on_one_comment_line(planted, tmp_path):
    env = {"CUDA_VISIBLE_DEVICES": "0\n\n,1", "SLURM_LOCALID": "0"}  # accepted: CUDA strips the blanks
    out = CliRunner().invoke(
        cli, ["exec", "--root", str(planted), "--no-nvml", "--auto", "--dry-run", "--", "true"], env=env
    )
    assert "# CUDA_VISIBLE_DEVICES=0\\x0a\\x0a,1 kept" in out.output, out.output
    assert not any(line.startswith(",1") or not line for line in out.output.splitlines()), out.output


def test_fleet_text_and_stderr_keep_hostile_names_on_their_lines(planted, tmp_path):
    doc = CliRunner().invoke(cli, ["scan", "--root", str(planted), "--no-nvml", "--format", "json"])
    good = tmp_path / "good.json"
    good.write_text(doc.output)
    bad = tmp_path / _marker("file")
    bad.write_text("{not json")
    run = subprocess.run(
        [sys.executable, "-m", "topoagent", "fleet", str(good), str(bad)], capture_output=True, text=True
    )
    _no_planted_line(run.stdout)
    _no_planted_line(run.stderr)
    assert len(run.stderr.splitlines()) == 1, run.stderr


def test_a_name_that_is_not_utf8_is_written_as_its_bytes_in_every_format(base):
    """Issue 31 item 4: an undecodable byte in a name (held as a lone surrogate, PEP 383) ended
    every JSON output in UnicodeEncodeError.  Every format now writes it as ``\\xNN``."""
    with hostile_tree(base, "h", "d", "ibp24s0", os.fsdecode(b"mlx5_\xff")) as root:
        result = scan(str(root), nvml="off")
        assert "mlx5_\udcff" in next(d for d in result.topology.nics if d.bdf == NIC).rdma_devices
        for command in ("scan", "plan", "draw"):
            for fmt in formats(command):
                out = renderer(command, fmt)(result, **({"local_rank": 0} if fmt == "env" else {}))
                out.encode()  # encodable
                if fmt in ("json", "rails", "dra"):
                    json.loads(out)
                if fmt == "json":
                    assert '"mlx5_\\\\xff"' in out  # the JSON string holds the text \xff
        doc = CliRunner().invoke(cli, ["scan", "--root", str(root), "--no-nvml", "--format", "json"])
        assert doc.exit_code == 0 and '"mlx5_\\\\xff"' in doc.output


def test_fleet_json_names_a_file_that_is_not_utf8(base, tmp_path):
    good = tmp_path / "good.json"
    good.write_text(CliRunner().invoke(cli, ["scan", "--root", str(base), "--no-nvml", "--format", "json"]).output)
    bad = os.fsencode(tmp_path) + b"/host-\xff.json"
    with open(bad, "w") as fh:
        fh.write("{not json")
    run = subprocess.run(
        [sys.executable, "-m", "topoagent", "fleet", "--format", "json", str(good), os.fsdecode(bad)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1 and len(run.stderr.splitlines()) == 1, run.stderr
    assert json.loads(run.stdout)["unreadable"][0]["file"].endswith("host-\\xff.json")
