#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Install the Debian packages the build and the tests need, only those missing.
# Runs apt-get as root; says what it runs; fails with a clear message when it cannot.
set -euo pipefail

PACKAGES=(
  build-essential pkg-config
  libaio-dev          # cvm: asynchronous I/O to the LUNs
  libcriterion-dev    # tests
  fio                 # bench and integration workloads
  libprotobuf-c-dev protobuf-c-compiler    # wire messages (proto/)
  corosync libcpg-dev libquorum-dev libcorosync-common-dev   # dlm-client corosync backend
  libdlm-dev          # dlm-client dlm backend
  iproute2            # tests/cluster: network namespaces
  libfuse3-dev fuse3  # cfs: the FUSE daemon and its mounts
  acl attr dbench     # cfs tests: ACLs, xattrs, a file server load
  xfsprogs            # cfs tests: xfs_io chproj and lsproj (project ids)
  gdb                 # tests/cluster: what a hung cfsd's threads were doing
  sbd fence-agents    # tests/cluster: cfs-fence with fence_sbd for real, the agents' options
  debhelper           # make deb: the Debian packages
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "deps: missing Debian packages: ${missing[*]}" >&2
  echo "deps: run as root, or install them with: sudo apt-get install ${missing[*]}" >&2
  exit 1
fi
echo "deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
echo "deps: + apt-get update" >&2
apt-get update -qq || { echo "deps: apt-get update failed: check the network or the apt sources" >&2; exit 1; }
echo "deps: + apt-get install -y ${missing[*]}" >&2
apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 || {
  echo "deps: apt-get install failed for: ${missing[*]}" >&2; exit 1; }
