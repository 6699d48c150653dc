#!/bin/sh
# test_sigmad_unit.sh - sigmad's systemd unit (etc/sigmad.service) keeps its
# hardening: systemd's own judge, `systemd-analyze security`, run offline
# on the unit file, must find its exposure at 7.0 or below (the unit without
# hardening scored 9.6, UNSAFE). Skipped where systemd-analyze cannot judge
# a unit file offline (systemd before 250).
unit=${top_srcdir:-.}/etc/sigmad.service
command -v systemd-analyze >/dev/null 2>&1 || { echo "no systemd-analyze"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
cp "$unit" "$tmp/sigmad.service" || exit 1
systemd-analyze security --offline=yes --threshold=100 "$tmp/sigmad.service" \
	> "$tmp/out" 2>&1 || { echo "systemd-analyze cannot judge offline"; exit 77; }
tail -n 1 "$tmp/out"
if ! systemd-analyze security --offline=yes --threshold=70 "$tmp/sigmad.service" >/dev/null 2>&1; then
	echo "FAIL: $unit: exposure above 7.0"
	grep '^✗' "$tmp/out"
	exit 1
fi
