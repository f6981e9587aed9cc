#!/usr/bin/env python3
"""Check one HTML report page as headless Chromium rendered it.

Usage: check-report.py PAGE.html DOM.html SHOT.png

- the rendered DOM (`chromium --dump-dom`) holds every <svg class="chart"> of the page,
  and each has drawn marks: a `class="mark"` polyline with at least two points, or a
  `class="mark"` rect with a positive width and height;
- no NaN or Infinity in the rendered text;
- the screenshot is a PNG with ink on it: at least 1 % of its pixels not white and at
  least 8 distinct colours (text, grid, and the policies' lines or bars).
Prints one line per failure naming the file; exits 1 on any.
"""

import struct
import sys
import zlib
from html.parser import HTMLParser


class Charts(HTMLParser):
    def __init__(self):
        super().__init__()
        self.charts = []  # per chart: number of drawn marks
        self.depth = 0  # svg nesting inside the current chart
        self.text = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "svg":
            if self.depth == 0 and "chart" in classes:
                self.charts.append(0)
                self.depth = 1
            elif self.depth:
                self.depth += 1
            return
        if not self.depth or "mark" not in classes:
            return
        if tag == "polyline":
            pairs = [p for p in (a.get("points") or "").split() if "," in p]
            if len(pairs) >= 2:
                self.charts[-1] += 1
        elif tag == "rect":
            try:
                if float(a.get("width", 0)) > 0 and float(a.get("height", 0)) > 0:
                    self.charts[-1] += 1
            except ValueError:
                pass

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag == "svg" and self.depth:
            self.handle_endtag(tag)

    def handle_endtag(self, tag):
        if tag == "svg" and self.depth:
            self.depth -= 1

    def handle_data(self, data):
        self.text.append(data)


def png_pixels(path):
    """(width, height, rows of RGB(A) tuples) of an 8-bit RGB or RGBA PNG."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, ihdr = 8, b"", None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour = ihdr[:4]
    if depth != 8 or colour not in (2, 6):
        raise ValueError(f"unexpected PNG depth {depth} colour type {colour}")
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        f, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            left = line[i - bpp] if i >= bpp else 0
            up = prev[i]
            ul = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + left) & 255
            elif f == 2:
                line[i] = (line[i] + up) & 255
            elif f == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif f == 4:
                p = left + up - ul
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - ul)
                pred = left if pa <= pb and pa <= pc else (up if pb <= pc else ul)
                line[i] = (line[i] + pred) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


def main():
    page, dom, shot = sys.argv[1:4]
    failures = []
    source = open(page, encoding="utf-8").read()
    rendered = open(dom, encoding="utf-8").read()
    want = source.count('<svg class="chart"')
    parser = Charts()
    parser.feed(rendered)
    if want == 0:
        failures.append(f"{page}: no chart on the page")
    if len(parser.charts) != want:
        failures.append(f"{dom}: {len(parser.charts)} charts rendered, the page has {want}")
    for i, marks in enumerate(parser.charts):
        if marks == 0:
            failures.append(f"{dom}: chart {i + 1} has no drawn marks")
    text = "".join(parser.text)
    for bad in ("NaN", "Infinity"):
        if bad in text:
            failures.append(f"{dom}: {bad} in the rendered text")
    try:
        width, height, bpp, rows = png_pixels(shot)
        colours, ink = set(), 0
        for row in rows:
            for x in range(0, width * bpp, bpp):
                px = row[x : x + 3]
                colours.add(px)
                if px != b"\xff\xff\xff":
                    ink += 1
        share = ink / (width * height)
        if share < 0.01 or len(colours) < 8:
            failures.append(
                f"{shot}: blank: {share:.2%} ink, {len(colours)} colours"
            )
        else:
            print(
                f"check-report: {page}: {len(parser.charts)} charts drawn; "
                f"screenshot {width}x{height}, {share:.1%} ink, {len(colours)} colours"
            )
    except (OSError, ValueError, TypeError, zlib.error) as e:
        failures.append(f"{shot}: unreadable screenshot: {e}")
    for f in failures:
        print(f"check-report: {f}", file=sys.stderr)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
