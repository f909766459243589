"""Names are data, never structure: one escaping rule per kind of output.

Everything a host can name -- its host name, DMI strings, netdev and RDMA names, VM names,
``.vmx`` values -- reaches outputs as it was read.  Each output format escapes it by one rule:

* text for people (:func:`shown`, :func:`text_output`): control characters are shown as
  ``\\x1b``, so a name cannot move the cursor, recolour the terminal or, with :func:`shown`
  on a single field, start a line of its own (a fake ``gres.conf`` line, a fake table row);
* a shell comment (:func:`comment`): ``# `` and the text as :func:`shown` shows it, so a
  name with a newline cannot end the comment and run the rest of itself under ``eval``
  (``plan --format env``, ``exec --dry-run``);
* JSON (:func:`encodable`): the encoder escapes every control character itself; what it
  cannot encode is a lone surrogate, which is how Python holds a byte of a name that is not
  UTF-8 (PEP 383): such a byte is written as the text ``\\xNN``, as text outputs show it;
* XML (:func:`xml_text`, :func:`xml_attr`: SVG, HTML, NCCL's topology file, libvirt XML,
  Graphviz's HTML-like labels, which Graphviz parses as XML with expat):
  ``& < > " '`` escaped, and the characters XML 1.0 does not allow (C0 controls but tab,
  newline and return; DEL and C1; U+FFFE, U+FFFF, lone surrogates) replaced by U+FFFD, so the document
  parses and holds the name as data (XML 1.0, section 2.2 "Characters").
"""

from __future__ import annotations

import re

__all__ = ["comment", "encodable", "shown", "text_output", "xml_attr", "xml_text"]

#: Control characters (C0, DEL, C1) and lone surrogates (undecodable bytes, PEP 383).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
#: The same, except the tab and newline a text output's own layout uses.
_CONTROL_IN_TEXT = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
#: Lone surrogates: undecodable bytes of a name (PEP 383), which UTF-8 cannot encode.
_SURROGATE = re.compile("[\ud800-\udfff]")
#: What XML 1.0 does not allow in a document at all, and the DEL and C1 controls it
#: discourages (section 2.2): none of it is a name a person can read.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")
_XML_TEXT = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})
_XML_ATTR = str.maketrans(
    {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#x27;", "\t": "&#9;", "\n": "&#10;", "\r": "&#13;"}
)


def _hex(m: re.Match[str]) -> str:
    """A control character or an undecodable byte as ``\\xNN`` (a byte that was not UTF-8,
    held as ``\\udcNN`` by PEP 383's surrogateescape, shows as that byte), else ``\\uNNNN``."""
    c = ord(m.group())
    if 0xDC80 <= c <= 0xDCFF:
        c -= 0xDC00
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def shown(value: object) -> str:
    """One field of text output: every control character (newline too) as ``\\xNN``."""
    return _CONTROL.sub(_hex, str(value))


def encodable(value: str) -> str:
    """``value`` as a string UTF-8 can encode (JSON, the Prometheus exposition): each
    undecodable byte (``\\udcNN``) as the text ``\\xNN``."""
    return _SURROGATE.sub(_hex, value)


def comment(text: object) -> str:
    """One shell comment line (``# text``): nothing in ``text`` can end it."""
    return "# " + shown(text)


def text_output(text: str) -> str:
    """A whole text output: control characters but its own tabs and newlines as ``\\xNN``."""
    return _CONTROL_IN_TEXT.sub(_hex, text)


def xml_text(value: object) -> str:
    """Character data of an XML (or SVG, HTML) element."""
    return _NOT_XML.sub("\ufffd", str(value)).translate(_XML_TEXT)


def xml_attr(value: object) -> str:
    """A double- or single-quoted XML attribute value (whitespace kept as character references,
    which attribute-value normalisation would otherwise turn into spaces)."""
    return _NOT_XML.sub("\ufffd", str(value)).translate(_XML_ATTR)
