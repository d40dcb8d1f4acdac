/* SPDX-License-Identifier: MIT */
/* How inspect and reclaim name what they read: a shm name, a pool's error. */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "tool.h"

bool tool_is_shm_name(const char *s)
{
	return s[0] == '/' && s[1] && !strchr(s + 1, '/');
}

const char *tool_pool_error(int rc)
{
	switch (rc) {
	case -EPROTO: return "EPROTO (no pool magic)";
	case -EPROTONOSUPPORT: return "EPROTONOSUPPORT (unknown layout version)";
	case -EBADMSG: return "EBADMSG (inconsistent header)";
	case -EUCLEAN: return "EUCLEAN (inconsistent freelist)";
	default: return strerror(-rc);
	}
}
