#!/usr/bin/env bash
# Builds OCP's own programs unmodified from an OCP-Multipath-Reliable-Connection checkout, with their own
# makefiles and headers, against this libmrc (installed as lib_mrc.so where their makefile looks), and runs them
# over loopback with libmrc preloaded (it carries the verbs devices):
#
#   capi/ocp-programs.sh OCP_CHECKOUT [ITERS]
#
#   OCP_CHECKOUT  a checkout of github.com/opencomputeproject/OCP-Multipath-Reliable-Connection (read only: it
#                 is copied into a scratch folder and built there)
#   ITERS         mrc_example's -n, exchanges per message size (default 100)
#
# - test/mrc_test (its Makefile): opens mrc0 and allocates a PD; must print "Hello MRC!".
# - examples/ev_expansion (no makefile: `gcc ev_expansion.c -o ev_expansion`, as its header says): prints
#   its STEV and SRv6 EV expansions; must exit 0 (it uses no library).
# - examples/benchmark/mrc_example (its makefile, MRC_H_PATH = the checkout, MRC_LIB_DIR = our lib/): server
#   and client, every size of its default sweep (1 B to 64 MiB, x2), `-g 0` (our device has one GID; the
#   example's default index is 3); the server validates every size's bytes (its "Data validation" lines,
#   MRC_LOG_LEVEL=DEBUG), the client prints one row per size.
#
# Run it under `flock /tmp/mrc-net.lock` on a shared machine (loopback sockets). Needs gcc, make,
# libibverbs-dev. Exits non-zero with the failing step named.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
ocp=${1:?usage: capi/ocp-programs.sh OCP_CHECKOUT [ITERS]}
iters=${2:-100}
ocp=$(cd "$ocp" && pwd)
[ -f "$ocp/mrc.h" ] && [ -f "$ocp/examples/benchmark/makefile" ] ||
    { echo "ocp-programs.sh: $ocp is not an OCP-Multipath-Reliable-Connection checkout (no mrc.h, examples/)" >&2; exit 2; }

work=$(mktemp -d)
server_pid=""
cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "ocp-programs.sh: FAIL: $*" >&2; exit 1; }

echo "== building libmrc (release)"
cargo build --release -p mrc-capi --manifest-path "$root/Cargo.toml" >&2
target=$(cargo metadata --format-version 1 --no-deps --manifest-path "$root/Cargo.toml" |
    sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
"$here/install.sh" --prefix "$work/prefix" --from "$target/release" >/dev/null
lib="$work/prefix/lib"
# libmrc carries the verbs devices: preloaded, it answers the programs' ibv_* calls too.
preload="$lib/libmrc.so"
[ -e "$lib/lib_mrc.so" ] || fail "install.sh laid no lib_mrc.so in $lib"

echo "== building OCP's programs from $ocp (a copy), with their makefiles and headers"
cp -a "$ocp" "$work/ocp"
make -s -C "$work/ocp/examples/benchmark" MRC_H_PATH="$work/ocp" MRC_LIB_DIR="$lib" >"$work/make-benchmark.log" 2>&1 ||
    { cat "$work/make-benchmark.log" >&2; fail "examples/benchmark: make"; }
make -s -C "$work/ocp/test" >"$work/make-test.log" 2>&1 || { cat "$work/make-test.log" >&2; fail "test: make"; }
(cd "$work/ocp/examples/ev_expansion" && gcc ev_expansion.c -o ev_expansion) || fail "examples/ev_expansion: gcc"

run() { LD_PRELOAD="$preload" MRC_SHIM_PLANES=2 "$@"; }

echo "== test/mrc_test -d mrc0"
out=$(cd "$work/ocp/test" && run ./mrc_test -d mrc0) || fail "mrc_test exited $?: $out"
echo "$out"
grep -q "Hello MRC!" <<<"$out" || fail "mrc_test printed no 'Hello MRC!'"

echo "== examples/ev_expansion/ev_expansion"
"$work/ocp/examples/ev_expansion/ev_expansion" >"$work/ev_expansion.out" || fail "ev_expansion exited $?"
echo "$(grep -c '^--' "$work/ev_expansion.out") lines of section banners, $(grep -c 'fld0=' "$work/ev_expansion.out") expanded EVs"

echo "== examples/benchmark/mrc_example: server and client, -n $iters, every size of the default sweep"
port=$((18200 + RANDOM % 500))
cd "$work/ocp/examples/benchmark"
MRC_LOG_LEVEL=DEBUG LD_PRELOAD="$preload" MRC_SHIM_PLANES=2 timeout 600 ./mrc_example -d mrc0 -g 0 -p "$port" -n "$iters" \
    >"$work/server.out" 2>&1 &
server_pid=$!
for _ in $(seq 100); do
    grep -q "Server listening" "$work/server.out" 2>/dev/null && break
    sleep 0.1
done
client_rc=0
run timeout 600 ./mrc_example 127.0.0.1 -d mrc0 -g 0 -p "$port" -n "$iters" >"$work/client.out" 2>&1 || client_rc=$?
server_rc=0
wait "$server_pid" || server_rc=$?
server_pid=""
cat "$work/client.out"
grep -v "DEBUG" "$work/server.out" | sed 's/^/server: /'
[ "$client_rc" = 0 ] || fail "mrc_example client exited $client_rc"
[ "$server_rc" = 0 ] || fail "mrc_example server exited $server_rc"
sizes=27 # 1 B .. 64 MiB, x2
rows=$(grep -cE '^ [0-9]+ +[0-9]+ ' "$work/client.out" || true)
passed=$(grep -c "Data validation passed" "$work/server.out" || true)
if grep -q "Data mismatch\|Data validation found" "$work/server.out"; then
    grep "Data mismatch\|Data validation found" "$work/server.out" >&2
    fail "the server found wrong bytes"
fi
[ "$rows" = "$sizes" ] || fail "the client reported $rows sizes, not $sizes"
[ "$passed" = "$sizes" ] || fail "the server validated $passed sizes, not $sizes"
echo "ocp-programs.sh: PASS: mrc_test, ev_expansion, mrc_example ($sizes sizes, $iters iterations each, every size's bytes validated by the server)"
