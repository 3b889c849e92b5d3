# SPDX-License-Identifier: GPL-2.0-or-later
"""A syslog socket for tests: receives datagrams on SOCKET, appends each as a line to OUT.

Ends by itself once DIR (the test's scratch directory) is gone, so a test that dies leaves
no listener behind.  Usage: syslog_listener.py SOCKET OUT DIR"""
import os
import socket
import sys

sock_path, out_path, scratch = sys.argv[1:4]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sock_path)
s.settimeout(0.5)
with open(out_path, "ab", buffering=0) as out:
    while os.path.isdir(scratch):
        try:
            out.write(s.recv(65536) + b"\n")
        except socket.timeout:
            pass
