/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "uring-util.h"

void ut_ring_init(struct io_uring *ring, unsigned entries)
{
	int rc = io_uring_queue_init(entries, ring, 0);

	if (rc == -EPERM || rc == -ENOSYS)
		skip_all("io_uring is refused here: io_uring_queue_init: %s", strerror(-rc));
	if (rc)
		bail_out("io_uring_queue_init: %s", strerror(-rc));
}

struct io_uring_cqe *ut_wait(struct io_uring *ring)
{
	struct io_uring_cqe *cqe;
	int rc;

	do
		rc = io_uring_submit_and_wait(ring, 1);
	while (rc == -EINTR);
	if (rc < 0)
		bail_out("io_uring_submit_and_wait: %s", strerror(-rc));
	do
		rc = io_uring_wait_cqe(ring, &cqe);
	while (rc == -EINTR);
	if (rc)
		bail_out("io_uring_wait_cqe: %s", strerror(-rc));
	return cqe;
}

int ut_write_fixed(struct io_uring *ring, int fd, void *buf, unsigned len, off_t off, int idx)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
	struct io_uring_cqe *cqe;
	int res;

	io_uring_prep_write_fixed(sqe, fd, buf, len, off, idx);
	cqe = ut_wait(ring);
	res = cqe->res;
	io_uring_cqe_seen(ring, cqe);
	return res;
}

int ut_recv_data(struct asyncpool_region *r, const struct io_uring_cqe *cqe,
		 struct asyncpool_lease *l, size_t *got, unsigned *bad)
{
	const unsigned char *d;
	int rc;

	if (cqe->res == -ENOBUFS)
		return 0;
	if (cqe->res <= 0) {
		diag("recv completion: %d", cqe->res);
		(*bad)++;
		return -1;
	}
	rc = asyncpool_region_recv_lease(r, cqe, l);
	if (rc) {
		diag("recv_lease: %s", strerror(-rc));
		(*bad)++;
		return -1;
	}
	d = asyncpool_span_ptr(l->span);
	for (size_t j = 0; j < l->span.length; j++)
		if (d[j] != ut_pattern(*got + j))
			(*bad)++;
	*got += l->span.length;
	return 1;
}

void ut_arm_recv(struct io_uring *ring, int fd, int group, uint64_t user_data)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

	io_uring_prep_recv_multishot(sqe, fd, NULL, 0, 0);
	sqe->flags |= IOSQE_BUFFER_SELECT;
	sqe->buf_group = (uint16_t)group;
	sqe->user_data = user_data;
	io_uring_submit(ring);
}

static void *sender(void *arg)
{
	struct ut_sender *s = arg;
	unsigned char buf[3000];
	size_t pos = 0;

	while (pos < s->total) {
		size_t n = s->total - pos < sizeof(buf) ? s->total - pos : sizeof(buf);
		ssize_t w;

		for (size_t j = 0; j < n; j++)
			buf[j] = ut_pattern(pos + j);
		w = send(s->fd, buf, n, MSG_NOSIGNAL);
		if (w <= 0)
			break;
		pos += (size_t)w;
	}
	return NULL;
}

void ut_sender_start(struct ut_sender *s, int fd, size_t total)
{
	s->fd = fd;
	s->total = total;
	if (pthread_create(&s->thread, NULL, sender, s))
		bail_out("pthread_create");
}

void ut_sender_join(struct ut_sender *s)
{
	pthread_join(s->thread, NULL);
}

static void *releaser(void *arg)
{
	struct ut_releaser *rel = arg;

	pthread_mutex_lock(&rel->lock);
	for (;;) {
		struct asyncpool_lease l;

		while (!rel->count && !rel->stop)
			pthread_cond_wait(&rel->cond, &rel->lock);
		if (!rel->count)
			break;
		l = rel->q[rel->head];
		pthread_mutex_unlock(&rel->lock);
		rel->release(&l);
		pthread_mutex_lock(&rel->lock);
		rel->head = (rel->head + 1) % UT_RELEASER_MAX;
		rel->count--;
		pthread_cond_broadcast(&rel->cond);
	}
	pthread_mutex_unlock(&rel->lock);
	return NULL;
}

void ut_releaser_start(struct ut_releaser *rel, void (*release)(struct asyncpool_lease *l))
{
	memset(rel, 0, sizeof(*rel));
	pthread_mutex_init(&rel->lock, NULL);
	pthread_cond_init(&rel->cond, NULL);
	rel->release = release;
	if (pthread_create(&rel->thread, NULL, releaser, rel))
		bail_out("pthread_create");
}

void ut_hand_over(struct ut_releaser *rel, const struct asyncpool_lease *l)
{
	pthread_mutex_lock(&rel->lock);
	if (rel->count == UT_RELEASER_MAX)
		bail_out("more than %d leases handed over", UT_RELEASER_MAX);
	rel->q[(rel->head + rel->count) % UT_RELEASER_MAX] = *l;
	rel->count++;
	pthread_cond_broadcast(&rel->cond);
	pthread_mutex_unlock(&rel->lock);
}

void ut_wait_released(struct ut_releaser *rel)
{
	pthread_mutex_lock(&rel->lock);
	while (rel->count)
		pthread_cond_wait(&rel->cond, &rel->lock);
	pthread_mutex_unlock(&rel->lock);
}

void ut_releaser_stop(struct ut_releaser *rel)
{
	pthread_mutex_lock(&rel->lock);
	rel->stop = true;
	pthread_cond_broadcast(&rel->cond);
	pthread_mutex_unlock(&rel->lock);
	pthread_join(rel->thread, NULL);
	pthread_cond_destroy(&rel->cond);
	pthread_mutex_destroy(&rel->lock);
}
