"""Shared bits of the drawing tests."""
import struct
import xml.etree.ElementTree as ET

import pytest

from caffepy.draw import find_engine

SVG_NS = "{http://www.w3.org/2000/svg}"


def needs_engine():
    if find_engine() is None:
        pytest.skip("no Graphviz layout engine: pip install 'pygraphviz>=2.0.4' or apt-get install graphviz")


def png_size(data):
    """(width, height) of PNG bytes; fails the test when the header is not a PNG's."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG header"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def svg_texts(data):
    """The text lines of an SVG (parses it as XML)."""
    root = ET.fromstring(data)
    assert root.tag == SVG_NS + "svg"
    return {"".join(t.itertext()) for t in root.iter(SVG_NS + "text")}
