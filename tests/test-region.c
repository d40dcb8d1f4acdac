/* SPDX-License-Identifier: MIT */
/* The memory proactor, regions and spans. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <asyncpool.h>
#include "tap.h"

static int slab_freed;
static void on_destroy(void *ctx)
{
	slab_freed++;
	free(ctx);
}

static void *unref_thread(void *arg)
{
	asyncpool_region_unref(arg);
	return NULL;
}

int main(void)
{
	struct asyncpool_proactor *p = (void *)1;
	struct asyncpool_region *r = (void *)1, *r2 = NULL;
	struct asyncpool_slab *slab = NULL;
	struct asyncpool_lease lease;
	struct asyncpool_span span;
	void *mem = aligned_alloc(64, 16 * 256);
	pthread_t t;

	is_int(asyncpool_proactor_create_memory(NULL), -EINVAL, "create_memory: NULL out");
	is_int(asyncpool_proactor_create_memory(&p), 0, "create_memory");
	is_int(asyncpool_slab_wrap(mem, 256, 16, on_destroy, mem, &slab), 0, "wrap 16 x 256");

	is_int(asyncpool_proactor_register_slab(NULL, slab, ASYNCPOOL_ACCESS_READ, &r), -EINVAL,
	       "register: NULL proactor");
	ok(r == NULL, "register: out is NULL after a failure");
	is_int(asyncpool_proactor_register_slab(p, NULL, ASYNCPOOL_ACCESS_READ, &r), -EINVAL,
	       "register: NULL slab");
	is_int(asyncpool_proactor_register_slab(p, slab, 0, &r), -EINVAL, "register: no access");
	is_int(asyncpool_proactor_register_slab(p, slab, 4, &r), -EINVAL, "register: unknown access bit");
	is_int(asyncpool_proactor_register_slab(p, slab, ASYNCPOOL_ACCESS_READ, NULL), -EINVAL,
	       "register: NULL out");

	is_int(asyncpool_proactor_register_slab(p, slab, ASYNCPOOL_ACCESS_READ | ASYNCPOOL_ACCESS_WRITE, &r),
	       0, "register READ|WRITE");
	ok(asyncpool_region_slab(r) == slab, "region_slab");
	ok(asyncpool_region_proactor(r) == p, "region_proactor");
	ok(asyncpool_region_base(r) == mem, "region_base");
	is_int(asyncpool_region_buffer_size(r), 256, "region_buffer_size");
	is_int(asyncpool_region_buffer_count(r), 16, "region_buffer_count");
	is_int(asyncpool_region_access(r), ASYNCPOOL_ACCESS_READ | ASYNCPOOL_ACCESS_WRITE, "region_access");
	is_int(asyncpool_region_fixed_index(r, 0), -EOPNOTSUPP, "memory: no fixed buffers");
	is_int(asyncpool_region_fixed_index(r, 16), -EINVAL, "fixed_index: index out of range");
	is_int(asyncpool_region_fixed_index(NULL, 0), -EINVAL, "fixed_index: NULL region");
	is_int(asyncpool_region_buffer_group(r), -EOPNOTSUPP, "memory: no buffer group");
	is_int(asyncpool_region_buffer_group(NULL), -EINVAL, "buffer_group: NULL region");
	memset(&lease, 0x5a, sizeof(lease));
	is_int(asyncpool_region_recv_lease(r, (const struct io_uring_cqe *)&lease, &lease), -EOPNOTSUPP,
	       "memory: no recv leases");
	ok(lease.release.fn == NULL && lease.span.region == NULL, "recv_lease: out zeroed on failure");
	is_int(asyncpool_region_recv_lease(r, NULL, &lease), -EINVAL, "recv_lease: NULL cqe");
	is_int(asyncpool_region_recv_lease(r, NULL, NULL), -EINVAL, "recv_lease: NULL out");
	ok(asyncpool_region_base(NULL) == NULL && asyncpool_region_buffer_count(NULL) == 0 &&
	   asyncpool_region_buffer_size(NULL) == 0 && asyncpool_region_access(NULL) == 0 &&
	   asyncpool_region_slab(NULL) == NULL && asyncpool_region_proactor(NULL) == NULL,
	   "region accessors of NULL are NULL or zero");

	span = asyncpool_span_make(r, 512, 100);
	ok(asyncpool_span_ptr(span) == (char *)mem + 512, "span_ptr");
	is_int(asyncpool_span_length(span), 100, "span_length");
	ok(!asyncpool_span_empty(span), "span not empty");
	ok(asyncpool_span_empty(asyncpool_span_make(r, 0, 0)), "zero-length span is empty");
	ok(asyncpool_span_ptr(asyncpool_span_make(NULL, 8, 8)) == NULL, "span without region: NULL ptr");

	is_int(asyncpool_proactor_register_slab(p, slab, ASYNCPOOL_ACCESS_WRITE, &r2), 0,
	       "a second region over the same slab");
	asyncpool_slab_unref(slab);
	is_int(slab_freed, 0, "regions hold the slab");
	is_int(asyncpool_proactor_destroy(p), -EBUSY, "destroy with live regions: -EBUSY");
	asyncpool_region_unref(r2);
	is_int(asyncpool_proactor_destroy(p), -EBUSY, "destroy with one live region: -EBUSY");

	ok(asyncpool_region_ref(r) == r, "region_ref returns the region");
	asyncpool_region_unref(r);
	is_int(slab_freed, 0, "one reference left: slab kept");
	pthread_create(&t, NULL, unref_thread, r);
	pthread_join(t, NULL);
	is_int(slab_freed, 1, "last unref from another thread drops the slab");
	ok(asyncpool_region_ref(NULL) == NULL, "region_ref(NULL)");
	asyncpool_region_unref(NULL);
	is_int(asyncpool_proactor_destroy(p), 0, "destroy with no regions");
	is_int(asyncpool_proactor_destroy(NULL), -EINVAL, "destroy(NULL)");
	ok(strcmp(asyncpool_version(), PACKAGE_VERSION) == 0, "version is %s", PACKAGE_VERSION);
	return done_testing();
}
