/* SPDX-License-Identifier: MIT */
/*
 * Shared memory for cross-process pools: an anonymous sealed memfd
 * passed over a Unix socket (for peers you do not trust: none of them
 * can resize it), or a named POSIX shared memory object (for peers you
 * trust as yourself: any process of your uid can truncate it).
 */
#ifndef ASYNCPOOL_SHM_H
#define ASYNCPOOL_SHM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

struct asyncpool_shm {
	void  *base;
	size_t size;
	int    fd;
};

#define ASYNCPOOL_SHM_HUGE_PREFER  (1u << 0)

/*
 * Flags of the _flags variants of the open functions.  Each accepts a
 * risk that the plain function refuses with -EPERM; see
 * asyncpool_shm_open_fd_flags(3).
 */
/* named: an object that another uid owns, or that group or others can write */
#define ASYNCPOOL_SHM_OPEN_OTHER_WRITERS (1u << 0)
/* fd: a file not sealed against shrinking (a file on disk, an unsealed memfd) */
#define ASYNCPOOL_SHM_OPEN_UNSEALED      (1u << 1)

int  asyncpool_shm_create(size_t size, uint32_t flags, struct asyncpool_shm *out);
int  asyncpool_shm_open_fd(int fd, struct asyncpool_shm *out);
int  asyncpool_shm_create_named(const char *name, size_t size, mode_t mode,
				struct asyncpool_shm *out);
int  asyncpool_shm_open_named(const char *name, struct asyncpool_shm *out);
int  asyncpool_shm_unlink_named(const char *name);
void asyncpool_shm_close(struct asyncpool_shm *shm);
int  asyncpool_shm_open_fd_flags(int fd, uint32_t flags, struct asyncpool_shm *out);
int  asyncpool_shm_open_named_flags(const char *name, uint32_t flags,
				    struct asyncpool_shm *out);
int  asyncpool_shm_send_fd(int sock, int fd);
int  asyncpool_shm_recv_fd(int sock, int *fd_out);

#ifdef __cplusplus
}
#endif

#endif /* ASYNCPOOL_SHM_H */
