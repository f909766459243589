"""Pre-cleaning of pasted tool output: what a person's copy adds around and inside the text.

Pure: text (or bytes) in, cleaned lines out.  The parsers of ``nvidia-smi topo -m`` and
``lspci`` call :func:`clean_paste` first and then read only the lines it keeps, each with its
line number in the original paste, so that every line they cannot read can be reported by
number.

What a paste carries besides the output, as found in public bug reports (see
``tests/core/parse/samples/*/README.md``):

* shell prompts and the commands typed at them (``$ lspci -tv``, ``root@host:~# lspci -tvv``,
  ``[root@node ~]# nvidia-smi topo -m``, ``# lspci -vvv -s 04:00``, zsh's ``➜  ~ lspci``);
* markdown code fences (`````, ``~~~``) and ``<details>`` tags;
* messages of the tools themselves (``pcilib: sysfs_read_vpd: read failed``,
  ``libkmod: ERROR …``, ``lspci: Unable to load libkmod resources``);
* the author's elisions: ``...``, ``…``, ``+-...``, ``(omitted)``, ``[snip]``;
* carriage returns (CRLF), ANSI colour codes, a UTF-8 or UTF-16 byte-order mark, no-break
  spaces, UTF-16 text (from Windows consoles; :func:`decode_text` decodes it);
* a prefix on every line of a block: a C comment (`` * `` between ``/*`` and ``*/``), a
  ``// `` or ``# `` comment, a mail or markdown quote (``> ``, nested ``> > ``, with the
  ``On … wrote:`` line above it), a ``| `` gutter;
* HTML that colours the text (``<font color=red>``, ``<b>``);
* quoted-printable soft line breaks (``Intel Cor=`` / ``poration``) and escapes (``=3D``) from
  a mailing-list archive (RFC 2045, 6.7).

Prompts, fences and blank lines are dropped silently: they hide nothing.  Tool messages and
elisions are dropped *and reported* (:class:`Skipped`): each says that something was not
shown.  Everything else is kept for the parser to judge.
"""

from __future__ import annotations

import quopri
import re

import msgspec

from topoagent.core.errors import InputError

__all__ = [
    "Cleaned",
    "Line",
    "Skipped",
    "clean_paste",
    "decode_text",
    "dropped_why",
    "is_noise",
    "is_prompt",
    "merge_skipped",
    "strip_ansi",
    "unwrap_lines",
]

# CSI sequences (``\x1b[4m``, ``\x1b[0;32m``), OSC (``\x1b]0;title\x07``), the charset reset
# ``\x1b(B`` that ``tput sgr0`` emits, and lone escapes.
_ANSI = re.compile(r"\x1b(?:\[[0-9;?]{0,32}[ -/]{0,4}[@-~]|\][^\x07\x1b]{0,256}(?:\x07|\x1b\\)|\([A-Za-z0-9]|.?)")
# Characters that a copy from a browser or a Windows console adds and no tool prints.
_INVISIBLE = str.maketrans(
    {
        "\ufeff": None,
        "\u200b": None,
        "\u200e": None,
        "\u200f": None,
        "\u00a0": " ",
        "\u2007": " ",
        "\u202f": " ",
        "\r": None,
    }
)

# Commands that appear at prompts in these reports; a ``#`` or ``$`` line that starts with one
# of them is a typed command, not output (``# GPU0`` in a hash-prefixed matrix is output).
_COMMANDS = frozenset(
    """
awk bash cat cd column docker egrep echo export for grep head hwloc-ls ibstat ibv_devinfo
kubectl less ls lscpu lspci lstopo more nvidia-smi numactl python python3 sed setpci sh ssh
sudo tail tee topoagent uname watch xargs zsh dmesg lsmod modinfo srun salloc
""".split()
)
_PROMPT_FULL = re.compile(
    r"^\s*(?:\([^()\s]{1,64}\)\s*)?"  # (venv) or (base)
    r"(?:\[[^\[\]]{1,128}\]\s*[#$%>]"  # [root@node ~]#
    r"|[\w.-]{1,64}@[\w.-]{1,128}(?::[^\s#$%]{0,256})?\s*[#$%>]"  # user@host:~$
    r"|[\w.-]{1,64}:[~/][^\s#$%]{0,256}[#$]"  # host:/home/user:~$ (a PS1 without the user)
    r"|[➜❯→λ»](?:\s+\S{1,256})?"  # zsh / fish themes: ➜  ~
    r"|PS [A-Za-z]:\\[^>]{0,256}>)"  # PowerShell
    r"(?:\s|$)"
)
_PROMPT_SHORT = re.compile(r"^\s*[$#%>]\s*(?:sudo\s+)?(?:\S*/)?([a-z][\w.+-]*)(?:\s|$)")
_PROMPT_ALONE = re.compile(r"^\s*[$#%>]\s*$")
_FENCE = re.compile(r"^\s*(?:```|~~~)[\w+-]*\s*$|^\s*</?(?:details|summary|pre|code)\b[^>]*>.*$", re.I)
_TOOL_MESSAGE = re.compile(
    r"^\s*(?:pcilib|libkmod|lspci|setpci|lstopo|nvidia-smi|sudo|bash|zsh|sh)\s*:\s+\S"
    r"|^\s*(?:NVIDIA-SMI has failed|Failed to initialize NVML|No devices were found|"
    r"Unable to determine the device handle)",
    re.I,
)
# An author's elision: a line that is only dots, an ellipsis, a tree branch followed by dots,
# or a bracketed note that something was left out.  No two adjacent parts can both match a
# space (``[\s|`]*\s*`` would be quadratic in a long run of spaces).
_ELISION = re.compile(
    r"^[\s|`]*(?:[+\\]-+\s*)?(?:\.{2,}|…+)\s*$"
    r"|^\s*[(\[<]\s*(?:\.{2,}|…|omitted|snip(?:ped)?|truncated|cut|more|redacted)[^)\]>]{0,80}[)\]>]\s*$"
    r"|^\s*(?:\.{2,}|…)\s*(?:(?:\(\s*)?(?:omitted|snip(?:ped)?|truncated|more|and so on|etc\.?)[^)]{0,80}\)?)\s*$",
    re.I,
)


# A marker that a person's editor or mail client puts before every line of a block; "#" only
# with a space or alone (a "#" prompt is judged per line, after the block is read).
_BLOCK_PREFIX = re.compile(r"^(?:[ \t]*(\*|//)|(#|>|\|))(?: |$)")
# Inline HTML that colours or weights text (GitHub renders it); no tool prints these tags, and
# what tools do print in angle brackets (``<?>``, ``<inactive>``, ``<access denied>``) is none.
_INLINE_TAG = re.compile(r"</?(?:font|span|b|i|u|strong|em|tt|mark|small|big)\b[^<>]{0,200}>", re.I)
# Every level of a mail or markdown quote: ">", "> > ", ">>" (RFC 3676 4.5 and what mail clients
# write); what follows the quote is the line as it was written.
_QUOTE = re.compile(r"^(?:[ \t]{0,3}>)+[ \t]?")
# What lspci -tv draws at the start of a line: a "|" block whose lines go on like this is a
# piece of a tree (its columns matter), not a quote gutter.
_TREE_DRAWING = re.compile(r"^\s*(?:[+\\]-|\|)")
# The lines that open and close a C comment around a pasted block.
_COMMENT_ENDS = frozenset({"/*", "/**", "*/", "**/"})
# Inside a C comment a writer may leave out the space after the star (`` *Topology is below:``)
# and start text on the opening line (``/*Build:``): such a block is a C comment when every
# line is a star line or its opener.
_C_STAR = re.compile(r"^[ \t]*\*(?![*/])")
_C_OPENER = re.compile(r"^[ \t]*/\*\*?(?![*/])")
# A quoted-printable soft line break: a single "=" ending a line (RFC 2045 6.7 rule 5; the
# encoder may leave spaces before it); no tool output this module reads ends a line so.
_SOFT_BREAK = re.compile(r"(?<!=)=$")


class Line(msgspec.Struct, frozen=True):
    """A line kept for the parser: its number in the original paste (1-based) and its text
    (no CR, no ANSI codes, no byte-order mark; tabs and indentation as pasted)."""

    number: int
    text: str


class Skipped(msgspec.Struct, frozen=True):
    """Lines ``first``..``last`` (1-based, inclusive) that were not read, and why."""

    first: int
    last: int
    why: str

    @property
    def where(self) -> str:
        """``line 12`` or ``lines 12-14``."""
        return f"line {self.first}" if self.first == self.last else f"lines {self.first}-{self.last}"

    def __str__(self) -> str:
        return f"{self.where}: {self.why}"


class Cleaned(msgspec.Struct, frozen=True):
    """The lines of a paste worth parsing, and the ranges dropped with a reason to report."""

    lines: tuple[Line, ...]
    skipped: tuple[Skipped, ...]


def strip_ansi(text: str) -> str:
    """``text`` without ANSI escape sequences."""
    return _ANSI.sub("", text) if "\x1b" in text else text


def is_prompt(text: str) -> bool:
    """Whether a line is a shell prompt with (or without) a typed command."""
    if _PROMPT_FULL.match(text) or _PROMPT_ALONE.match(text):
        return True
    m = _PROMPT_SHORT.match(text)
    return bool(m and m.group(1) in _COMMANDS)


def clean_paste(text: str) -> Cleaned:
    """Split ``text`` into numbered lines, dropping prompts, fences, tool messages and elisions.

    Tool messages and elisions are reported in :attr:`Cleaned.skipped` (consecutive lines of
    one reason as one range); prompts, fences and blank lines are dropped without a report.
    Work is linear in the size of the text.
    """
    kept: list[Line] = []
    skipped: list[Skipped] = []
    for number, line in unwrap_lines(text):
        if is_noise(line):
            continue
        why = dropped_why(line)
        if why is None:
            kept.append(Line(number, line))
        else:
            skipped.append(Skipped(number, number, why))
    return Cleaned(tuple(kept), tuple(merge_skipped(skipped)))


def unwrap_lines(text: str) -> list[tuple[int, str]]:
    """Every line of ``text`` with its number, as the tool printed it: CR, ANSI codes and
    invisible characters gone, quoted-printable soft breaks joined (a joined line keeps its
    first number, so numbers may skip), and a block's common prefix (C comment, ``>``, ``#``,
    ``//``, ``|``) removed.  Nothing is dropped but the empty lines before the first:
    :func:`clean_paste` and the segmenter (:mod:`topoagent.core.parse.segment`) judge each line."""
    if not isinstance(text, str):
        raise InputError(f"expected text, got {type(text).__name__}")
    # Leading empty lines are numbered but not returned (a segment's text is its paste's lines
    # at their numbers, blank before it: reading it costs its own lines, not its position).
    lead = len(text) - len(text.lstrip("\n"))
    numbered = [
        (n, _untagged(strip_ansi(raw.translate(_INVISIBLE))).rstrip())
        for n, raw in enumerate(text[lead:].split("\n"), lead + 1)
    ]
    return _unprefixed(_soft_breaks_joined(numbered))


def _untagged(line: str) -> str:
    """``line`` without the HTML a person put around the output to colour it (``<font
    color=red>``, ``<b>``, ``<span …>``): GitHub's markdown renders them and leaves the text."""
    return _INLINE_TAG.sub("", line) if "<" in line else line


def is_noise(line: str) -> bool:
    """A line that hides nothing: blank, a markdown fence or ``<details>`` tag, a prompt."""
    return not line.strip() or bool(_FENCE.match(line)) or is_prompt(line)


def dropped_why(line: str) -> str | None:
    """Why a line is dropped and reported (an author's elision, a tool's message), or None."""
    if _ELISION.match(line):
        return "elided in the paste: what was there is unknown"
    if _TOOL_MESSAGE.match(line):
        return f"a tool's message, not its output: {line.strip()[:80]!r}"
    return None


def _soft_breaks_joined(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Lines as they were before a mail archive encoded them as quoted-printable: soft breaks
    joined (the joined line keeps its first line's number) and ``=XX`` escapes decoded.

    Only where the text shows a soft break: ``=3D`` alone proves nothing (``NCCL_X=3D`` is an
    ordinary assignment), and outside a quoted-printable body no escape is touched.
    """
    if not any(_SOFT_BREAK.search(line) for _, line in lines):
        return lines
    out: list[tuple[int, str]] = []
    parts: list[str] = []
    first = 0
    for number, line in lines:
        if not parts:
            first = number
        if _SOFT_BREAK.search(line):
            parts.append(line[:-1])
            continue
        parts.append(line)
        out.append((first, _qp_decoded("".join(parts))))
        parts = []
    if parts:
        out.append((first, _qp_decoded("".join(parts))))
    return out


def _qp_decoded(line: str) -> str:
    try:
        return quopri.decodestring(line.encode("utf-8")).decode("utf-8")
    except UnicodeDecodeError:
        return line  # escapes that are no UTF-8: keep the text as pasted, the parser judges it


def _unquoted(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Lines with every level of a mail or markdown quote removed (``> > [ 1100.3] pcieport``):
    in a run of at least two consecutive quoted lines, whatever stands around the run (a mail's
    ``On Tue, … wrote:`` above it, nothing but ``>`` between its paragraphs)."""
    quoted = [bool(_QUOTE.match(t)) for _, t in lines]
    return [
        (n, _QUOTE.sub("", t, count=1) if q and (i and quoted[i - 1] or i + 1 < len(lines) and quoted[i + 1]) else t)
        for i, ((n, t), q) in enumerate(zip(lines, quoted, strict=True))
    ]


def _unprefixed(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Lines with the prefix that every line of their block carries removed (a block: lines
    between blank ones, at least two), after mail quotes (:func:`_unquoted`).  A markdown table
    (every line also ends in ``|``) is no prefixed block; a C comment's ``/*`` and ``*/`` lines
    go with its `` * ``."""
    out: list[tuple[int, str]] = []
    block: list[tuple[int, str]] = []
    for item in [*_unquoted(lines), (0, "")]:
        if item[1].strip():
            block.append(item)
            continue
        out.extend(_block_unprefixed(block))
        block = []
        if item[0]:
            out.append(item)
    return out


def _block_unprefixed(block: list[tuple[int, str]]) -> list[tuple[int, str]]:
    body = [(n, t) for n, t in block if t.strip() not in _COMMENT_ENDS]
    markers = {(m.group(1) or m.group(2)) if (m := _BLOCK_PREFIX.match(t)) else None for _, t in body}
    if len(body) >= 2 and "*" in markers and (None in markers or len(markers) > 1):
        return _c_comment(body) or block
    if len(body) < 2 or len(markers) != 1 or None in markers:
        return block
    (marker,) = markers
    if marker == "|" and (
        all(t.rstrip().endswith("|") for _, t in body) or any(_TREE_DRAWING.match(t[1:]) for _, t in body)
    ):
        return block  # a markdown table, or a piece of an lspci tree: read as such
    if marker != "*" and len(body) < len(block):
        return block  # "/*" ... "*/" around lines that are no C comment's
    return [(n, _BLOCK_PREFIX.sub("", t, count=1)) for n, t in body]


def _c_comment(body: list[tuple[int, str]]) -> list[tuple[int, str]] | None:
    """The text of a C comment whose writer left out the space after some stars (`` *Topology
    is below:``) or began on the opening line (``/*Build:``); None where a line is neither."""
    out: list[tuple[int, str]] = []
    for n, t in body:
        if m := _C_STAR.match(t) or _C_OPENER.match(t):
            rest = t[m.end() :]
            out.append((n, rest[1:] if rest.startswith(" ") else rest))
        else:
            return None
    return out


def merge_skipped(items: list[Skipped]) -> list[Skipped]:
    """Sort ranges by line and join neighbours that give the same reason."""
    out: list[Skipped] = []
    for s in sorted(items, key=lambda s: (s.first, s.last)):
        if out and out[-1].why == s.why and s.first <= out[-1].last + 1:
            out[-1] = Skipped(out[-1].first, max(out[-1].last, s.last), s.why)
        else:
            out.append(s)
    return out


def decode_text(data: bytes) -> str:
    """Text of a pasted file: UTF-8 (a BOM dropped), or UTF-16/32 with a BOM, or UTF-16 without
    one when every other byte is NUL (a Windows console's redirect).  Raises
    :class:`InputError` for bytes that are none of these."""
    boms = (
        (b"\xff\xfe\x00\x00", "utf-32-le"),
        (b"\x00\x00\xfe\xff", "utf-32-be"),
        (b"\xff\xfe", "utf-16-le"),
        (b"\xfe\xff", "utf-16-be"),
        (b"\xef\xbb\xbf", "utf-8"),
    )
    for bom, codec in boms:
        if data.startswith(bom):
            try:
                return data[len(bom) :].decode(codec)
            except UnicodeDecodeError:
                break  # bytes that merely start like a BOM: judge them as UTF-8 below
    head = data[:4096]
    if len(head) >= 4 and head.count(0) * 3 >= len(head):
        # ASCII text in UTF-16 without a BOM: NULs at the odd (LE) or even (BE) offsets.
        odd, even = head[1::2].count(0), head[0::2].count(0)
        for codec, ok in (("utf-16-le", odd > even * 4), ("utf-16-be", even > odd * 4)):
            if ok:
                try:
                    return data.decode(codec)
                except UnicodeDecodeError:
                    break
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})") from None
