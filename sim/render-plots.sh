#!/usr/bin/env bash
# Renders every SVG plot of an mrc-sim output folder (or sweep run folder) to PNG beside it, for viewers and
# documents that do not take SVG. Uses rsvg-convert (Debian: apt-get install librsvg2-bin) or resvg.
#   sim/render-plots.sh sim-out            # sim-out/goodput.png, fct_cdf.png, queues.png
set -euo pipefail
dir="${1:?usage: sim/render-plots.sh OUTPUT_FOLDER}"
shopt -s nullglob
svgs=("$dir"/*.svg)
[ ${#svgs[@]} -gt 0 ] || { echo "no .svg in $dir" >&2; exit 1; }
for f in "${svgs[@]}"; do
    png="${f%.svg}.png"
    if command -v rsvg-convert >/dev/null 2>&1; then
        rsvg-convert --background-color=white "$f" -o "$png"
    elif command -v resvg >/dev/null 2>&1; then
        resvg --background white "$f" "$png"
    else
        echo "install librsvg2-bin (rsvg-convert) or resvg" >&2
        exit 1
    fi
    echo "$png"
done
