/* SPDX-License-Identifier: MIT */
/* Seccomp filters that refuse io_uring, as container runtimes do. */
#ifndef ASYNCPOOL_TEST_SECCOMP_URING_H
#define ASYNCPOOL_TEST_SECCOMP_URING_H

/*
 * From now on, in this process and its children: io_uring_setup,
 * io_uring_enter and io_uring_register answer EPERM, as Docker's default
 * profile does (moby #46762); a system call of another architecture kills
 * the process, as a real profile's architecture check does.  0, or
 * -errno: -EOPNOTSUPP on an architecture the filter does not know, else
 * what prctl(2) or seccomp(2) answered.
 */
int seccomp_refuse_uring(void);

/* From now on, system call nr answers err; everything else is allowed.  0 or -errno. */
int seccomp_deny(int nr, int err);

#endif
