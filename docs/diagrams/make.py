#!/usr/bin/env python3
"""Writes the SVG pictures of docs/ from their descriptions (docs/diagrams/*.txt).

Python 3 standard library only, so it runs anywhere the tests do:

    python3 docs/diagrams/make.py           # rewrite every NAME.svg from NAME.txt
    python3 docs/diagrams/make.py --check   # exit 1 when an SVG is not what its .txt gives

A description is one element per line (blank lines and `#` comments are skipped);
quoted strings may hold spaces, and text in backticks is set in a monospace font:

    canvas W H
    title "text"                         the picture's heading (and its accessible name)
    box ID X Y W H KIND "line" "line"... KIND: actor, folder, step, state, end
    arrow FROM TO [dashed] [via X,Y ...] [at X,Y] ["label line" ...]
    note X Y "line" ...                  free text, left-aligned at X
    legend X Y                           solid: the holder's own move; dashed: after a crash

FROM and TO are a box side, `ID.n`, `ID.s`, `ID.e` or `ID.w`, optionally moved along
that side (`ID.s+30`, `ID.e-10`), or a point `X,Y`. An arrow runs straight through its
`via` points; its label is centred at `at`, else on the middle of its longest segment.
"""

import shlex
import sys
from pathlib import Path
from xml.sax.saxutils import escape

HERE = Path(__file__).resolve().parent
FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"
MONO = "DejaVu Sans Mono, Menlo, Consolas, monospace"
SIZE = 13
LABEL_SIZE = 12
LINE = 17
# Fill and border per box kind.
KINDS = {
    "actor": ("#fff4d6", "#b8860b"),
    "folder": ("#e3f0fb", "#2f6ea5"),
    "step": ("#ffffff", "#444444"),
    "state": ("#e6f4e6", "#3d7f3d"),
    "end": ("#eeeeee", "#444444"),
}


class DescriptionError(Exception):
    """A line of a description that cannot be drawn."""


def text_width(text, size):
    """A width estimate for `text` (backticks excluded), for label backgrounds."""
    return int(len(text.replace("`", "")) * size * 0.58) + 8


def spans(text):
    """`text` as SVG tspans: backticked parts in the monospace font."""
    out = []
    for i, part in enumerate(text.split("`")):
        if not part:
            continue
        part = escape(part)
        out.append(f'<tspan font-family="{MONO}">{part}</tspan>' if i % 2 else part)
    return "".join(out)


def point(token, boxes):
    """A point from `X,Y` or a box side `ID.side[+-offset]`."""
    if "," in token:
        x, y = token.split(",")
        return int(x), int(y)
    name, _, side = token.partition(".")
    if name not in boxes or not side:
        raise DescriptionError(f"{token!r}: give X,Y or ID.n/s/e/w of a box drawn before")
    x, y, w, h = boxes[name]
    offset = 0
    for sign in "+-":
        if sign in side:
            side, _, amount = side.partition(sign)
            offset = int(amount) * (1 if sign == "+" else -1)
    sides = {
        "n": (x + w // 2 + offset, y),
        "s": (x + w // 2 + offset, y + h),
        "e": (x + w, y + h // 2 + offset),
        "w": (x, y + h // 2 + offset),
    }
    if side not in sides:
        raise DescriptionError(f"{token!r}: the side is n, s, e or w")
    return sides[side]


def draw_box(words, boxes):
    name, x, y, w, h, kind, *lines = words
    x, y, w, h = int(x), int(y), int(w), int(h)
    if kind not in KINDS:
        raise DescriptionError(f"box {name}: kind {kind!r} is not one of {', '.join(KINDS)}")
    boxes[name] = (x, y, w, h)
    fill, stroke = KINDS[kind]
    radius = 14 if kind in ("state", "end") else 4
    out = [
        f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="{radius}" '
        f'fill="{fill}" stroke="{stroke}" stroke-width="1.5"/>'
    ]
    if kind == "end":
        out.append(
            f'<rect x="{x + 4}" y="{y + 4}" width="{w - 8}" height="{h - 8}" '
            f'rx="{radius - 3}" fill="none" stroke="{stroke}" stroke-width="1"/>'
        )
    top = y + h // 2 - (len(lines) - 1) * LINE // 2 + 5
    for i, line in enumerate(lines):
        weight = ' font-weight="bold"' if i == 0 else ""
        size = SIZE if i == 0 else SIZE - 1
        out.append(
            f'<text x="{x + w // 2}" y="{top + i * LINE}" text-anchor="middle" '
            f'font-size="{size}"{weight}>{spans(line)}</text>'
        )
    return out


def draw_arrow(words, boxes):
    start, end, *rest = words
    dashed = False
    via = []
    at = None
    labels = []
    i = 0
    while i < len(rest):
        word = rest[i]
        if word == "dashed":
            dashed = True
        elif word == "via":
            while i + 1 < len(rest) and "," in rest[i + 1] and rest[i + 1][0].isdigit():
                i += 1
                via.append(point(rest[i], boxes))
        elif word == "at":
            i += 1
            at = point(rest[i], boxes)
        else:
            labels.append(word)
        i += 1
    points = [point(start, boxes), *via, point(end, boxes)]
    path = " ".join(f"{x},{y}" for x, y in points)
    dash = ' stroke-dasharray="7,5"' if dashed else ""
    out = [
        f'<polyline points="{path}" fill="none" stroke="#333333" stroke-width="1.5"'
        f'{dash} marker-end="url(#head)"/>'
    ]
    if labels:
        if at is None:
            segments = list(zip(points, points[1:]))
            (x1, y1), (x2, y2) = max(
                segments, key=lambda s: abs(s[0][0] - s[1][0]) + abs(s[0][1] - s[1][1])
            )
            at = ((x1 + x2) // 2, (y1 + y2) // 2)
        out += label(at, labels)
    return out


def label(at, lines):
    """Lines centred on `at`, on a white ground so they read over a line."""
    x, y = at
    width = max(text_width(line, LABEL_SIZE) for line in lines)
    height = len(lines) * (LINE - 2) + 4
    top = y - height // 2
    out = [
        f'<rect x="{x - width // 2}" y="{top}" width="{width}" height="{height}" '
        f'fill="#ffffff" fill-opacity="0.92"/>'
    ]
    for i, line in enumerate(lines):
        out.append(
            f'<text x="{x}" y="{top + 13 + i * (LINE - 2)}" text-anchor="middle" '
            f'font-size="{LABEL_SIZE}" fill="#222222">{spans(line)}</text>'
        )
    return out


def draw_note(words):
    x, y, *lines = words
    return [
        f'<text x="{x}" y="{int(y) + i * LINE}" font-size="{LABEL_SIZE}" '
        f'fill="#444444">{spans(line)}</text>'
        for i, line in enumerate(lines)
    ]


def draw_legend(words):
    x, y = int(words[0]), int(words[1])
    rows = [("", "the holder's own move"), (' stroke-dasharray="7,5"', "what the next holder does after a crash")]
    out = []
    for i, (dash, text) in enumerate(rows):
        yy = y + i * LINE
        out.append(
            f'<line x1="{x}" y1="{yy}" x2="{x + 40}" y2="{yy}" stroke="#333333" '
            f'stroke-width="1.5"{dash} marker-end="url(#head)"/>'
        )
        out.append(f'<text x="{x + 50}" y="{yy + 4}" font-size="{LABEL_SIZE}" fill="#444444">{escape(text)}</text>')
    return out


def render(description, source_name):
    """The SVG text of a description."""
    width, height, title = 800, 600, source_name
    boxes = {}
    body = []
    for number, raw in enumerate(description.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            words = shlex.split(line)
            kind, words = words[0], words[1:]
            if kind == "canvas":
                width, height = int(words[0]), int(words[1])
            elif kind == "title":
                title = words[0]
            elif kind == "box":
                body += draw_box(words, boxes)
            elif kind == "arrow":
                body += draw_arrow(words, boxes)
            elif kind == "note":
                body += draw_note(words)
            elif kind == "legend":
                body += draw_legend(words)
            else:
                raise DescriptionError(f"{kind!r} is not canvas, title, box, arrow, note or legend")
        except (DescriptionError, ValueError, IndexError) as e:
            raise DescriptionError(f"{source_name} line {number}: {e}") from e
    plain = escape(title.replace("`", ""))
    head = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{plain}" '
        f'font-family="{FONT}" font-size="{SIZE}" fill="#111111">',
        f"<title>{plain}</title>",
        "<!-- Generated by docs/diagrams/make.py from "
        f"{source_name}; edit that file and run the script. -->",
        '<defs><marker id="head" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="8" '
        'markerHeight="8" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
        'fill="#333333"/></marker></defs>',
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
        f'<text x="20" y="30" font-size="16" font-weight="bold">{spans(title)}</text>',
    ]
    return "\n".join(head + body + ["</svg>"]) + "\n"


def main(argv):
    check = argv == ["--check"]
    if argv and not check:
        print(__doc__, file=sys.stderr)
        return 2
    stale = []
    for source in sorted(HERE.glob("*.txt")):
        target = source.with_suffix(".svg")
        try:
            svg = render(source.read_text(encoding="utf-8"), source.name)
        except DescriptionError as e:
            print(f"make.py: {e}", file=sys.stderr)
            return 1
        current = target.read_text(encoding="utf-8") if target.exists() else None
        if current == svg:
            continue
        if check:
            stale.append(target.name)
        else:
            target.write_text(svg, encoding="utf-8")
            print(f"wrote {target.relative_to(HERE.parent.parent)}")
    if stale:
        print(
            f"make.py: not what the descriptions give: {', '.join(stale)}; "
            "run python3 docs/diagrams/make.py and commit the result",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
