/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tap.h"
#include "testutil.h"

void slab_options(struct asyncpool_slab_options *o, size_t buffer_size, uint32_t count)
{
	memset(o, 0, sizeof(*o));
	o->size = sizeof(*o);
	o->buffer_size = buffer_size;
	o->buffer_count = count;
	o->numa_node = -1;
}

void shared_options(struct asyncpool_shared_options *o, size_t buffer_size, uint32_t count)
{
	memset(o, 0, sizeof(*o));
	o->size = sizeof(*o);
	o->buffer_size = buffer_size;
	o->buffer_count = count;
}

int new_region(struct asyncpool_proactor *p, size_t buffer_size, uint32_t count,
	       uint32_t access, struct asyncpool_region **out)
{
	struct asyncpool_slab_options o;
	struct asyncpool_slab *s;
	int rc;

	*out = NULL;
	slab_options(&o, buffer_size, count);
	rc = asyncpool_slab_create(&o, &s);
	if (rc)
		return rc;
	rc = asyncpool_proactor_register_slab(p, s, access, out);
	asyncpool_slab_unref(s);
	return rc;
}

struct asyncpool_region *make_region(struct asyncpool_proactor *p, size_t buffer_size,
				     uint32_t count, uint32_t access)
{
	struct asyncpool_region *r;
	int rc = new_region(p, buffer_size, count, access, &r);

	if (rc)
		bail_out("a region of %u x %zu: %s", count, buffer_size, strerror(-rc));
	return r;
}

struct asyncpool *make_pool(struct asyncpool_proactor *p, size_t buffer_size, uint32_t count,
			    uint32_t cache)
{
	struct asyncpool_region *r = make_region(p, buffer_size, count, ASYNCPOOL_ACCESS_READ);
	struct asyncpool_options o;
	struct asyncpool *pool;
	int rc;

	if (cache) {
		memset(&o, 0, sizeof(o));
		o.size = sizeof(o);
		o.cache_size = cache;
		rc = asyncpool_create_opts(r, &o, &pool);
	} else {
		rc = asyncpool_create(r, &pool);
	}
	if (rc)
		bail_out("a pool of %u x %zu: %s", count, buffer_size, strerror(-rc));
	asyncpool_region_unref(r);
	return pool;
}

unsigned long env_number(const char *name, unsigned long def)
{
	const char *s = getenv(name);
	unsigned long v;
	char *end;

	if (!s || !*s)
		return def;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v == 0 || s[0] == '-' || v > LONG_MAX)
		bail_out("%s=%s: a positive number, please", name, s);
	return v;
}

long stress_iterations(long def)
{
	return (long)env_number("ASYNCPOOL_STRESS_ITERATIONS", (unsigned long)def);
}

int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void test_shm_name(char *buf, size_t len, const char *tag)
{
	const char *prefix = getenv("ASYNCPOOL_TEST_SHM_PREFIX");

	snprintf(buf, len, "/%s%ld-%s", prefix && *prefix ? prefix : "asyncpool-test-",
		 (long)getpid(), tag);
}

pid_t fork_or_bail(void)
{
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		bail_out("fork");
	return pid;
}
