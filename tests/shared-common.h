/* SPDX-License-Identifier: MIT */
/*
 * Helpers of the shared-pool tests: spawning tests/shared-peer with one
 * end of a Unix socketpair, whole reads and writes.
 */
#ifndef ASYNCPOOL_SHARED_COMMON_H
#define ASYNCPOOL_SHARED_COMMON_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

/* One request to a peer in "serve" mode, and its answer. */
enum peer_op {
	OP_ACQUIRE = 1, /* -> rc, index */
	OP_RELEASE,     /* arg: index of a lease this peer holds -> rc */
	OP_RELEASE_INDEX, /* arg: index -> rc of asyncpool_release_index */
	OP_ADOPT,       /* arg: index -> rc of asyncpool_lease_adopt */
	OP_AVAILABLE,   /* -> value */
	OP_READ,        /* arg: index -> the first 8 bytes of the buffer */
	OP_WRITE,       /* arg: index, value: written to the first 8 bytes */
	OP_CHECK,       /* -> rc of asyncpool_check */
	OP_QUIT,
	OP_ADOPT_TOKEN, /* value: token -> rc, index, value: the adopted lease's token */
	OP_RELEASE_TOKEN, /* value: token -> rc of asyncpool_release_token */
	OP_CACHE,       /* index: cache size -> rc of asyncpool_set_cache */
};

struct peer_req {
	int32_t  op;
	uint32_t index;
	uint64_t value;
};

struct peer_rep {
	int32_t  rc;
	uint32_t index;
	uint64_t value;
};

static inline int io_full(int fd, void *buf, size_t len, bool wr)
{
	char *p = buf;

	while (len) {
		ssize_t n = wr ? write(fd, p, len) : read(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static inline int read_full(int fd, void *buf, size_t len)
{
	return io_full(fd, buf, len, false);
}

static inline int write_full(int fd, const void *buf, size_t len)
{
	return io_full(fd, (void *)buf, len, true);
}

/* The path of the helper program. */
static inline const char *peer_path(void)
{
	static char path[PATH_MAX];
	const char *top = getenv("top_builddir");

	snprintf(path, sizeof(path), "%s/tests/shared-peer", top ? top : ".");
	return path;
}

/* Start tests/shared-peer MODE [ARG] with a socket to it in *sock. */
static inline pid_t spawn_peer(int *sock, const char *mode, const char *arg)
{
	int sv[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -1;
	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	if (pid == 0) {
		char num[16];
		int s = fcntl(sv[1], F_DUPFD, 10);  /* without FD_CLOEXEC */

		snprintf(num, sizeof(num), "%d", s);
		execl(peer_path(), "shared-peer", num, mode, arg, (char *)NULL);
		_exit(127);
	}
	close(sv[1]);
	*sock = sv[0];
	return pid;
}

/* The exit status of pid, or 128 + signal. */
static inline int wait_peer(pid_t pid)
{
	int st;

	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return WEXITSTATUS(st);
}

/* A request to a "serve" peer; the answer's rc, or -EPIPE if it is gone. */
static inline int peer_call(int sock, int op, uint32_t index, uint64_t value,
			    struct peer_rep *rep)
{
	struct peer_req q = { .op = op, .index = index, .value = value };
	struct peer_rep r;

	if (write_full(sock, &q, sizeof(q)) || read_full(sock, &r, sizeof(r)))
		return -EPIPE;
	if (rep)
		*rep = r;
	return r.rc;
}

#endif /* ASYNCPOOL_SHARED_COMMON_H */
