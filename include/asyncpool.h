/* SPDX-License-Identifier: MIT */
/*
 * libasyncpool: registered memory and lock-free buffer pools for
 * zero-copy asynchronous I/O on io_uring.
 *
 * The umbrella header: include this one.  Link with -lasyncpool
 * (pkg-config --cflags --libs libasyncpool).
 */
#ifndef ASYNCPOOL_H
#define ASYNCPOOL_H

#include <asyncpool/version.h>
#include <asyncpool/slab.h>
#include <asyncpool/proactor.h>
#include <asyncpool/region.h>
#include <asyncpool/span.h>
#include <asyncpool/pool.h>
#include <asyncpool/shm.h>
#include <asyncpool/shared.h>
#include <asyncpool/channel.h>
#include <asyncpool/zerocopy.h>
#include <asyncpool/xdp.h>

#endif /* ASYNCPOOL_H */
