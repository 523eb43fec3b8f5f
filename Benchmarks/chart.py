#!/usr/bin/env python3
"""The ratios of one `make bench` run, drawn and tabled.

Reads the throughput JSON files bench.py saved in one run (one per set: JPEG,
PNG, HEIC) and writes, beside them, an SVG of thumbpipe's speed as a multiple of
each peer's, round by round (a dot a round, a bar at the median of the rounds'
ratios), with the target line of each ratio that has one. With --markdown it
also prints the tables docs/BENCHMARKS.md shows. Standard library only.

Usage: chart.py [--markdown] [--out FILE.svg] RESULT.json...
"""
import argparse
import json
import math
import os
import sys

# The ratios with a target (issues 37 and 54): thumbpipe's speed over the peer's must reach it.
TARGETS = {("jpeg", "codec-floor"): 0.85, ("jpeg", "pyvips"): 2.2, ("jpeg", "pyvips-floor"): 1.22,
           ("heic", "hevc-floor"): 0.85, ("heic", "pyvips"): 1.6}
# What each peer is, in a few words (bench.py's docstring says it in full).
PEERS = {
    "codec-floor": "JPEG codec floor (TurboJPEG planes → planes)",
    "codec-floor-durable": "codec floor, writing as thumbpipe writes",
    "libvips-path": "thumbpipe with the plane path off",
    "pyvips-floor": "pyvips store only, at its best",
    "floor": "thumbpipe's libvips store step alone",
    "pyvips": "pyvips whole job",
    "vips-cli": "vipsthumbnail + vips copy",
    "magick": "ImageMagick convert",
    "baseline": "another thumbpipe build",
    "hevc-floor": "HEVC decode floor (FFmpeg's libavcodec, tiles → planes)",
    "hevc-floor-de265": "HEVC decode floor with libde265 (libheif's decoder)",
}
SETS = {"jpeg": "JPEG photos (8–24 Mpx, 4:2:0; a fifth Display P3 / Adobe RGB)", "png": "PNG", "heic": "HEIC",
        "heic ×4": "HEIC, the set four times over"}


def load(paths):
    runs = []
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        data["file"] = os.path.basename(path)
        data["kind"] = (data.get("set") or {}).get("only") or "all"
        repeat = (data.get("set") or {}).get("repeat") or 1
        if repeat > 1:
            data["kind"] += f" ×{repeat}"
        runs.append(data)
    return runs


def ratios(run):
    """Peer → (round-by-round ratios of thumbpipe's speed to the peer's, their median)."""
    rows = {row["peer"]: row for row in run["rows"]}
    ours = rows.get("thumbpipe")
    out = {}
    if not ours:
        return out
    for name, row in rows.items():
        if name == "thumbpipe":
            continue
        by_round = sorted(p / t for p, t in zip(row["roundsSeconds"], ours["roundsSeconds"]) if t > 0)
        if by_round:
            out[name] = (by_round, by_round[len(by_round) // 2])
    return out


def svg(runs):
    """A row per set and peer: the rounds' ratios as dots on a log axis, the median as a bar."""
    rows = []
    for run in runs:
        for peer, (by_round, median) in sorted(ratios(run).items(), key=lambda kv: kv[1][1]):
            rows.append((run["kind"], peer, by_round, median, TARGETS.get((run["kind"], peer))))
    lo, hi = 0.25, 8.0
    for _, _, by_round, _, target in rows:
        lo = min(lo, min(by_round) / 1.2)
        hi = max(hi, max(by_round) * 1.2, (target or 0) * 1.2)
    left, width, row_h, top = 300, 460, 22, 40
    height = top + row_h * len(rows) + 50

    def x(value):
        return left + width * (math.log(value) - math.log(lo)) / (math.log(hi) - math.log(lo))

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 30}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="10" y="20" font-size="14" font-weight="bold">thumbpipe × peer, by round '
           f'(higher is faster; {runs[0]["date"][:10]}, --jobs {runs[0]["jobs"]})</text>']
    for tick in (0.25, 0.5, 1, 2, 4, 8, 16):
        if lo <= tick <= hi:
            out.append(f'<line x1="{x(tick):.1f}" y1="{top - 8}" x2="{x(tick):.1f}" y2="{height - 40}" '
                       f'stroke="{"#444" if tick == 1 else "#ddd"}"/>')
            out.append(f'<text x="{x(tick):.1f}" y="{height - 25}" text-anchor="middle">{tick:g}×</text>')
    for i, (kind, peer, by_round, median, target) in enumerate(rows):
        y = top + i * row_h + row_h / 2
        colour = "#2a7" if target is None or median >= target else "#c33"
        out.append(f'<text x="{left - 8}" y="{y + 4:.1f}" text-anchor="end">{kind}: {peer}</text>')
        out.append(f'<rect x="{x(lo):.1f}" y="{y - 5:.1f}" width="{max(x(median) - x(lo), 1):.1f}" height="10" '
                   f'fill="{colour}" fill-opacity="0.35"/>')
        for value in by_round:
            out.append(f'<circle cx="{x(value):.1f}" cy="{y:.1f}" r="3" fill="{colour}"/>')
        out.append(f'<text x="{x(max(by_round)) + 8:.1f}" y="{y + 4:.1f}">{median:.2f}</text>')
        if target:
            out.append(f'<line x1="{x(target):.1f}" y1="{y - 9:.1f}" x2="{x(target):.1f}" y2="{y + 9:.1f}" '
                       f'stroke="#000" stroke-width="2" stroke-dasharray="3,2"/>')
    out.append(f'<text x="10" y="{height - 8}" fill="#555">dots: rounds; bar: median of the rounds\' ratios; '
               'dashed: target; red: median below its target</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def markdown(runs):
    """One table per set: images/s, thumbpipe × the peer (median rounds, by round), PSS."""
    lines = []
    for run in runs:
        rows = {row["peer"]: row for row in run["rows"]}
        ratio = ratios(run)
        lines.append(f"**{SETS.get(run['kind'], run['kind'])}**: {run['images']} images, "
                     f"{run['megapixels']:.0f} Mpx, `--jobs {run['jobs']}`, {len(rows['thumbpipe']['roundsSeconds'])} "
                     f"rounds (`{run['file']}`)")
        lines.append("")
        lines.append("| peer | images/s | thumbpipe × peer (median rounds) | × by round (median) | target | peak PSS, median of rounds |")
        lines.append("|---|---:|---:|---:|---:|---:|")
        for name, row in sorted(rows.items(), key=lambda kv: -kv[1]["imagesPerSecond"]):
            target = TARGETS.get((run["kind"], name))
            pss = row.get("medianPeakPSSBytes")
            label = "**thumbpipe**" if name == "thumbpipe" else f"{name}: {PEERS.get(name, name)}"
            times = "—" if name == "thumbpipe" else f"{row['thumbpipeTimes']:.2f}"
            paired = "—" if name == "thumbpipe" else f"{ratio[name][1]:.2f}"
            lines.append(f"| {label} | {row['imagesPerSecond']:.2f} | {times} | {paired} | "
                         f"{'' if target is None else f'≥ {target}'} | {pss / 1e6:.0f} MB |" if pss else
                         f"| {label} | {row['imagesPerSecond']:.2f} | {times} | {paired} | "
                         f"{'' if target is None else f'≥ {target}'} | — |")
        if run.get("incremental"):
            inc = run["incremental"]
            lines.append("")
            lines.append(f"Nightly: {inc['items']} small items, full run {inc['fullSeconds']} s, unchanged re-run "
                         f"{inc['unchangedSeconds']} s ({inc['speedup']}× faster).")
        if len(run.get("memory") or []) == 2:
            a, b = run["memory"]
            lines.append(f"Memory: {a['items']} vs {b['items']} small images, peak RSS {a['peakRSSBytes'] / 1e6:.0f} "
                         f"vs {b['peakRSSBytes'] / 1e6:.0f} MB.")
        lines.append("")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="+")
    parser.add_argument("--out", help="the SVG to write (default: chart-<date>.svg beside the first result)")
    parser.add_argument("--markdown", action="store_true", help="also print the tables")
    args = parser.parse_args()
    order = {"jpeg": 0, "png": 1, "heic": 2}
    runs = sorted(load(args.results), key=lambda r: order.get(r["kind"], 9))
    out = args.out or os.path.join(os.path.dirname(args.results[0]),
                                   "chart-" + runs[0]["date"].replace(":", "").replace("-", "") + ".svg")
    with open(out, "w") as f:
        f.write(svg(runs))
    print(f"chart: {out}", file=sys.stderr)
    if args.markdown:
        print(markdown(runs))


if __name__ == "__main__":
    main()
