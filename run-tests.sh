#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Every test, from a fresh clone: install what is missing (as root), build with
# -fsanitize=address,undefined, run the unit and integration tests.
set -euo pipefail
cd "$(dirname "$0")"
scripts/deps.sh
make --no-print-directory -j"$(nproc)" check
