/* SPDX-License-Identifier: MIT */
#include "internal.h"

AP_EXPORT const char *asyncpool_version(void)
{
	return PACKAGE_VERSION;
}
