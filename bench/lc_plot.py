#!/usr/bin/env python3
"""Draws bench/lc_accuracy_bench.py's CSV as an SVG: RMSE against n and bytes per key against n
(log scales), LC and HyperLogLog on the same items; at each n the group with the most keys.
Plain SVG, no plotting library.

Usage: lc_plot.py <lc-accuracy.csv> <out.svg>
"""
import csv
import math
import sys

COLORS = {"LC": "#1f77b4", "HLL": "#d62728"}
LABELS = {"LC": "LC (LC.ADD's defaults, 0.01 / 50,000)", "HLL": "HyperLogLog (PFADD)"}
W, H, PAD_L, PAD_R, PAD_T, PAD_B, GAP = 420, 300, 60, 15, 30, 45, 30


def best_rows(path):
    """type -> [(n, row)] sorted by n, each n from the group with the most keys."""
    rows = list(csv.DictReader(open(path)))
    best = {}
    for r in rows:
        k = (r["type"], int(r["n"]))
        if k not in best or int(r["group_keys"]) > int(best[k]["group_keys"]):
            best[k] = r
    out = {}
    for (t, n), r in sorted(best.items(), key=lambda kv: kv[0][1]):
        out.setdefault(t, []).append((n, r))
    return out


def panel(svg, x0, title, series, value, ylog, ymax, yticks, ylabel, guide=None):
    ns = [n for pts in series.values() for n, _ in pts]
    lx, hx = math.log10(min(ns)), math.log10(max(ns))
    px = lambda n: x0 + PAD_L + (math.log10(n) - lx) / (hx - lx) * (W - PAD_L - PAD_R)
    if ylog:
        ly, hy = math.log10(yticks[0]), math.log10(ymax)
        py = lambda v: PAD_T + (1 - (math.log10(max(v, yticks[0])) - ly) / (hy - ly)) * (H - PAD_T - PAD_B)
    else:
        py = lambda v: PAD_T + (1 - v / ymax) * (H - PAD_T - PAD_B)
    bottom = H - PAD_B
    svg.append(f'<text x="{x0 + W / 2}" y="16" text-anchor="middle" font-size="13">{title}</text>')
    svg.append(f'<line x1="{x0 + PAD_L}" y1="{bottom}" x2="{x0 + W - PAD_R}" y2="{bottom}" stroke="black"/>')
    svg.append(f'<line x1="{x0 + PAD_L}" y1="{bottom}" x2="{x0 + PAD_L}" y2="{PAD_T}" stroke="black"/>')
    for v in yticks:
        svg.append(f'<line x1="{x0 + PAD_L - 4}" y1="{py(v):.1f}" x2="{x0 + W - PAD_R}" y2="{py(v):.1f}" stroke="#ddd"/>')
        svg.append(f'<text x="{x0 + PAD_L - 6}" y="{py(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
    for e in range(int(lx), int(hx) + 1):
        svg.append(f'<text x="{px(10 ** e):.1f}" y="{bottom + 15}" text-anchor="middle">10^{e}</text>')
    svg.append(f'<text x="{x0 + W / 2}" y="{H - 8}" text-anchor="middle">distinct items n</text>')
    svg.append(f'<text x="{x0 + 14}" y="{(PAD_T + bottom) / 2}" text-anchor="middle" '
               f'transform="rotate(-90 {x0 + 14} {(PAD_T + bottom) / 2})">{ylabel}</text>')
    if guide is not None:
        svg.append(f'<line x1="{x0 + PAD_L}" y1="{py(guide):.1f}" x2="{x0 + W - PAD_R}" y2="{py(guide):.1f}" '
                   'stroke="#888" stroke-dasharray="4 3"/>')
    for t, pts in series.items():
        d = " ".join(f"{'M' if i == 0 else 'L'}{px(n):.1f},{py(value(r)):.1f}" for i, (n, r) in enumerate(pts))
        svg.append(f'<path d="{d}" fill="none" stroke="{COLORS[t]}" stroke-width="2"/>')
        for n, r in pts:
            svg.append(f'<circle cx="{px(n):.1f}" cy="{py(value(r)):.1f}" r="2.5" fill="{COLORS[t]}"/>')


def main(path, out):
    series = best_rows(path)
    total_w = 2 * W + GAP
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{total_w}" height="{H + 30}" '
           f'font-family="sans-serif" font-size="11">',
           f'<rect width="{total_w}" height="{H + 30}" fill="white"/>']
    top = max(float(r["rmse"]) for pts in series.values() for _, r in pts) * 100
    panel(svg, 0, "RMSE of the count (1% dashed)", series, lambda r: float(r["rmse"]) * 100, False,
          max(1.2, math.ceil(top * 5) / 5), [0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.2], "RMSE, %", guide=1.0)
    panel(svg, W + GAP, "bytes per key (used_memory growth)", series,
          lambda r: float(r["bytes_per_key"]), True, 30_000, [50, 100, 300, 1000, 3000, 10000, 30000],
          "bytes per key")
    for i, t in enumerate(series):
        x = PAD_L + i * 300
        svg.append(f'<rect x="{x}" y="{H + 12}" width="12" height="4" fill="{COLORS[t]}"/>')
        svg.append(f'<text x="{x + 16}" y="{H + 18}">{LABELS[t]}</text>')
    svg.append("</svg>")
    with open(out, "w") as f:
        f.write("\n".join(svg) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
