#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The Debian packages as an administrator meets them: `make deb` builds cfs-utils, libodm and
# libodm-dev; apt-get installs them with their dependencies from Debian; the one-node tour
# runs on the installed binaries (not the build tree), also `mount -t cfs` and a plain
# `umount` through the installed helpers; the packages are upgraded over themselves (the
# same build as a later version); then purged, leaving none of their files.  A machine that
# already has these packages installed is left alone (skip).
. "$(dirname "$0")/../lib.sh"
TREE=$(cd "$(dirname "$0")/../.." && pwd)
PKGS=(cfs-utils libodm libodm-dev)
if [ "$(id -u)" -ne 0 ] || ! command -v dpkg-buildpackage >/dev/null || [ ! -c /dev/fuse ]; then
	echo "skip - Debian packages: need root, dpkg-buildpackage and /dev/fuse"
	exit 0
fi
for p in "${PKGS[@]}"; do
	if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		echo "skip - Debian packages: $p is installed on this machine; the test would replace it"
		exit 0
	fi
done
installed=
# Whatever happens, the machine is left without the packages.
trap '[ -n "$installed" ] && dpkg --purge "${PKGS[@]}" >/dev/null 2>&1; rm -rf "$T"' EXIT

if make -C "$TREE" --no-print-directory deb DEB_DIR="$T/deb" >"$T/build.log" 2>&1; then
	ok "make deb builds $(cd "$T/deb" && ls -- *.deb | grep -vc dbgsym) packages"
else
	not_ok "make deb: $(tail -20 "$T/build.log")"
	finish
fi
debs=()
for p in "${PKGS[@]}"; do debs+=("$(ls "$T"/deb/"${p}"_*.deb)"); done
check "cfs-utils depends on corosync and fuse3" bash -c "dpkg-deb -f '${debs[0]}' Depends | grep -q corosync &&
	dpkg-deb -f '${debs[0]}' Depends | grep -q fuse3"
for d in "${debs[@]}"; do
	p=$(dpkg-deb -f "$d" Package)
	check "$p carries the licenses (/usr/share/doc/$p/copyright: GPL-2.0-or-later and LGPL-2.1-or-later)" \
		bash -c "dpkg-deb --fsys-tarfile '$d' | tar -xO ./usr/share/doc/$p/copyright |
			grep -q '^License: GPL-2.0-or-later' && dpkg-deb --fsys-tarfile '$d' |
			tar -xO ./usr/share/doc/$p/copyright | grep -q '^License: LGPL-2.1-or-later'"
done

installed=yes
if apt-get install -y -q "${debs[@]}" >"$T/install.log" 2>&1; then
	ok "apt-get installs the three packages with their dependencies"
else
	not_ok "apt-get install: $(tail -20 "$T/install.log")"
	finish
fi
dpkg -L "${PKGS[@]}" | sort -u >"$T/files"
for f in /usr/bin/cfs /usr/bin/cfsd /usr/bin/cvm /usr/sbin/cfs-fence /sbin/mount.cfs /sbin/umount.cfs \
	/lib/systemd/system/cfs@.service /usr/include/odm.h /usr/share/man/man8/cfs.8.gz; do
	check "installed: $f" test -e "$f"
done
check "dlopen(\"libodm.so\") finds the installed library" \
	env -i python3 -c 'import ctypes; ctypes.CDLL("libodm.so")'
check "cfs --version names the release" bash -c "/usr/bin/cfs --version | grep -q \"$(sed -n 's/.*CFS_RELEASE "\(.*\)"/\1/p' "$TREE/release.h")\""
systemd-analyze verify /lib/systemd/system/cfs@u01.service >"$T/verify.out" 2>&1
check "systemd finds every program cfs@.service runs" bash -c "! grep -q 'not executable' '$T/verify.out'"

# The tour on the installed binaries: nothing of the build tree on PATH or in the loader's.
tour() { env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin TMPDIR="$T" bash "$TREE/scripts/tour.sh" --installed; }
if tour >"$T/tour.log" 2>&1; then
	ok "the tour runs on the installed packages ($(grep -c '^\$ ' "$T/tour.log") steps)"
else
	not_ok "the tour on the installed packages: $(tail -20 "$T/tour.log")"
fi
check "the tour ran /usr/bin's tools" grep -q '^\$ /usr/bin/cvm create' "$T/tour.log"

# mount(8) and umount(8) through the installed helpers.
for i in 0 1; do truncate -s 64M "$T/lun$i"; done
export CVM_SCAN=$T
cvm create pkgvol "$T/lun0" "$T/lun1" >/dev/null && mkfs.cfs pkgvol >/dev/null 2>&1
mkdir -p "$T/m"
check "mount -t cfs mounts through /sbin/mount.cfs" mount -t cfs pkgvol "$T/m" -o "log=$T/cfsd.log,scan=$T"
check "the mount works" bash -c "echo hello >'$T/m/f' && grep -q hello '$T/m/f'"
check "a plain umount goes through /sbin/umount.cfs and waits for the daemon" \
	bash -c "umount '$T/m' && ! pgrep -f '^cfsd .*$T/m' >/dev/null"
check "fsck.cfs -n clean" fsck.cfs -n pkgvol

# Upgrade: the same packages as a later version, installed over them.
mkdir -p "$T/up"
for d in "${debs[@]}"; do
	x=$T/up/x
	rm -rf "$x" && dpkg-deb -R "$d" "$x"
	sed -i 's/^Version: \(.*\)/Version: \1+up1/; s/(= \([^)]*\))/(= \1+up1)/' "$x/DEBIAN/control"
	dpkg-deb -b "$x" "$T/up/" >/dev/null
done
if apt-get install -y -q "$T"/up/*.deb >"$T/upgrade.log" 2>&1; then
	ok "the packages upgrade over themselves"
else
	not_ok "upgrade: $(tail -20 "$T/upgrade.log")"
fi
check "dpkg lists the new version" bash -c "dpkg-query -W -f='\${Version}' cfs-utils | grep -q '+up1$'"
check "the upgraded tools run" /usr/bin/cfs --version

# Purge: nothing of theirs is left.
if apt-get purge -y -q "${PKGS[@]}" >"$T/purge.log" 2>&1; then
	installed=
	ok "apt-get purge removes them"
else
	not_ok "purge: $(tail -20 "$T/purge.log")"
fi
# (Directories they shared with the system, /usr/bin and the like, stay.)
left=$(while read -r f; do [ ! -d "$f" ] && { [ -e "$f" ] || [ -L "$f" ]; } && echo "$f"; done <"$T/files")
[ -z "$left" ] && ok "none of their $(grep -c . "$T/files") files is left" || not_ok "left behind: $left"
finish
