#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The steps of docs/admin-guide.md, for test_admin_guide.sh: prints one bash call per step.

  guide_steps.py GUIDE T BIN SUBNET NODES

In the guide, a ```console block holds commands, each line "nodeN# CMD" (on node N) or
"all# CMD" (on every node); other lines are output.  A block preceded by the comment
"<!-- file: PATH -->" is a file's whole content, written on every node.  "<!-- test:
wait-until nodeN CMD -->" is for the test alone: wait until CMD succeeds there (a program the
guide started in the background is up).  Each step comes out as

  step NODE 'MAPPED CMD' 'CMD AS WRITTEN'
  put_file NODE 'MAPPED PATH' 'MAPPED CONTENT' 'PATH AS WRITTEN'
  wait_step NODE 'MAPPED CMD'

with the site's paths mapped to the test's (below): its LUNs are files in T/dev, each node's
/etc and /var/log are directories of its own under T, and so on."""
import re
import shlex
import sys


def mapper(t, bindir, subnet):
    shared = [
        ("/dev/mapper", f"{t}/dev"),
        ("/etc/corosync/", f"{t}/etc/corosync/"),
        ("/usr/sbin/cfs-fence", f"{bindir}/cfs-fence"),
        ("192.168.10.", f"{subnet}."),  # the cluster ring: the harness's addresses
        ("odm_group=dba", "odm_group=disk"),  # this machine has no dba group
    ]
    local = [  # each node's own
        ("/etc/cfs/", "etc/cfs/"),
        ("/etc/sysctl.d/", "etc/sysctl.d/"),
        ("/etc/profile.d/", "etc/profile.d/"),
        ("/etc/fstab", "etc/fstab"),
        ("/var/log/cfs", "log"),
        ("/var/opt/oracle", "var/opt/oracle"),
    ]

    def map_text(text, node):
        for old, new in shared:
            text = text.replace(old, new)
        for old, new in local:
            text = text.replace(old, f"{t}/n{node}/{new}")
        return re.sub(r"(?<![\w/.-])/u0([12])\b", rf"{t}/u0\1", text)

    return map_text


def steps(lines):
    """(kind, who, text, path) for every command, file and wait of the guide, in order."""
    file_path = None
    block = None  # (kind, path, lines) while inside a fenced block
    for line in lines:
        if block is not None:
            if line.startswith("```"):
                kind, path, body = block
                if kind == "file":
                    yield ("file", "all", "".join(body), path)
                block = None
            elif block[0] == "console":
                m = re.match(r"(node(\d+)|all)# (.*)", line)
                if m:
                    yield ("run", m.group(2) or "all", m.group(3).rstrip("\n"), None)
            else:
                block[2].append(line)
            continue
        m = re.match(r"<!-- file: (\S+).* -->", line)
        if m:
            file_path = m.group(1)
            continue
        m = re.match(r"<!-- test: wait-until node(\d+) (.*) -->", line)
        if m:
            yield ("wait", m.group(1), m.group(2), None)
            continue
        if line.startswith("```"):
            if file_path:
                block = ("file", file_path, [])
            elif line.strip() == "```console":
                block = ("console", None, [])
            else:
                block = ("other", None, [])
            file_path = None


def main():
    guide, t, bindir, subnet, nodes = sys.argv[1:6]
    map_text = mapper(t, bindir, subnet)
    q = shlex.quote
    with open(guide) as f:
        for kind, who, text, path in steps(f.readlines()):
            for node in range(1, int(nodes) + 1) if who == "all" else [int(who)]:
                if kind == "run":
                    print("step", node, q(map_text(text, node)), q(text))
                elif kind == "wait":
                    print("wait_step", node, q(map_text(text, node)))
                else:
                    print("put_file", node, q(map_text(path, node)), q(map_text(text, node)), q(path))


main()
