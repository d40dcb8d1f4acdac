/* SPDX-License-Identifier: MIT */
/*
 * uring_features.c: what this kernel's io_uring can do, probed once per
 * process on a scratch ring, less what ASYNCPOOL_URING_DISABLE turns off.
 */
#ifndef ASYNCPOOL_URING_FEATURES_H
#define ASYNCPOOL_URING_FEATURES_H

#include <stdint.h>

/*
 * The ASYNCPOOL_URING_* features of the kernel (the first call probes
 * them), less those named in ASYNCPOOL_URING_DISABLE, read at each call.
 */
uint32_t ap_ur_features(void);

#endif /* ASYNCPOOL_URING_FEATURES_H */
