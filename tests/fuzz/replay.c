/* SPDX-License-Identifier: MIT */
/*
 * Replays a fuzz corpus through LLVMFuzzerTestOneInput without libFuzzer,
 * so that `make check` runs every committed input with the normal
 * compiler (and under the sanitizers of a sanitized build).  One TAP test
 * per input; a target that finds a bug aborts, which fails the program.
 *
 * The corpus is $top_srcdir/tests/fuzz/corpus/FUZZ_CORPUS, or the
 * directories and files given as arguments.
 */
#include "config.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../tap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0, n;

	if (!f)
		return -1;
	do {
		if (len == cap) {
			uint8_t *nb = realloc(buf, cap = cap ? 2 * cap : 4096);

			if (!nb) {
				free(buf);
				fclose(f);
				return -1;
			}
			buf = nb;
		}
		n = fread(buf + len, 1, cap - len, f);
		len += n;
	} while (n);
	fclose(f);
	/* an exact-size copy, so that a sanitizer sees reads past the end */
	{
		uint8_t *exact = malloc(len ? len : 1);

		if (!exact) {
			free(buf);
			return -1;
		}
		memcpy(exact, buf, len);
		free(buf);
		LLVMFuzzerTestOneInput(exact, len);
		free(exact);
	}
	return 0;
}

static void replay(const char *path)
{
	struct dirent **names;
	struct stat sb;
	int n;

	if (stat(path, &sb) == 0 && !S_ISDIR(sb.st_mode)) {
		ok(replay_file(path) == 0, "%s", path);
		return;
	}
	n = scandir(path, &names, NULL, alphasort);
	if (n < 0)
		bail_out("cannot read the corpus %s", path);
	for (int i = 0; i < n; i++) {
		char file[4096];

		if (names[i]->d_name[0] != '.') {
			snprintf(file, sizeof(file), "%s/%s", path, names[i]->d_name);
			ok(replay_file(file) == 0, "%s", names[i]->d_name);
		}
		free(names[i]);
	}
	free(names);
}

int main(int argc, char **argv)
{
	if (argc > 1) {
		for (int i = 1; i < argc; i++)
			replay(argv[i]);
	} else {
		const char *top = getenv("top_srcdir");
		char dir[4096];

		snprintf(dir, sizeof(dir), "%s/tests/fuzz/corpus/%s", top ? top : ".", FUZZ_CORPUS);
		replay(dir);
	}
	if (!tap_run)
		bail_out("the corpus is empty");
	return done_testing();
}
