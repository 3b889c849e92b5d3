#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""A SQLite database used from several nodes at once, as a program on a shared home would:
each transaction (BEGIN IMMEDIATE: SQLite's fcntl locks on the database file) reads a
counter, writes it plus one and adds a row naming the node and turn.  SQLite trusts the
file's bytes under its locks, so a node that read a page another node had changed since, or
lost a lock to another node, shows as a lost increment, a missing row or a malformed file.

    sqlite_counter.py make DB JOURNAL_MODE   (rollback journal modes: delete, truncate, persist)
    sqlite_counter.py run DB NODE N          N transactions
    sqlite_counter.py check DB               prints "integrity COUNTER ROWS DISTINCT_ROWS"
"""
import sqlite3
import sys


def main():
    what, db = sys.argv[1], sys.argv[2]
    c = sqlite3.connect(db, timeout=120, isolation_level=None)
    if what == "make":
        c.execute("pragma journal_mode=" + sys.argv[3])
        c.execute("create table turns(node int, turn int, pad text)")
        c.execute("create table counter(n int)")
        c.execute("insert into counter values(0)")
    elif what == "run":
        node, n = int(sys.argv[3]), int(sys.argv[4])
        for turn in range(n):
            c.execute("begin immediate")
            (value,) = c.execute("select n from counter").fetchone()
            c.execute("update counter set n = ?", (value + 1,))
            # rows of up to 700 bytes, so the table spans pages that change hands too
            c.execute("insert into turns values(?, ?, ?)", (node, turn, "x" * (turn * 7 % 700)))
            c.execute("commit")
        print("%d transactions committed" % n)
    else:
        one = lambda sql: c.execute(sql).fetchone()[0]
        print(one("pragma integrity_check"), one("select n from counter"),
              one("select count(*) from turns"),
              one("select count(*) from (select distinct node, turn from turns)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
