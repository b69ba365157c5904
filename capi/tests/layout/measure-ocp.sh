#!/usr/bin/env bash
# Writes the layout tables from an OCP-Multipath-Reliable-Connection checkout: compiles probe.c against its
# headers, once with the default API revisions and once with the controller API at 1.0.0 (where
# mrc_ctl_ev_event has no `state`). Usage: measure-ocp.sh <checkout>  (records its commit; OCP_COMMIT=<sha> for an unpacked archive).
set -euo pipefail
ocp=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
commit=${OCP_COMMIT:-$(git -C "$ocp" rev-parse HEAD)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
measure() {
    local out=$1
    shift
    cc -std=gnu11 -w -I"$ocp" "$@" -o "$tmp/probe" "$here/probe.c"
    {
        echo "# OCP-Multipath-Reliable-Connection $commit, measured by capi/tests/layout/probe.c $*"
        echo "# $(cc --version | head -1), $(uname -m)"
        "$tmp/probe" | LC_ALL=C sort
    } >"$here/$out"
}
measure ocp-1.0.1.txt
measure ocp-1.0.1-ctl-1.0.0.txt '-DMRC_CTL_API_VER_USED=MRC_CTL_API_VER(1,0,0)'
# Function prototypes, as gcc normalises them (-aux-info: parameter types only, no names or comments).
printf '#include <mrc_ctl.h>\n' >"$tmp/s.c"
cc -std=gnu11 -w -I"$ocp" -aux-info "$tmp/aux.txt" -c "$tmp/s.c" -o "$tmp/s.o"
{
    echo "# OCP-Multipath-Reliable-Connection $commit: the functions mrc.h and mrc_ctl.h declare (gcc -aux-info)"
    grep -E '^/\* [^*]*mrc[a-z_]*\.h:' "$tmp/aux.txt" | sed 's|^/\*[^*]*\*/ *||' | LC_ALL=C sort
} >"$here/ocp-1.0.1-functions.txt"
