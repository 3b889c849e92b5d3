/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libcvm: the cluster volume manager.
 *
 * A volume is a concatenation of stripe sets; each stripe set stripes its LUNs with its own
 * stripe width.  Every LUN starts with a metadata area (label and two copies of the volume
 * config); data follows.  The config with the highest valid generation wins.
 *
 * Errors are negative errno values.  Functions that can fail for a reason a person must act on
 * also leave a message naming the thing that is wrong in cvm_last_error() (per thread).
 */
#ifndef CVM_H
#define CVM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define CVM_UUID_BYTES 16
#define CVM_UUID_STR 37          /* 36 characters and the NUL */
#define CVM_NAME_MAX 63          /* volume name characters */
#define CVM_PATH_KEEP 256        /* bytes kept of a LUN's last known path */
#define CVM_MAX_LUNS 256
#define CVM_MAX_SETS 64

#define CVM_META_BYTES (1u << 20)              /* metadata area at the start of every LUN */
#define CVM_MIN_DATA_BYTES (16u << 20)         /* a LUN must offer at least this much data */
#define CVM_MIN_LUN_BYTES (CVM_META_BYTES + CVM_MIN_DATA_BYTES)
#define CVM_DEFAULT_STRIPE_WIDTH (256u << 10)
#define CVM_MIN_STRIPE_WIDTH (4u << 10)
#define CVM_MAX_STRIPE_WIDTH (64u << 20)
#define CVM_IO_ALIGN 512u                      /* offsets, lengths and buffers of volume I/O */

typedef struct {
	uint8_t b[CVM_UUID_BYTES];
} cvm_uuid;

struct cvm_stripe_set {
	uint64_t stripe_width; /* bytes, a power of two multiple of 4 KiB */
	uint64_t lun_bytes;    /* data bytes each LUN of the set gives, a multiple of the width */
	uint32_t first_lun;    /* index into cvm_config.luns */
	uint32_t nluns;
};

struct cvm_lun_ref {
	cvm_uuid uuid;
	uint64_t size_bytes;          /* whole LUN size when it was labelled */
	char path[CVM_PATH_KEEP];     /* last known path, for messages only */
};

/* A restripe under way (docs/restripe.md): the stripe sets [first_set, first_set +
 * set_count) (all of them, or those of the LUNs `cvm restripe --luns` chose) move to one
 * stripe set of target_width over their LUNs, each giving target_lun_bytes; the other sets
 * stay as they are.  Until it is done, the sets above still describe where the chunks not
 * yet moved are. */
struct cvm_restripe {
	uint64_t target_width; /* 0: no restripe under way */
	uint64_t target_lun_bytes;
	uint32_t first_set, set_count;
	uint64_t moves_done;   /* the planner's moves whose destinations are durable */
	uint32_t staged;       /* the moves after those whose sources are staged in scratch */
	uint32_t half;         /* the scratch half holding them */
};

struct cvm_config {
	uint64_t generation;
	cvm_uuid vol_uuid;
	char name[CVM_NAME_MAX + 1];
	uint64_t ctime, mtime;
	uint32_t nsets, nluns;
	struct cvm_stripe_set sets[CVM_MAX_SETS];
	struct cvm_lun_ref luns[CVM_MAX_LUNS];
	struct cvm_restripe restripe;
};

/* ---- messages, uuids, sizes, checksums ---- */
const char *cvm_last_error(void);
void cvm_uuid_generate(cvm_uuid *u);
void cvm_uuid_format(const cvm_uuid *u, char out[CVM_UUID_STR]);
int cvm_uuid_parse(const char *s, cvm_uuid *u);
bool cvm_uuid_equal(const cvm_uuid *a, const cvm_uuid *b);
bool cvm_uuid_is_zero(const cvm_uuid *u);
/* "256k", "1M", "4096", "2G", "1T": powers of 1024.  -EINVAL on anything else. */
int cvm_parse_size(const char *s, uint64_t *out);
/* "1.5 GiB" style, for people. */
void cvm_format_size(uint64_t bytes, char *out, size_t outlen);
uint32_t cvm_crc32c(uint32_t crc, const void *data, size_t len);

/* ---- layout: config -> sizes and address mapping ---- */
uint64_t cvm_config_size(const struct cvm_config *cfg);
/* "one stripe set of width 256.0 KiB over 4 LUNs", or "2 stripe sets: width 256.0 KiB over
 * 2 LUNs, width 64.0 KiB over 4 LUNs"; returns buf. */
const char *cvm_describe_sets(const struct cvm_config *cfg, char *buf, size_t len);
int cvm_config_validate(const struct cvm_config *cfg);
int cvm_check_stripe_width(uint64_t width);
int cvm_check_name(const char *name);

/* One contiguous piece of a volume range on one LUN. */
struct cvm_piece {
	uint32_t lun;        /* index into cvm_config.luns */
	uint64_t lun_offset; /* byte offset in the LUN's data area (add CVM_META_BYTES for the device) */
	uint64_t dev_offset; /* byte offset on the LUN device: where to read or write it */
	uint64_t len;
	uint64_t buf_offset; /* where the piece starts in the caller's buffer */
};

struct cvm_map_iter {
	const struct cvm_config *cfg;
	uint64_t pos, end;     /* volume offsets still to map */
	uint64_t start;        /* volume offset of the first byte mapped */
	uint32_t set;          /* stripe set holding pos */
	uint64_t set_start;    /* volume offset where that set begins */
};

/* Map [offset, offset+len) onto LUN pieces split at stripe boundaries, in volume order.
 * -ERANGE if the range does not lie inside the volume. */
int cvm_map_begin(struct cvm_map_iter *it, const struct cvm_config *cfg, uint64_t offset,
		  uint64_t len);
bool cvm_map_next(struct cvm_map_iter *it, struct cvm_piece *piece);

/* ---- discovery ---- */
enum cvm_lun_state {
	CVM_LUN_OK,             /* label and at least one config copy valid */
	CVM_LUN_LABEL_DAMAGED,  /* label unreadable, identity known from a config copy */
	CVM_LUN_PREPARED,       /* labelled, but no config lists it: an interrupted create/grow */
	CVM_LUN_NO_CONFIG,      /* labelled member whose config copies are both damaged */
};

struct cvm_found_lun {
	char *path;
	char **alt_paths; /* other paths to the same LUN (multipath, links) */
	size_t nalt;
	uint64_t size_bytes;
	enum cvm_lun_state state;
	cvm_uuid lun_uuid, vol_uuid;
	char vol_name[CVM_NAME_MAX + 1];
	uint64_t label_generation;
	uint64_t slot_generation[2]; /* 0 where the copy is absent or damaged */
	struct cvm_config *config;   /* highest valid copy on this LUN, or NULL */
};

struct cvm_scan {
	struct cvm_found_lun *luns;
	size_t nluns;
};

/* Read the labels of the LUNs found under the given paths: directories (their entries), globs,
 * or single files and block devices.  Paths that lead to one LUN count once. */
int cvm_scan_paths(const char *const *paths, size_t npaths, struct cvm_scan *out);
void cvm_scan_free(struct cvm_scan *scan);
/* The winning (highest generation) config of the volume called name (or with that uuid),
 * copied into *cfg.  -ENOENT if no LUN on the scan carries it, -ENOTUNIQ if two volumes do. */
int cvm_scan_find_volume(const struct cvm_scan *scan, const char *name_or_uuid,
			 struct cvm_config *cfg);
/* The scanned LUN with this uuid, or NULL. */
const struct cvm_found_lun *cvm_scan_lun(const struct cvm_scan *scan, const cvm_uuid *uuid);
/* The scanned LUN at path (any path to the same file or device), or NULL. */
const struct cvm_found_lun *cvm_scan_lun_at(const struct cvm_scan *scan, const char *path);

/* ---- volumes ---- */
struct cvm_volume;

/* RDWR also brings config copies an interrupted change left stale up to date; DATA opens the
 * LUNs for reading and writing data only (ODM clients: volume metadata is not theirs). */
enum { CVM_OPEN_RDONLY = 0, CVM_OPEN_RDWR = 1, CVM_OPEN_DATA = 2 };
/* Or'ed in: another node may be running a restripe, in the middle of a batch: open the
 * volume all the same.  The caller reads chunk 0 (which no restripe moves) at most, then
 * follows that restripe (cvm_volume_restripe_follow) or, if none runs, checks that the
 * config has no batch staged. */
#define CVM_OPEN_JOIN 0x100

/* -EBUSY (with a message saying what to run) if cfg records a restripe batch left staged:
 * some chunks are only in scratch, and the volume is not to be used until it is finished. */
int cvm_config_staged_check(const struct cvm_config *cfg);
/* Assemble a volume from scanned LUNs.  With CVM_OPEN_RDWR, config copies left stale by an
 * interrupted change are brought to the winning generation. */
int cvm_volume_open(const struct cvm_scan *scan, const char *name_or_uuid, int flags,
		    struct cvm_volume **out);
void cvm_volume_close(struct cvm_volume *vol);
const struct cvm_config *cvm_volume_config(const struct cvm_volume *vol);

/* The LUN pieces of a volume range as the volume lies now: by its layout, or, while a
 * restripe is paused, each chunk where the restripe has left it (moved, parked, not yet
 * moved).  Every user of a volume maps through this. */
struct cvm_volume_map_iter {
	const struct cvm_volume *vol;
	struct cvm_map_iter layout; /* without a restripe */
	uint64_t pos, end, start;
};
int cvm_volume_map_begin(struct cvm_volume_map_iter *it, const struct cvm_volume *vol,
			 uint64_t offset, uint64_t len);
bool cvm_volume_map_next(struct cvm_volume_map_iter *it, struct cvm_piece *piece);
uint64_t cvm_volume_size(const struct cvm_volume *vol);
const char *cvm_volume_lun_path(const struct cvm_volume *vol, uint32_t lun);
/* The O_DIRECT descriptor of a LUN, for callers that submit mapped pieces themselves. */
int cvm_volume_lun_fd(const struct cvm_volume *vol, uint32_t lun);

/* Synchronous I/O; offset, len and buf aligned to CVM_IO_ALIGN.  0 or -errno. */
int cvm_volume_read(struct cvm_volume *vol, void *buf, uint64_t len, uint64_t offset);
int cvm_volume_write(struct cvm_volume *vol, const void *buf, uint64_t len, uint64_t offset);
/* Make completed writes durable on every LUN. */
int cvm_volume_flush(struct cvm_volume *vol);
/* Flushes done so far (each an fdatasync of every LUN written since the one before, shared
 * by the callers that arrived while the one before it ran). */
uint64_t cvm_volume_flushes(struct cvm_volume *vol);
/* A write the caller submitted itself to a LUN's descriptor is done: the next flush covers
 * that LUN. */
void cvm_volume_written(struct cvm_volume *vol, uint32_t lun);
/* A failed I/O on a LUN (what: "read", "write" or "flush"; the byte offset on the LUN device):
 * counted per LUN and logged, at most 10 lines per 10 s a volume, the lines left out counted
 * in the next.  cvm's own synchronous I/O, flushes and asynchronous I/O call it; so do callers
 * that submit mapped pieces themselves, by descriptor.  log: where the lines go (default
 * standard error, "cvm: " before each); it may be called from any thread. */
typedef void (*cvm_log_fn)(void *arg, const char *line);
void cvm_volume_set_log(struct cvm_volume *vol, cvm_log_fn log, void *arg);
void cvm_volume_io_failed(struct cvm_volume *vol, uint32_t lun, const char *what,
			  uint64_t dev_offset, uint64_t len, int err);
void cvm_volume_io_failed_fd(struct cvm_volume *vol, int fd, const char *what,
			     uint64_t dev_offset, uint64_t len, int err);
/* Failed I/O on a LUN since the volume was opened (or counted on from the handle before it:
 * inherit, for the same LUNs in a handle opened after a grow). */
uint64_t cvm_volume_lun_errors(const struct cvm_volume *vol, uint32_t lun);
void cvm_volume_inherit_errors(struct cvm_volume *to, const struct cvm_volume *from);
/* n more failures of the LUN (by uuid) that another handle had (an ODM client's, as cfsd hears
 * of them): its index in *index; -ENOENT if it is none of this volume's. */
int cvm_volume_count_errors(struct cvm_volume *vol, const cvm_uuid *lun, uint64_t n,
			    uint32_t *index);
/* Self-fencing (a cluster node that lost quorum): from now on every read, write, flush and
 * asynchronous submission of this volume fails with -EIO without reaching the LUNs.  I/O
 * already in the kernel still completes.  There is no way back: the volume is closed. */
void cvm_volume_fence(struct cvm_volume *vol);
bool cvm_volume_fenced(const struct cvm_volume *vol);
/* A cluster node's writes wait for leave: gate(arg) runs before every write and every
 * asynchronous submission reaches the LUNs, and a non-zero answer (-errno) fails it there.
 * cfs uses it for its membership lease (cfs/fence.c). */
typedef int (*cvm_write_gate_fn)(void *arg);
void cvm_volume_set_write_gate(struct cvm_volume *vol, cvm_write_gate_fn gate, void *arg);
/* The gate's answer now (0 without one), for callers that submit to LUN descriptors. */
int cvm_volume_may_write(struct cvm_volume *vol);

struct cvm_create_opts {
	uint64_t stripe_width; /* 0: CVM_DEFAULT_STRIPE_WIDTH */
};

/* Label the LUNs and write the first config.  scan holds what is already on the machine, so a
 * name in use or a LUN that belongs to another volume is refused.  Nothing is written unless
 * every check passes. */
int cvm_volume_create(const struct cvm_scan *scan, const char *name, const char *const *paths,
		      size_t npaths, const struct cvm_create_opts *opts, struct cvm_config *out);
/* Append a stripe set made of the given LUNs (opts->stripe_width 0: the last set's width). */
int cvm_volume_grow(const struct cvm_scan *scan, const char *name_or_uuid,
		    const char *const *paths, size_t npaths, const struct cvm_create_opts *opts,
		    struct cvm_config *out);
/* Wipe labels and config copies.  Without force, a volume that is incomplete, in use, or whose
 * first block holds data is refused. */
int cvm_volume_remove(const struct cvm_scan *scan, const char *name_or_uuid, bool force);

/* ---- restripe (docs/restripe.md) ---- */
struct cvm_restripe_progress {
	uint64_t moves_done, moves_total; /* of the whole restripe */
	uint64_t chunk_bytes;             /* each move moves one chunk */
	uint64_t moved_bytes;             /* by this run */
	double seconds;                   /* of this run */
	/* Online: this node's synchronous I/O that met a batch in motion and waited for it, the
	 * longest such wait, and asynchronous requests held back until their batch moved. */
	uint64_t io_waits, io_wait_max_ns, io_held;
};

struct cvm_restripe_opts {
	uint64_t stripe_width;     /* 0: the width of the restripe under way, else the first set's */
	/* The LUNs whose stripe sets become one set (whole, adjacent sets); none: every LUN, or
	 * those of the restripe under way. */
	const cvm_uuid *luns;
	uint32_t nluns;
	uint64_t rate_bytes;       /* at most this many bytes moved a second; 0: no limit */
	const volatile int *stop;  /* set (by a signal handler) to pause after the batch in hand */
	void (*progress)(void *arg, const struct cvm_restripe_progress *p); /* after each batch */
	/* Online: hold (true) and let go again the caller's own I/O on the volume, while its
	 * mapping switches to the restripe's; NULL if the caller has none in flight. */
	void (*hold_io)(void *arg, bool hold);
	/* Online on a cluster: before a batch of moves [first, first + n) reads or writes
	 * anything, keep every other node's I/O out of its chunks (an error ends the run); and
	 * when it is over (rc: 0 done, else how it failed), let them in again. */
	int (*batch_begin)(void *arg, uint64_t first, uint32_t n);
	void (*batch_end)(void *arg, uint64_t first, uint32_t n, int rc);
	void *arg;
};

/* Turn the volume (or the stripe sets of opts->luns) into one stripe set over its LUNs, or
 * go on with the restripe under way.  Offline: no process may use the volume meanwhile (on
 * this node that is checked).  Crash-safe at every write: run it again to go on.  -EINTR
 * when stop paused it (it is resumable the same way); -EALREADY if it is one such set
 * already; -ENOSPC if the LUNs cannot hold it as one set; -EINVAL if opts->luns are not
 * whole, adjacent sets of the volume.  *out: the config as it ends. */
int cvm_volume_restripe(const struct cvm_scan *scan, const char *name_or_uuid,
			const struct cvm_restripe_opts *opts, struct cvm_config *out);
/* The same on vol, opened CVM_OPEN_RDWR, whose config is now `now` (a scan's: a paused
 * restripe's progress is not in vol's), while this node's processes use the volume: those
 * that open it from now on, and vol itself, keep out of the batch in motion (the restripe
 * gate, docs/restripe.md).  Whoever holds vol must have no I/O of vol in flight when it is
 * called (the first mapping changes).  On return vol maps as the volume lies then. */
int cvm_volume_restripe_online(struct cvm_volume *vol, const struct cvm_config *now,
			       const struct cvm_restripe_opts *opts, struct cvm_config *out);
/* A node where another node runs the restripe under way in `now` (vol's volume, opened
 * CVM_OPEN_RDWR, as for cvm_volume_restripe_online): this node's processes that open the
 * volume from now on, and vol, keep out of the batch it closes (a gate of this node's, made
 * here).  A batch staged (its restriper died in it) stays closed until a run finishes it. */
struct cvm_restripe_follower;
int cvm_volume_restripe_follow(struct cvm_volume *vol, const struct cvm_config *now,
			       const struct cvm_restripe_opts *opts,
			       struct cvm_restripe_follower **out);
/* The first move not yet done as this node knows. */
uint64_t cvm_restripe_follow_position(const struct cvm_restripe_follower *f);
/* The moves of the batch the gate keeps this node's users out of (0: none). */
uint32_t cvm_restripe_follow_closed(const struct cvm_restripe_follower *f);
/* The restriper's next batch starts at move first (this node's position, else -ESTALE):
 * keep this node's I/O out of its chunks, waiting for what is in flight there; *next: the
 * batch after it. */
int cvm_restripe_follow_close(struct cvm_restripe_follower *f, uint64_t first, uint64_t *next);
/* The closed batch is over: done (its chunks in their new places), or not (where they were). */
int cvm_restripe_follow_open(struct cvm_restripe_follower *f, bool done);
/* While a dead node's journal is replayed here (nothing can move the closed batch before its
 * recovery is done): let this node's I/O into the closed batch, and keep it out again. */
void cvm_restripe_follow_pause(struct cvm_restripe_follower *f);
void cvm_restripe_follow_unpause(struct cvm_restripe_follower *f);
/* The restriper died with the closed batch staged (now: the config saying so), and this node
 * alone recovers it: copy the batch to its place from scratch, record it done, open it. */
int cvm_restripe_follow_finish(struct cvm_restripe_follower *f, const struct cvm_config *now);
/* This process runs the restripe from now on (its restriper died): the follower goes, and
 * cvm_volume_restripe_online on vol takes its gate over, a closed batch still closed. */
void cvm_restripe_follow_hand_over(struct cvm_restripe_follower *f);
/* The restripe ended (or this node goes): vol keeps mapping as the volume lies now; a batch
 * still closed stays closed (its I/O fails: EIO) until a new run here. */
void cvm_restripe_follow_end(struct cvm_restripe_follower *f);
/* I/O of volume bytes [offset, offset+len) that the caller maps and submits itself
 * (cvm_volume_map_begin): enter before mapping, leave when the I/O is done.  Without a
 * restripe running on this node both do nothing.  enter: 0; -EBUSY if a restripe is moving
 * that range now (without wait; come back); -EIO if the restripe's process died meanwhile. */
int cvm_volume_enter(struct cvm_volume *vol, uint64_t offset, uint64_t len, bool wait);
void cvm_volume_leave(struct cvm_volume *vol, uint64_t offset, uint64_t len);
/* What cvm_volume_restripe would refuse of opts on a volume whose config is cfg (-EALREADY
 * included), with its message, before anything is written. */
int cvm_restripe_check(const struct cvm_config *cfg, const struct cvm_restripe_opts *opts);
/* "stripe sets 1-2" or "stripe set 1", for messages. */
void cvm_restripe_name_sets(uint32_t first, uint32_t count, char *buf, size_t len);
/* How many moves the restripe under way in cfg takes in all, and of how many bytes each. */
int cvm_restripe_count(const struct cvm_config *cfg, uint64_t *moves, uint64_t *chunk_bytes);

/* ---- check ---- */
struct cvm_check_report {
	unsigned problems;  /* found */
	unsigned repaired;  /* fixed (with repair) */
};
typedef void (*cvm_check_print_fn)(void *arg, const char *line);
int cvm_volume_check(const struct cvm_scan *scan, const char *name_or_uuid, bool repair,
		     cvm_check_print_fn print, void *arg, struct cvm_check_report *report);

/* ---- asynchronous I/O with libaio ---- */
enum cvm_op { CVM_READ, CVM_WRITE };
struct cvm_aio;
/* result: len on success, -errno on failure (the first failed piece's error). */
typedef void (*cvm_aio_done_fn)(void *arg, int64_t result);

/* depth: requests in flight at most.  -EAGAIN with cvm_last_error() naming fs.aio-max-nr
 * when the machine has no asynchronous I/O context left. */
int cvm_aio_create(struct cvm_volume *vol, unsigned depth, struct cvm_aio **out);
void cvm_aio_destroy(struct cvm_aio *aio);
/* Queue one request; -EAGAIN when depth requests are in flight (reap some first). */
int cvm_aio_submit(struct cvm_aio *aio, enum cvm_op op, void *buf, uint64_t len,
		   uint64_t offset, cvm_aio_done_fn done, void *arg);
/* Wait for at least min completions (or timeout, NULL = forever), run their callbacks,
 * return how many requests completed. */
int cvm_aio_poll(struct cvm_aio *aio, unsigned min, const struct timespec *timeout);
unsigned cvm_aio_inflight(const struct cvm_aio *aio);
/* The size of the kernel context now taking new pieces: it starts small and doubles, up to
 * depth x the pieces of a request, while pieces wait for room. */
unsigned cvm_aio_context_events(const struct cvm_aio *aio);

#endif
