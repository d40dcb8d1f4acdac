/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: asyncpool_open_shared() on bytes from the fuzzer.
 *
 * The seed corpus in tests/fuzz/corpus/open_shared/ holds valid layouts
 * made by asyncpool_create_shared() (1, 4 and 16 buffers, one with a
 * buffer leased) and the 4-buffer one with each header field broken.
 *
 * Shared memory is untrusted: open must refuse every bad layout with a
 * documented errno (-EINVAL, -EPROTO, -EPROTONOSUPPORT, -EBADMSG,
 * -EOVERFLOW, -ENOMEM) and read nothing outside [mem, mem + size).  The
 * input is copied into an allocation of exactly its size, so that ASan
 * sees a read past the end.  When open succeeds, the pool must work:
 * leases inside the slab, only documented errnos, a clean destroy.
 *
 * Input: byte 0 picks the region geometry (low 4 bits: 1..16 buffers of
 * 64 bytes), the rest is the shared memory.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <asyncpool.h>
#include "../testutil.h"

#define BUFFER_SIZE 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_fail(const char *what, long value)
{
	fprintf(stderr, "fuzz_open_shared: %s (%ld)\n", what, value);
	abort();
}

static int documented_open_errno(int rc)
{
	switch (rc) {
	case -EINVAL: case -EPROTO: case -EPROTONOSUPPORT: case -EBADMSG:
	case -EOVERFLOW: case -ENOMEM:
		return 1;
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct asyncpool_proactor *p;
	struct asyncpool_region *r;
	struct asyncpool *pool = NULL;
	uint32_t count;
	size_t len;
	void *mem;
	int rc;

	if (size < 1)
		return 0;
	count = (data[0] & 15u) + 1;
	len = size - 1;
	/* 64-byte aligned, exactly len bytes: ASan catches reads past it */
	if (posix_memalign(&mem, 64, len ? len : 1))
		return 0;
	memcpy(mem, data + 1, len);

	if (asyncpool_proactor_create_memory(&p) ||
	    new_region(p, BUFFER_SIZE, count, ASYNCPOOL_ACCESS_READ, &r))
		fuzz_fail("setup", 0);

	rc = asyncpool_open_shared(mem, len, r, &pool);
	if (rc) {
		if (!documented_open_errno(rc))
			fuzz_fail("open: undocumented errno", rc);
		if (pool)
			fuzz_fail("open failed but set the pool", rc);
	} else {
		struct asyncpool_lease l[4];
		int n = 0;

		for (int i = 0; i < 4; i++) {
			rc = asyncpool_acquire(pool, &l[n]);
			if (rc == 0) {
				if (l[n].buffer_index >= count ||
				    l[n].span.offset != (size_t)l[n].buffer_index * BUFFER_SIZE)
					fuzz_fail("lease outside the slab", l[n].buffer_index);
				n++;
			} else if (rc != -ENOBUFS && rc != -EUCLEAN) {
				fuzz_fail("acquire: undocumented errno", rc);
			}
		}
		(void)asyncpool_available(pool);
		while (n)
			asyncpool_lease_release(&l[--n]);
		rc = asyncpool_destroy(pool);
		if (rc && rc != -EBUSY)
			fuzz_fail("destroy: undocumented errno", rc);
	}
	asyncpool_region_unref(r);
	if (asyncpool_proactor_destroy(p))
		fuzz_fail("proactor destroy", 0);
	free(mem);
	return 0;
}
