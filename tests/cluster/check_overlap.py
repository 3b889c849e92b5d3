#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Reads grant/release logs of cfslock (--log) from every node and fails if two incompatible
grants of one resource overlapped in time.  All nodes run on one machine, so their
CLOCK_MONOTONIC times compare.  A grant is logged after it arrived and a release before it was
sent, so each logged interval lies inside the real holding: an overlap here is a real one."""
import sys

COMPAT = {  # DLM matrix
    "NL": set("NL CR CW PR PW EX".split()), "CR": set("NL CR CW PR PW".split()),
    "CW": set("NL CR CW".split()), "PR": set("NL CR PR".split()),
    "PW": set("NL CR".split()), "EX": {"NL"},
}

def main(paths):
    open_at, intervals = {}, []
    lines = []
    for p in paths:
        with open(p) as f:
            lines += [l.split() for l in f if l.strip()]
    lines.sort(key=lambda w: int(w[0]))
    for t, node, pid, what, res, mode in lines:
        key = (node, pid, res)
        if what == "grant":
            if key in open_at:  # a conversion: close the old mode, open the new one
                t0, m0 = open_at.pop(key)
                intervals.append((res, int(t0), int(t), m0, key))
            open_at[key] = (t, mode)
        elif what == "release" and key in open_at:
            t0, m0 = open_at.pop(key)
            intervals.append((res, int(t0), int(t), m0, key))
    for key, (t0, m0) in open_at.items():
        intervals.append((key[2], int(t0), 1 << 62, m0, key))
    bad = 0
    by_res = {}
    for iv in intervals:
        by_res.setdefault(iv[0], []).append(iv)
    for res, ivs in by_res.items():
        ivs.sort(key=lambda x: x[1])
        for i, a in enumerate(ivs):
            for b in ivs[i + 1:]:
                if b[1] >= a[2]:
                    break
                if a[4] != b[4] and b[3] not in COMPAT[a[3]]:
                    bad += 1
                    print(f"overlap on {res}: {a[3]} by node {a[4][0]} pid {a[4][1]} and "
                          f"{b[3]} by node {b[4][0]} pid {b[4][1]}")
    print(f"checked {len(intervals)} grants on {len(by_res)} resources: {bad} overlaps")
    return 1 if bad else 0

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
