#!/usr/bin/env bash
# Installs libmrc, the OCP MRC C API: headers, shared and static library, pkg-config file.
#
#   capi/install.sh [--prefix DIR] [--debug] [--from DIR]
#
#   --prefix DIR  where to install (default /usr/local): DIR/include/{mrc,mrc_api_ver,mrc_ctl,mrc_ctl_api_ver}.h,
#                 DIR/lib/libmrc.so.1.0.1 (SONAME libmrc.so.1) with the links libmrc.so.1 and libmrc.so,
#                 DIR/lib/libmrc.a and DIR/lib/pkgconfig/mrc.pc
#   --debug       build and take the debug profile instead of release
#   --from DIR    do not build: take libmrc_capi.so and libmrc_capi.a from DIR (the tests use this)
#
# Cargo names the artifacts libmrc_capi.* because the package `mrc` (libmrc/) already owns the name libmrc;
# this script installs them under the C name. Programs build with `pkg-config --cflags --libs mrc` and run with
# libmrc preloaded, which carries the verbs devices too: LD_PRELOAD=libmrc.so ./program (capi/README.md).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
prefix=/usr/local
profile=release
from=""
while [ $# -gt 0 ]; do
    case "$1" in
    --prefix) prefix=$2; shift 2 ;;
    --debug) profile=debug; shift ;;
    --from) from=$2; shift 2 ;;
    -h | --help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
if [ -z "$from" ]; then
    if [ "$profile" = release ]; then
        cargo build --release -p mrc-capi --manifest-path "$here/../Cargo.toml" >&2
    else
        cargo build -p mrc-capi --manifest-path "$here/../Cargo.toml" >&2
    fi
    target=$(cargo metadata --format-version 1 --no-deps --manifest-path "$here/../Cargo.toml" |
        sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
    from="$target/$profile"
fi
for f in libmrc_capi.so libmrc_capi.a; do
    [ -f "$from/$f" ] || { echo "install.sh: $from/$f is missing (build mrc-capi first)" >&2; exit 1; }
done
version=1.0.1
lib="$prefix/lib"
mkdir -p "$prefix/include" "$lib/pkgconfig"
install -m 0644 "$here"/include/mrc.h "$here"/include/mrc_api_ver.h "$here"/include/mrc_ctl.h \
    "$here"/include/mrc_ctl_api_ver.h "$prefix/include/"
install -m 0755 "$from/libmrc_capi.so" "$lib/libmrc.so.$version"
ln -sf "libmrc.so.$version" "$lib/libmrc.so.1"
ln -sf libmrc.so.1 "$lib/libmrc.so"
# OCP's example makefiles (examples/benchmark) link $(MRC_LIB_DIR)/lib_mrc.so by path.
ln -sf libmrc.so.1 "$lib/lib_mrc.so"
install -m 0644 "$from/libmrc_capi.a" "$lib/libmrc.a"
requires=""
if pkg-config --exists libibverbs 2>/dev/null; then requires="Requires: libibverbs"; fi
cat >"$lib/pkgconfig/mrc.pc" <<PC
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: mrc
Description: libmrc, the OCP MRC application and controller API, with MRC's verbs devices
Version: $version
$requires
Libs: -L\${libdir} -lmrc
Libs.private: -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc
Cflags: -I\${includedir}
PC
echo "installed libmrc $version under $prefix"
