/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net.h"

int tcp_loopback_pair(int *tx, int *rx)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	int l, rc = 0, one = 1;

	*tx = *rx = -1;
	l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (l < 0)
		return -errno;
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 1) ||
	    getsockname(l, (struct sockaddr *)&a, &len))
		rc = -errno;
	if (!rc) {
		*tx = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (*tx < 0 || connect(*tx, (struct sockaddr *)&a, sizeof(a)))
			rc = -errno;
	}
	if (!rc && (*rx = accept4(l, NULL, NULL, SOCK_CLOEXEC)) < 0)
		rc = -errno;
	close(l);
	if (rc) {
		if (*tx >= 0)
			close(*tx);
		*tx = *rx = -1;
		return rc;
	}
	/* Small writes go out at once: the tests wait on what they send. */
	setsockopt(*tx, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return 0;
}
