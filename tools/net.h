/* SPDX-License-Identifier: MIT */
/* TCP over loopback, for the io_uring demo and the io_uring tests. */
#ifndef ASYNCPOOL_TOOLS_NET_H
#define ASYNCPOOL_TOOLS_NET_H

/*
 * A connected TCP pair over 127.0.0.1: *tx the connected end (TCP_NODELAY),
 * *rx the accepted one.  0, or -errno with both set to -1.
 */
int tcp_loopback_pair(int *tx, int *rx);

#endif
