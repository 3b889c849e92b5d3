#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The main job on the embedded default, from a fresh clone: install what is missing (as root),
# build, then the tour on LUN files in a temporary directory (scripts/tour.sh).
set -euo pipefail
cd "$(dirname "$0")"
scripts/deps.sh
make --no-print-directory all
make --no-print-directory demo
