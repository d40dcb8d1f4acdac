/* SPDX-License-Identifier: MIT */
/*
 * The liveness of an attachment (attach.c): its record says LIVE and
 * the OFD lock on byte AP_LOCK_BASE + slot of the pool's file is held.
 * Header-only, so that `asyncpool inspect` decides alive or dead with
 * the library's own test, from a read-only mapping and a read-only
 * descriptor, without attaching.
 */
#ifndef ASYNCPOOL_ATTACH_LIVE_H
#define ASYNCPOOL_ATTACH_LIVE_H

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>

#include "pool_layout.h"

/* fcntl(fd, cmd) on the one byte at: an OFD lock of type (F_OFD_GETLK
 * copies the result to *out); 0 or -errno. */
static inline int ap_lock_byte(int fd, int cmd, short type, uint64_t at, struct flock *out)
{
	struct flock fl;

	memset(&fl, 0, sizeof(fl));
	fl.l_type = type;
	fl.l_whence = SEEK_SET;
	fl.l_start = (off_t)at;
	fl.l_len = 1;
	if (fcntl(fd, cmd, &fl) < 0)
		return -errno;
	if (out)
		*out = fl;
	return 0;
}

/*
 * 1 if the process of attachment a (number slot) is alive, 0 if the
 * record says FREE or DEAD or no write lock is held on its byte (the
 * process died; a read lock is anybody's, asyncpool-shared(7)), or
 * -errno.  fd: any open file description of the pool's file, of any
 * access mode (F_OFD_GETLK only asks), that does not hold that lock
 * itself (a description never conflicts with its own locks); -1 gives
 * -EOPNOTSUPP for a LIVE record.  The record is read first: the lock is
 * taken before it says LIVE and dropped after it stops, so a LIVE
 * record whose lock is free is a dead process.
 */
static inline int ap_attach_live(const struct ap_attach *a, int fd, uint32_t slot)
{
	uint64_t life = atomic_load_explicit((_Atomic uint64_t *)&a->life, memory_order_acquire);
	struct flock fl = { .l_type = F_UNLCK };
	int rc;

	if (AP_ATT_STATE(life) != AP_ATT_LIVE)
		return 0;
	if (fd < 0)
		return -EOPNOTSUPP;
	rc = ap_lock_byte(fd, F_OFD_GETLK, F_WRLCK, AP_LOCK_BASE + slot, &fl);
	if (rc)
		return rc;
	/* Only a write lock is an attachment's: a peer with a read-only
	 * descriptor can take read locks on any byte, and they must not
	 * make a dead holder look alive. */
	return fl.l_type == F_WRLCK;
}

#endif /* ASYNCPOOL_ATTACH_LIVE_H */
