/* SPDX-License-Identifier: MIT */
/* Pages pinned for I/O, for the io_uring demo and the io_uring tests. */
#ifndef ASYNCPOOL_TOOLS_VM_PIN_H
#define ASYNCPOOL_TOOLS_VM_PIN_H

/* VmPin of this process in KiB (from /proc/self/status), or -1. */
long vm_pin_kib(void);

#endif
