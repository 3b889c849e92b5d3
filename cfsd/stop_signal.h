/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The daemon stopped by SIGTERM, SIGINT or SIGHUP (stop_signal.c): its mount's note in
 * /run/mount/utab dropped first, then the session ended as libfuse's own handlers end it. */
#ifndef CFSD_STOP_SIGNAL_H
#define CFSD_STOP_SIGNAL_H

struct fuse_session;
struct stop_signal;

/* In place of libfuse's handlers (fuse_set_signal_handlers), for the mount at mount_abs, from
 * the thread that serves the session's requests (cfsd_serve_requests). */
int stop_signal_start(struct fuse_session *se, const char *mount_abs, struct stop_signal **out);
/* Once the session has ended (before the unmount: the thread may still look at the mount
 * point): those signals ignored from then on, the thread joined. */
void stop_signal_end(struct stop_signal *s);

#endif
