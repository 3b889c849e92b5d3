/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Where a daemon in the background logs when its mount has no log=FILE: syslog. */
#pragma once

/* A descriptor whose lines go to syslog (facility daemon, tag cfsd), or -errno.  Writes to it
 * never wait: while syslog takes nothing, lines that do not fit in the pipe are dropped. */
int syslog_pipe_open(void);

/* Sends what is still in the pipe (waiting up to 2 s for syslog), once stderr, the last
 * writer, no longer points at it.  For the end of the daemon. */
void syslog_pipe_close(void);
