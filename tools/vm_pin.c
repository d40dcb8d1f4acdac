/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdio.h>

#include "vm_pin.h"

long vm_pin_kib(void)
{
	char line[256];
	long v = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmPin: %ld kB", &v) == 1)
			break;
	fclose(f);
	return v;
}
