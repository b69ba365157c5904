#!/bin/sh
# Installs the MRC dissector (mrc.lua) where Wireshark and tshark load Lua plugins at start:
#   tools/wireshark/install.sh            # for this user: ~/.local/lib/wireshark/plugins/mrc.lua
#   tools/wireshark/install.sh --system   # for everyone: Wireshark's global Lua plugin folder (root)
# It also sets Wireshark's udp.ignore_ipv6_zero_checksum preference for this user (unless it is set already):
# MRC sends IPv6 UDP with a zero checksum on SRv6 paths (spec/wire.md WIRE-ENC-3), which Wireshark otherwise
# flags on every packet.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
if [ "${1:-}" = "--system" ]; then
    dest=$(tshark -G folders 2>/dev/null | sed -n 's/^Global Lua Plugins:[[:space:]]*//p')
    [ -n "$dest" ] || { echo "install.sh: tshark -G folders names no global Lua plugin folder" >&2; exit 1; }
else
    dest="${HOME}/.local/lib/wireshark/plugins"
fi
mkdir -p "$dest"
install -m 0644 "$here/mrc.lua" "$dest/mrc.lua"
echo "installed $dest/mrc.lua"
prefs="${XDG_CONFIG_HOME:-$HOME/.config}/wireshark/preferences"
if ! grep -qs '^udp.ignore_ipv6_zero_checksum:' "$prefs"; then
    mkdir -p "$(dirname "$prefs")"
    printf 'udp.ignore_ipv6_zero_checksum: TRUE\n' >>"$prefs"
    echo "set udp.ignore_ipv6_zero_checksum in $prefs"
fi
