"""``topoagent draw``: every fixture in every format, the SVG's structure, the layout's promises
(no overlapping tiles or labels, deterministic), the command, and the real trees."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
from itertools import combinations, pairwise
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.formats import RENDERERS, renderer
from tests.paths import TESTS
from topoagent.cli import cli
from topoagent.core.api import run, scan
from topoagent.core.bdf import bdf_key
from topoagent.core.inputs import Inputs
from topoagent.core.result import ScanResult
from topoagent.features.draw.layout import CHAR_W, MAX_WIDTH, Layout, Rect, layout

MACHINES = sorted(p.stem for p in (TESTS / "fixtures" / "machines").glob("*.toml"))
FORMATS = ("svg", "html", "dot")
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def scans(fixture_root) -> dict[str, ScanResult]:
    cache: dict[str, ScanResult] = {}

    def get(name: str) -> ScanResult:
        if name not in cache:
            cache[name] = scan(fixture_root(name), nvml="off")
        return cache[name]

    return get  # type: ignore[return-value]


def big_machine() -> dict:
    """A 16-GPU/18-NIC host: the DGX H100 rail block under 16 root buses, plus a storage card."""
    from tests.fakesysfs import load_machine

    desc = load_machine("dgx-h100")
    rails = [f"0000:{0x08 + 0x0F * i:02x}" for i in range(16)]
    desc["rootbus"] = [
        {"id": rails[:8], "node": 0, "tree": "@rail"},
        {"id": rails[8:], "node": 1, "tree": "@rail"},
        {"id": "0000:f8", "node": 1, "tree": "01.0 spr-rp\n  00.0 cx7-eth\n  00.1 cx7-eth\n"},
    ]
    return desc


@pytest.fixture(scope="module")
def big(module_tmp) -> ScanResult:
    from tests.fakesysfs import generate

    root = generate(big_machine(), module_tmp / "big")
    return scan(root, nvml="off")


def offline_result() -> ScanResult:
    samples = TESTS / "offline_samples"
    return run(Inputs(nvidia_smi_topo_text=(samples / "plx4_v100_topo.txt").read_text(), nvml="off"))


# -- structure checks shared by every input --------------------------------------------------


def svg_root(text: str) -> ET.Element:
    return ET.fromstring(text)


def groups(root: ET.Element, cls: str) -> list[ET.Element]:
    return [g for g in root.iter(f"{SVG}g") if cls in (g.get("class") or "").split()]


def rect_of(el: ET.Element) -> Rect:
    r = el.find(f"{SVG}rect")
    assert r is not None
    return Rect(float(r.get("x")), float(r.get("y")), float(r.get("width")), float(r.get("height")))


def check_svg(result: ScanResult, text: str) -> None:
    """One tile per GPU and NIC, one tie per rail with a NIC, one mark per cross-socket or ACS
    finding, ids unique, nothing external, no two tiles overlapping."""
    root = svg_root(text)
    topo = result.topology
    tiles = groups(root, "ta-tile")
    tiles = [t for t in tiles if t.get("data-id")]  # legend swatches carry no device
    by_kind: dict[str, list[ET.Element]] = {}
    for t in tiles:
        by_kind.setdefault(t.get("data-kind"), []).append(t)
    assert sorted(t.get("data-id") for t in by_kind.get("gpu", [])) == sorted(d.id for d in topo.gpus)
    assert sorted(t.get("data-id") for t in by_kind.get("nic", [])) == sorted(d.id for d in topo.nics)
    for t in tiles:
        d = topo.by_id(t.get("data-id"))
        assert d is not None and t.get("data-bdf") == (d.bdf or "") and t.get("data-key") == d.key
        assert t.get("id") == f"tile-{d.id}"

    ties = [g for g in groups(root, "ta-tie") if g.get("data-gpu")]
    rails = [r for r in result.rails.rails if r.nic is not None]
    assert sorted((t.get("data-gpu"), t.get("data-nic")) for t in ties) == sorted((r.gpu, r.nic) for r in rails)
    for t in ties:
        g, n = topo.by_id(t.get("data-gpu")), topo.by_id(t.get("data-nic"))
        assert t.get("data-gpu-bdf") == (g.bdf or "") and t.get("data-nic-bdf") == (n.bdf or "")
        assert t.find(f"{SVG}text").text == result.path(g.id, n.id).cell  # "?" where no input shows it

    for code in ("GPU_NIC_CROSS_SOCKET", "GPU_NIC_CROSS_NUMA", "ACS_REDIRECT"):
        expected = [f for f in result.findings if f.code == code]
        marked = [e for e in root.iter() if e.get("data-finding") == code]
        assert len(marked) == len(expected), code
        if code == "ACS_REDIRECT":
            assert sorted(e.get("data-bdf") for e in marked) == sorted(topo.by_id(f.subjects[0]).bdf for f in expected)
        else:
            assert sorted((e.get("data-gpu"), e.get("data-nic")) for e in marked) == sorted(
                f.subjects[:2] for f in expected
            )
            assert all("ta-cls-bad" in e.get("class") for e in marked)

    ids = [e.get("id") for e in root.iter() if e.get("id")]
    assert len(ids) == len(set(ids))
    assert "href" not in text and "@import" not in text and "<script" not in text and "url(" not in text

    boxes = [rect_of(t) for t in tiles] + [rect_of(c) for c in groups(root, "ta-chip")]
    for a, b in combinations(boxes, 2):
        assert not a.overlaps(b), (a, b)


def check_layout(lay: Layout) -> None:
    """Text fits its tile, labels overlap no tile, chip or other label, all inside the canvas."""
    solid = [t.rect for t in lay.tiles] + [c.rect for c in lay.chips]
    labels = [t.label for t in lay.ties]
    for t in lay.tiles:
        assert all(len(line) * CHAR_W <= t.rect.w - 10 for line in t.lines), t.lines
    for lab in labels:
        assert not any(lab.overlaps(r) for r in solid), lab
    for a, b in combinations(labels, 2):
        assert not a.overlaps(b), (a, b)
    for r in solid + labels + [r.rect for r in lay.regions]:
        assert r.x >= 0 and r.right <= lay.width and r.y >= 0 and r.bottom <= lay.height


# -- every fixture, every format -------------------------------------------------------------


def test_registered() -> None:
    assert {fmt for cmd, fmt in RENDERERS if cmd == "draw"} == set(FORMATS)


@pytest.mark.parametrize("name", MACHINES)
def test_fixture_svg(name: str, scans) -> None:
    result = scans(name)
    text = renderer("draw", "svg")(result)
    check_svg(result, text)
    check_layout(layout(result))


@pytest.mark.parametrize("name", MACHINES)
def test_fixture_html(name: str, scans) -> None:
    result = scans(name)
    page = renderer("draw", "html")(result)  # as the daemon calls it: no options
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert "<svg" in page and 'id="ta-devices"' in page and "data-ready" in page
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in page and "src=" not in page
    for f in result.findings:
        assert f.code in page
    if result.topology.gpus:
        assert "GPU0" in page  # the matrix


@pytest.mark.parametrize("name", MACHINES)
def test_fixture_dot(name: str, scans) -> None:
    result = scans(name)
    text = renderer("draw", "dot")(result)
    assert text.startswith("digraph topoagent {")
    for r in result.rails.rails:
        if r.nic is not None:
            assert f'id="tie-{r.gpu}-{r.nic}"' in text
    if shutil.which("dot"):
        proc = subprocess.run(["dot", "-Tsvg"], input=text, capture_output=True, text=True, timeout=60, check=False)
        assert proc.returncode == 0, proc.stderr
        assert "<svg" in proc.stdout
    if shutil.which("neato"):  # what --format png runs: the layout's positions, kept; no warning
        proc = subprocess.run(
            ["neato", "-n2", "-Tsvg"], input=text, capture_output=True, text=True, timeout=60, check=False
        )
        assert proc.returncode == 0 and not proc.stderr, proc.stderr
        assert "<svg" in proc.stdout


@pytest.mark.parametrize("name", MACHINES)
def test_deterministic(name: str, fixture_root, scans) -> None:
    result = scans(name)
    again = scan(fixture_root(name), nvml="off")
    for fmt in FORMATS:
        assert renderer("draw", fmt)(result) == renderer("draw", fmt)(again)


# -- what the picture must show ----------------------------------------------------------------


def test_dgx_h100_rails_are_short_pix_ties(scans) -> None:
    result = scans("dgx-h100")
    lay = layout(result)
    assert len(lay.ties) == 8 and {t.token for t in lay.ties} == {"PIX"}
    # Each GPU sits right above its NIC: a straight tie through the gap between them.
    for t in lay.ties:
        (x0, y0), (x1, y1) = t.points
        assert x0 == x1 and 0 < y1 - y0 <= 30
    assert [r.ident for r in lay.regions if r.kind == "socket"] == ["socket-0", "socket-1"]
    assert sum(1 for r in lay.regions if r.kind == "interconnect") == 1
    storage = [t for t in lay.tiles if t.role == "storage"]
    assert len(storage) == 4 and all(not any(t.device in (x.gpu, x.nic) for x in lay.ties) for t in storage)


def _crosses(points: tuple[tuple[float, float], ...], band: Rect) -> bool:
    for (x1, y1), (x2, y2) in pairwise(points):
        if min(x1, x2) <= band.x and max(x1, x2) >= band.right and band.y <= y1 <= band.bottom:
            return True
        if min(y1, y2) <= band.y and max(y1, y2) >= band.bottom and band.x <= x1 <= band.right:
            return True
    return False


def test_wrong_socket_ties_cross_the_interconnect(scans) -> None:
    result = scans("wrong-socket-nic")
    lay = layout(result)
    band = next(r.rect for r in lay.regions if r.kind == "interconnect")
    assert len(lay.ties) == 4
    for t in lay.ties:
        assert t.finding == "GPU_NIC_CROSS_SOCKET" and t.token == "SYS"
        assert _crosses(t.points, band)


def test_faulty_node_marks(scans) -> None:
    result = scans("faulty-gpu-node")
    root = svg_root(renderer("draw", "svg")(result))
    acs = [e for e in root.iter() if e.get("data-finding") == "ACS_REDIRECT"]
    assert [e.get("data-bdf") for e in acs] == ["0000:17:01.0"]
    degraded = {e.get("data-id"): e for e in root.iter(f"{SVG}line") if e.get("data-finding")}
    assert set(degraded) == {"gpu2", "nic6"}
    assert all(float(e.get("stroke-width")) < 2 for e in degraded.values())  # thinner than an x16 link
    gpu2 = next(t for t in layout(result).tiles if t.device == "gpu2")
    assert gpu2.degraded and gpu2.lines[2].startswith("⚠ x8/16")


def test_cloud_vm_numa_unknown(scans) -> None:
    lay = layout(scans("cloud-vm"))
    unknown = [r for r in lay.regions if r.kind == "unknown"]
    assert [r.title for r in unknown] == ["NUMA node unknown"]
    assert all(t.numa_unknown for t in lay.tiles)
    assert all(unknown[0].rect.x <= t.rect.x and t.rect.bottom <= unknown[0].rect.bottom for t in lay.tiles)


def test_big_host(big: ScanResult) -> None:
    assert (len(big.topology.gpus), len(big.topology.nics)) == (16, 18)
    text = renderer("draw", "svg")(big)
    check_svg(big, text)
    lay = layout(big)
    check_layout(lay)
    assert lay.width <= MAX_WIDTH
    assert renderer("draw", "svg")(big) == text


def test_offline_matrix_only() -> None:
    result = offline_result()
    text = renderer("draw", "svg")(result)
    check_svg(result, text)
    check_layout(layout(result))
    assert 'data-key="nvidia-smi:GPU0"' in text and 'id="socket-unknown"' in text


# -- real trees --------------------------------------------------------------------------------


def test_real_trees(real_tree_roots: dict[str, Path]) -> None:
    assert real_tree_roots
    for name, root in real_tree_roots.items():
        result = scan(root, nvml="off")
        text = renderer("draw", "svg")(result)
        check_svg(result, text)
        check_layout(layout(result))
        assert text == renderer("draw", "svg")(scan(root, nvml="off")), name
        assert "<svg" in renderer("draw", "html")(result)
        dot = renderer("draw", "dot")(result)
        assert dot.startswith("digraph")
        for cmd in (["neato", "-n2", "-Tpng"], ["dot", "-Tpng"]):
            if shutil.which(cmd[0]):
                proc = subprocess.run(cmd, input=dot.encode(), capture_output=True, timeout=120, check=False)
                assert proc.returncode == 0 and proc.stdout.startswith(b"\x89PNG"), (name, cmd, proc.stderr[-300:])


# -- the command -------------------------------------------------------------------------------


def test_cli_formats(fixture_root, tmp_path: Path) -> None:
    root = str(fixture_root("wrong-socket-nic"))
    runner = CliRunner()
    res = runner.invoke(cli, ["draw", "--root", root, "--no-nvml"])
    assert res.exit_code == 0 and res.output.startswith("<svg")
    for fmt in FORMATS:
        out = tmp_path / f"x.{fmt}"
        res = runner.invoke(cli, ["draw", "--root", root, "--no-nvml", "--format", fmt, "-o", str(out)])
        assert res.exit_code == 0, res.output
        assert out.read_text() == renderer("draw", fmt)(scan(root, nvml="off"))


def test_cli_offline_input() -> None:
    topo = TESTS / "offline_samples" / "plx4_v100_topo.txt"
    res = CliRunner().invoke(cli, ["draw", "--nvidia-smi-topo", str(topo), "--format", "html"])
    assert res.exit_code == 0 and "GPU3" in res.output


def test_cli_bad_root_and_output(tmp_path: Path, fixture_root) -> None:
    res = subprocess.run(
        [sys.executable, "-m", "topoagent", "draw", "--root", str(tmp_path / "nope")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert res.returncode == 2 and res.stderr.startswith("topoagent: ") and len(res.stderr.splitlines()) == 1
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "topoagent",
            "draw",
            "--root",
            str(fixture_root("workstation")),
            "--no-nvml",
            "-o",
            str(tmp_path / "no" / "dir" / "x.svg"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert res.returncode == 2 and "cannot write" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot not installed (apt-get install graphviz)")
def test_cli_png(fixture_root, tmp_path: Path) -> None:
    root = str(fixture_root("dgx-h100"))
    out = tmp_path / "x.png"
    res = CliRunner().invoke(cli, ["draw", "--root", root, "--no-nvml", "--format", "png", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert out.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    proc = subprocess.run(
        [sys.executable, "-m", "topoagent", "draw", "--root", root, "--no-nvml", "--format", "png"],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0 and proc.stdout.startswith(b"\x89PNG")


def _tile_pos(text: str) -> dict[str, tuple[float, float]]:
    """Device id -> the centre the DOT gives its tile (Graphviz points, y up)."""
    return {m[1]: (float(m[2]), float(m[3])) for m in re.finditer(r'id="tile-([^"]+)", pos="([\d.]+),([\d.]+)"', text)}


def _bus_ordered_rows(result: ScanResult, pos: dict[str, tuple[float, float]]) -> None:
    """Tiles side by side (one y) in one NUMA node stand left to right in PCI bus order (nodes
    stand in node order: on an NPS4 host node 1 may hold bus 0x40 and node 3 bus 0x00)."""
    rows: dict[tuple[float, int | None], list[str]] = {}
    for ident, (_, y) in pos.items():
        rows.setdefault((round(y), result.topology.by_id(ident).numa_node), []).append(ident)  # type: ignore[union-attr]
    keys = {d.id: bdf_key(d.bdf) for d in result.topology.devices if d.bdf}
    for row in rows.values():
        by_x = sorted(row, key=lambda i: pos[i][0])
        assert by_x == sorted(row, key=lambda i: keys[i]), by_x


@pytest.mark.parametrize("name", MACHINES)
def test_dot_tiles_in_bus_order(name: str, scans) -> None:
    result = scans(name)
    pos = _tile_pos(renderer("draw", "dot")(result))
    assert set(pos) == {t.device for t in layout(result).tiles}
    _bus_ordered_rows(result, pos)


def test_dot_dgx_reads_in_bus_order(scans) -> None:
    """The DGX's GPUs read like text (rows top to bottom, left to right) in bus order: socket 0's
    four above socket 1's, not one strip in reverse order."""
    result = scans("dgx-h100")
    pos = _tile_pos(renderer("draw", "dot")(result))
    gpus = [g.id for g in result.topology.gpus]
    reading = sorted(gpus, key=lambda i: (-round(pos[i][1]), pos[i][0]))
    assert reading == sorted(gpus, key=lambda i: bdf_key(result.topology.by_id(i).bdf))  # type: ignore[union-attr]
    assert len({round(pos[g][1]) for g in gpus}) == 2


def test_dot_legend_and_findings(scans) -> None:
    from topoagent.core.render.escape import xml_text
    from topoagent.features.draw.layout import LEGEND

    result = scans("wrong-socket-nic")
    text = renderer("draw", "dot")(result)
    legend = next(line for line in text.splitlines() if line.strip().startswith('"legend" ['))
    for _, words in LEGEND:
        assert xml_text(words) in legend
    found = next(line for line in text.splitlines() if line.strip().startswith('"findings" ['))
    assert f"Findings ({len(result.findings)})" in found
    for f in result.findings:
        assert f.code in found and xml_text(f.message.split(":")[0]) in found
    assert "No findings." in renderer("draw", "dot")(scans("dgx-h100"))


@pytest.mark.skipif(shutil.which("neato") is None, reason="Graphviz not installed (apt-get install graphviz)")
def test_png_dgx_aspect_and_order(fixture_root, tmp_path: Path) -> None:
    """The DGX PNG was a 5472x503 strip (11:1); now it is the SVG's picture, at most 3:1, and
    Graphviz keeps the positions the DOT gives (its own -Tplain output, bus order)."""
    root = str(fixture_root("dgx-h100"))
    out = tmp_path / "dgx.png"
    res = CliRunner().invoke(cli, ["draw", "--root", root, "--no-nvml", "--format", "png", "-o", str(out)])
    assert res.exit_code == 0, res.output
    width, height = struct.unpack(">II", out.read_bytes()[16:24])  # the IHDR chunk
    assert 1 <= width / height <= 3, (width, height)
    result = scan(root, nvml="off")
    text = renderer("draw", "dot")(result)
    proc = subprocess.run(
        ["neato", "-n2", "-Tplain"], input=text, capture_output=True, text=True, timeout=60, check=True
    )
    placed = {
        p[1].strip('"'): (float(p[2]) * 72, float(p[3]) * 72)
        for p in map(str.split, proc.stdout.splitlines())
        if p[0] == "node"
    }
    keys = {d.key: d.id for d in result.topology.devices}
    laid = {keys[k]: xy for k, xy in placed.items() if k in keys and keys[k] in _tile_pos(text)}
    assert laid.keys() == _tile_pos(text).keys()
    for ident, (x, y) in _tile_pos(text).items():
        assert abs(laid[ident][0] - x) < 1 and abs(laid[ident][1] - y) < 1
    _bus_ordered_rows(result, laid)


def test_cli_png_without_graphviz(fixture_root, monkeypatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    res = CliRunner().invoke(
        cli, ["draw", "--root", str(fixture_root("workstation")), "--no-nvml", "--format", "png", "-o", "/dev/null"]
    )
    assert res.exit_code == 2
    assert "needs Graphviz" in res.output and len(res.output.strip().splitlines()) == 1


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot not installed (apt-get install graphviz)")
def test_dot_html_labels_hold_control_characters_as_data(scans) -> None:
    """A finding's text in the DOT's HTML-like labels goes through the one XML escaper
    (outputs/escape.py): Graphviz parses those labels as XML, which has no C0/C1 controls."""
    import msgspec

    from topoagent.core.findings import Finding, Severity

    hostile = "mlx5_0\x01\x08\x1b[31m<b>&amp;\x7f\x85\ufffe\t\r"
    f = Finding("NO_PEER_MEMORY", Severity.WARNING, (hostile,), f"name {hostile} here", (), f"fix {hostile}")
    result = msgspec.structs.replace(scans("workstation"), findings=(f,))
    text = renderer("draw", "dot")(result)
    assert not re.search("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ufffe]", text)
    proc = subprocess.run(["dot", "-Tsvg"], input=text, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0 and "Error" not in proc.stderr, proc.stderr
    svg = "".join(ET.fromstring(proc.stdout).itertext())
    assert "mlx5_0" in svg and "<b>&amp;" in svg  # the markup stays text


def test_a_rail_no_input_shows_is_drawn_unknown_not_bad() -> None:
    """A partial paste (the DGX A100 matrix cut after GPU3's row: GPU4-7's cells to every NIC
    are shown nowhere) gives GPU4-7 rails labelled ``?``: grey and dashed in the SVG and the DOT,
    with a legend entry, never the red of their placeholder class (SYS)."""
    from topoagent.core.api import analyse, read_offline
    from topoagent.core.parse.paste import decode_text
    from topoagent.core.render.escape import xml_text

    lines = decode_text((TESTS / "core/parse/samples/nvsmi/dgx_a100_nv12_12nic_spaces.txt").read_bytes()).split("\n")
    legend = lines.index("Legend:")
    result = analyse(read_offline(nvidia_smi_topo="\n".join(lines[:6] + [""] + lines[legend:])))
    unknown = {t.gpu for t in layout(result).ties if t.cls is None}
    assert unknown == {"gpu4", "gpu5", "gpu6", "gpu7"}
    svg = renderer("draw", "svg")(result)
    check_svg(result, svg)
    for t in groups(svg_root(svg), "ta-tie"):
        if t.get("id", "").startswith("tie-"):
            assert ("ta-cls-unknown" in t.get("class", "")) is (t.get("data-gpu") in unknown), t.attrib
            assert ("ta-cls-bad" in t.get("class", "")) is False  # the shown rails are PXB
    assert ".ta-cls-unknown path{stroke:#9e9e9e;stroke-dasharray" in svg
    assert 'class="ta-tie ta-cls-unknown"><path' in svg  # the legend's swatch
    dot = renderer("draw", "dot")(result)
    edges = {g: line for line in dot.splitlines() for g in ("gpu0", "gpu4") if f'id="tie-{g}-' in line}
    assert 'color="#9e9e9e"' in edges["gpu4"] and "style=dashed" in edges["gpu4"] and ">?<" in edges["gpu4"]
    assert 'color="#d32f2f"' not in edges["gpu4"] and "style=dashed" not in edges["gpu0"]
    key = next(line for line in dot.splitlines() if line.strip().startswith('"legend" ['))
    assert xml_text("rail the input does not show: ?") in key


@pytest.mark.parametrize("name", ["dgx-h100", "sriov-nic"])
def test_html_names_each_device_once_with_a_legend_for_nvidia_smi(name: str, scans) -> None:
    """Issue 32 item 11: the page numbered NICs NIC0... in the matrix and nic0... in the picture,
    with no legend.  The matrix's devices are named as the picture's tiles (their ids), and a
    legend gives nvidia-smi's label and the RDMA device of every NIC row."""
    from html.parser import HTMLParser

    from topoagent.features.draw.html import matrix_names

    result = scans(name)
    page = renderer("draw", "html")(result)
    tiles = set(re.findall(r'id="tile-([^"]+)"', page))
    names = matrix_names(result)
    nic_rows = [(n, smi, rdma) for n, smi, rdma in names if smi.startswith("NIC")]
    assert nic_rows
    for shown, _, _ in names:
        assert shown.split()[0] in tiles, shown  # the picture draws the same device under this name
        assert f">{shown}</th>" in page

    class Legend(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.inside, self.rows, self.cell = False, [], None

        def handle_starttag(self, tag, attrs):
            if tag == "table" and ("class", "ta-legend") in attrs:
                self.inside = True
            elif self.inside and tag == "tr":
                self.rows.append([])
            elif self.inside and tag == "td":
                self.cell = ""

        def handle_endtag(self, tag):
            if tag == "table":
                self.inside = False
            elif self.inside and tag == "td" and self.cell is not None:
                self.rows[-1].append(self.cell)
                self.cell = None

        def handle_data(self, data):
            if self.cell is not None:
                self.cell += data

    legend = Legend()
    legend.feed(page)
    assert [tuple(r) for r in legend.rows if r] == [(n, smi, rdma or "") for n, smi, rdma in nic_rows]
