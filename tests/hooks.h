/* SPDX-License-Identifier: MIT */
/*
 * The library's internals, for the tests that link its test-hook build
 * (tests/libasyncpool-testhooks.la: Makefile.am's hook_ldadd).  The one
 * place that names the internal headers.
 */
#ifndef ASYNCPOOL_TEST_HOOKS_H
#define ASYNCPOOL_TEST_HOOKS_H

#ifndef ASYNCPOOL_TEST_HOOKS
#define ASYNCPOOL_TEST_HOOKS 1
#endif
#include "../lib/pool_internal.h"
#include "../lib/pool_cache.h"
#include "../lib/attach_rec.h"

#endif
