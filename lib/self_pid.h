/* SPDX-License-Identifier: MIT */
/*
 * self_pid.c: the calling process's pid, without a system call once
 * known (glibc's getpid() is one since 2.25), and right in every child.
 */
#ifndef ASYNCPOOL_SELF_PID_H
#define ASYNCPOOL_SELF_PID_H

#include <sys/types.h>

pid_t ap_self_pid(void);

#endif /* ASYNCPOOL_SELF_PID_H */
