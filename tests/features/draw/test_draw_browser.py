"""The ``draw --format html`` page in a real browser: headless Chromium (Debian ``chromium``)
loads it from a file with the network off, runs its script without a console error, and
paints a picture that is not blank.  Skipped where Chromium is not installed."""

from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from tests.formats import renderer
from topoagent.core.api import scan

CHROMIUM = next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if p), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (Debian: apt-get install chromium)")

#: Flags for a quiet, offline, throw-away browser (see `chromium --help` and
#: https://developer.chrome.com/docs/chromium/headless).
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
]


def decode_png(data: bytes) -> tuple[int, int, int, bytes]:
    """(width, height, bytes per pixel, raw pixels) of an 8-bit RGB/RGBA PNG (RFC 2083: chunks,
    zlib stream, one filter byte per scanline)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    assert header is not None
    width, height, depth, color, _, _, interlace = header
    assert depth == 8 and color in (2, 6) and interlace == 0, header
    bpp = 3 if color == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    out = bytearray()
    prev = bytearray(stride)
    for y in range(height):
        ftype = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        if ftype == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 0xFF
        elif ftype == 2:
            line = bytearray((a + b) & 0xFF for a, b in zip(line, prev, strict=True))
        elif ftype == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif ftype == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b, c = prev[i], prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        out += line
        prev = line
    return width, height, bpp, bytes(out)


def chromium(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    return subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={tmp / 'profile'}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def console_errors(stderr: str) -> list[str]:
    """Lines where the page's console said something (Chromium logs them as ``CONSOLE``):
    the page logs nothing, so any such line -- an uncaught exception above all -- is an error."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]


@pytest.mark.parametrize("name", ["dgx-h100", "wrong-socket-nic"])
def test_page_in_chromium(name: str, fixture_root, tmp_path: Path) -> None:
    page = tmp_path / f"{name}.html"
    page.write_text(renderer("draw", "html")(scan(fixture_root(name), nvml="off")), encoding="utf-8")
    url = page.as_uri()

    dom = chromium(tmp_path, "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert '<body data-ready="1">' in dom.stdout, "the page's script did not run to its end"
    assert console_errors(dom.stderr) == []

    shot = tmp_path / "shot.png"
    proc = chromium(tmp_path, f"--screenshot={shot}", "--window-size=1000,700", url)
    assert proc.returncode == 0 and shot.is_file(), proc.stderr[-2000:]
    assert console_errors(proc.stderr) == []
    width, height, bpp, pixels = decode_png(shot.read_bytes())
    assert (width, height) == (1000, 700)
    # Not blank: sample a grid of pixels; many distinct colours, and a real spread of brightness.
    samples = [
        pixels[(y * width + x) * bpp : (y * width + x) * bpp + 3]
        for y in range(0, height, 7)
        for x in range(0, width, 7)
    ]
    lum = [0.299 * p[0] + 0.587 * p[1] + 0.114 * p[2] for p in samples]
    mean = sum(lum) / len(lum)
    variance = sum((v - mean) ** 2 for v in lum) / len(lum)
    assert len(set(samples)) > 20 and variance > 100, (len(set(samples)), variance)
    # The red cross-socket ties are on screen for the wrong-socket box (the DGX has red only
    # in its legend swatches).
    red = sum(
        1
        for y in range(0, height, 2)
        for x in range(0, width, 2)
        if (p := pixels[(y * width + x) * bpp : (y * width + x) * bpp + 3])[0] > 180 and p[1] < 80 and p[2] < 80
    )
    print(name, "red pixels (every 4th):", red)
    assert red > 150 if name == "wrong-socket-nic" else red < 60


def test_decode_png_roundtrip() -> None:
    """The decoder against a PNG written by hand (filters None and Sub)."""
    rows = [b"\x00" + bytes([255, 0, 0, 0, 255, 0]), b"\x01" + bytes([0, 0, 255, 10, 10, 10])]
    body = zlib.compress(b"".join(rows))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    png = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", body)
        + chunk(b"IEND", b"")
    )
    assert decode_png(png) == (2, 2, 3, bytes([255, 0, 0, 0, 255, 0, 0, 0, 255, 10, 10, (10 + 255) % 256]))
