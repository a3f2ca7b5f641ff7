#!/usr/bin/env python3
"""Draws bench/layout_sweep.py's CSV as an SVG: ns per item against filter size (log scale),
one panel per command, one line per side (median of the rounds, with the min–max range as a
bar). Plain SVG, no plotting library.

Usage: plot_sweep.py <layout-sweep.csv> <out.svg>
"""
import csv
import math
import statistics
import sys
from collections import defaultdict

COLORS = {"lcbloom standard": "#1f77b4", "lcbloom blocked": "#2ca02c", "RedisBloom 2.8.2": "#d62728"}
W, H, PAD_L, PAD_R, PAD_T, PAD_B, GAP = 420, 300, 55, 15, 30, 45, 30


def main(path, out):
    data = defaultdict(list)
    for row in csv.DictReader(open(path)):
        data[(row["side"], int(row["size_mib"]), row["command"])].append(float(row["ns_per_item"]))
    sides = [s for s in COLORS if any(k[0] == s for k in data)]
    sizes = sorted({k[1] for k in data})
    commands = ["BF.MADD", "BF.MEXISTS"]
    top = max(max(v) for v in data.values()) * 1.1
    step = 10 ** math.floor(math.log10(top / 4))
    step *= 5 if top / step > 20 else (2 if top / step > 8 else 1)
    total_w = 2 * W + GAP
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{total_w}" height="{H + 30}" '
           f'font-family="sans-serif" font-size="11">',
           f'<rect width="{total_w}" height="{H + 30}" fill="white"/>']
    lx, ly = math.log2(sizes[0]), math.log2(sizes[-1])
    for p, command in enumerate(commands):
        x0 = p * (W + GAP)
        px = lambda s: x0 + PAD_L + (math.log2(s) - lx) / max(ly - lx, 1) * (W - PAD_L - PAD_R)
        py = lambda v: PAD_T + (1 - v / top) * (H - PAD_T - PAD_B)
        svg.append(f'<text x="{x0 + W / 2}" y="16" text-anchor="middle" font-size="13">'
                   f'{command}, 100 members per call, 0.001 filter</text>')
        svg.append(f'<line x1="{x0 + PAD_L}" y1="{py(0)}" x2="{x0 + W - PAD_R}" y2="{py(0)}" stroke="black"/>')
        svg.append(f'<line x1="{x0 + PAD_L}" y1="{py(0)}" x2="{x0 + PAD_L}" y2="{PAD_T}" stroke="black"/>')
        v = 0
        while v <= top:
            svg.append(f'<line x1="{x0 + PAD_L - 4}" y1="{py(v)}" x2="{x0 + W - PAD_R}" y2="{py(v)}" stroke="#ddd"/>')
            svg.append(f'<text x="{x0 + PAD_L - 6}" y="{py(v) + 4}" text-anchor="end">{v:g}</text>')
            v += step
        for s in sizes:
            label = f"{s} MiB" if s < 1024 else f"{s // 1024} GiB"
            svg.append(f'<text x="{px(s)}" y="{py(0) + 15}" text-anchor="middle">{label}</text>')
        svg.append(f'<text x="{x0 + W / 2}" y="{H - 8}" text-anchor="middle">filter size (standard layout)</text>')
        svg.append(f'<text x="{x0 + 14}" y="{(PAD_T + H - PAD_B) / 2}" text-anchor="middle" '
                   f'transform="rotate(-90 {x0 + 14} {(PAD_T + H - PAD_B) / 2})">server ns per item</text>')
        for side in sides:
            pts = [(s, data[(side, s, command)]) for s in sizes if data.get((side, s, command))]
            path_d = " ".join(f"{'M' if i == 0 else 'L'}{px(s):.1f},{py(statistics.median(v)):.1f}"
                              for i, (s, v) in enumerate(pts))
            svg.append(f'<path d="{path_d}" fill="none" stroke="{COLORS[side]}" stroke-width="2"/>')
            for s, v in pts:
                svg.append(f'<line x1="{px(s):.1f}" y1="{py(min(v)):.1f}" x2="{px(s):.1f}" y2="{py(max(v)):.1f}" '
                           f'stroke="{COLORS[side]}"/>')
                svg.append(f'<circle cx="{px(s):.1f}" cy="{py(statistics.median(v)):.1f}" r="2.5" fill="{COLORS[side]}"/>')
    for i, side in enumerate(sides):
        x = PAD_L + i * 170
        svg.append(f'<rect x="{x}" y="{H + 12}" width="12" height="4" fill="{COLORS[side]}"/>')
        svg.append(f'<text x="{x + 16}" y="{H + 18}">{side}</text>')
    svg.append("</svg>")
    with open(out, "w") as f:
        f.write("\n".join(svg) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
