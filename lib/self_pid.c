/* SPDX-License-Identifier: MIT */
/*
 * The calling process's pid for the checks "is this object still ours
 * after fork(2)?" that a call makes every time (pool_recv.c, the io_uring
 * proactor's ur_foreign(), the socket backend's zc_forked()): glibc's
 * getpid() is a system call since 2.25, which dropped its cache because
 * a child made by clone(2) found the parent's pid there.
 *
 * The pid is kept on a page of its own marked MADV_WIPEONFORK (Linux
 * 4.14): the kernel zeroes it in every child that does not share our
 * memory (fork(2), _Fork, clone(2) without CLONE_VM), whether or not the
 * C library runs its fork handlers, so the child's first call asks
 * getpid() again.  A child that shares our memory (vfork(2), CLONE_VM)
 * shares the page and reads our pid: such a child may only exec or
 * _exit.  Without the page (an older kernel: madvise says EINVAL; no
 * memory) every call asks getpid().
 */
#include "internal.h"
#include "self_pid.h"

#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_WIPEONFORK
#define MADV_WIPEONFORK 18
#endif

static pthread_once_t pid_once = PTHREAD_ONCE_INIT;
static _Atomic pid_t *pid_page;         /* NULL: no page, ask each time */

static void pid_setup(void)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t len = page > 0 ? (size_t)page : 4096;
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return;
	if (madvise(p, len, MADV_WIPEONFORK)) {
		munmap(p, len);
		return;
	}
	pid_page = p;
}

pid_t ap_self_pid(void)
{
	pid_t pid;

	pthread_once(&pid_once, pid_setup);
	if (!pid_page)
		return getpid();
	/* Threads that race here store the same value. */
	pid = atomic_load_explicit(pid_page, memory_order_relaxed);
	if (pid)
		return pid;
	pid = getpid();
	atomic_store_explicit(pid_page, pid, memory_order_relaxed);
	return pid;
}
