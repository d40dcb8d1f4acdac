/* SPDX-License-Identifier: MIT */
/*
 * The trust model of shared memory (issue 14, findings 1, 2, 3 and the
 * shm parts of 9):
 *   - a named object is opened only if no other user can write it: one
 *     another user made first (a squatter, run as nobody when this test
 *     runs as root), or one writable by group or others, is refused with
 *     -EPERM unless ASYNCPOOL_SHM_OPEN_OTHER_WRITERS;
 *   - what each kind protects against: a peer that holds the fd of a
 *     sealed memfd cannot resize it; a peer of another uid cannot open a
 *     0600 name; a peer of the same uid can truncate a named object (the
 *     man pages promise nothing more);
 *   - an fd that is not sealed against shrinking (a regular file on disk)
 *     is refused with -EPERM unless ASYNCPOOL_SHM_OPEN_UNSEALED;
 *   - a memfd sealed against writing gives -EACCES (it is sealed against
 *     shrinking: a pool needs writable memory); "/." and "/.." are not
 *     names.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <asyncpool.h>
#include "tap.h"
#include "testutil.h"
#include "shared-common.h"

#define BS 4096
#define N 8
#define NOBODY 65534

static int shared_named(const char *name, uint32_t mode, struct asyncpool_shared **sp)
{
	struct asyncpool_shared_options o;

	shared_options(&o, BS, N);
	o.name = name;
	o.mode = mode;
	return asyncpool_shared_create(&o, sp);
}

static int shared_anon(struct asyncpool_shared **sp)
{
	return shared_named(NULL, 0, sp);
}

/* Write every byte of every buffer: a SIGBUS here kills the test. */
static void touch_all(struct asyncpool_shared *sp)
{
	memset((char *)asyncpool_region_base(asyncpool_shared_region(sp)), 0x5a,
	       (size_t)BS * N);
}

/* In a child: a shrunk memfd would kill it with SIGBUS here. */
static void touch_all_child(void *arg)
{
	touch_all(arg);
}

/*
 * Run fn(name) in a child as uid and gid nobody; its exit status, or -1
 * if the child could not become nobody (it says why on stdout).
 */
static int as_nobody(int (*fn)(const char *name), const char *name)
{
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		if (setgroups(0, NULL) || setgid(NOBODY) || setuid(NOBODY))
			_exit(100);
		_exit(fn(name));
	}
	return wait_peer(pid);
}

/* The squatter: a valid pool, mode 0666, under the victim's name. */
static int squat(const char *name)
{
	struct asyncpool_shared *sp;
	int rc = shared_named(name, 0666, &sp);

	if (rc)
		return 10;
	strcpy(asyncpool_region_base(asyncpool_shared_region(sp)), "squatter was here");
	asyncpool_shared_close(sp);
	return 0;
}

/* Another user that keeps its object to itself: mode 0600. */
static int own_private(const char *name)
{
	struct asyncpool_shared *sp;

	if (shared_named(name, 0600, &sp))
		return 10;
	asyncpool_shared_close(sp);
	return 0;
}

/* Another user tries to open a 0600 object of ours: EACCES expected. */
static int try_open(const char *name)
{
	struct asyncpool_shm shm;
	int rc = asyncpool_shm_open_named_flags(name, ASYNCPOOL_SHM_OPEN_OTHER_WRITERS, &shm);

	if (rc == 0)
		asyncpool_shm_close(&shm);
	return -rc;
}

/* 1. Someone else holds the name. */
static void test_squatter(void)
{
	struct asyncpool_shared *sp, *mine;
	struct asyncpool_shm shm;
	struct asyncpool_lease l;
	char name[128];
	int st;

	if (geteuid() != 0) {
		skip(13, "not root: cannot run a squatter as a second user");
		return;
	}
	test_shm_name(name, sizeof(name), "squatted");
	st = as_nobody(squat, name);
	if (st == 100) {
		skip(13, "cannot become uid %d (setuid refused here)", NOBODY);
		return;
	}
	is_int(st, 0, "a squatter (uid %d) creates a valid pool under our name, mode 0666", NOBODY);
	is_int(shared_named(name, 0, &mine), -EEXIST, "the victim cannot create it: EEXIST");
	ok(mine == NULL, "  and gets no pool");
	sp = (void *)1;
	is_int(asyncpool_shared_open_named(name, &sp), -EPERM,
	       "shared_open_named refuses an object another user owns: EPERM");
	ok(sp == NULL, "  *out is NULL");
	memset(&shm, 0x55, sizeof(shm));
	is_int(asyncpool_shm_open_named(name, &shm), -EPERM, "shm_open_named: EPERM too");
	ok(shm.base == NULL && shm.fd == -1, "  out cleared");
	is_int(asyncpool_shared_open_named_flags(name, 0, &sp), -EPERM,
	       "shared_open_named_flags without a flag: EPERM");
	is_int(asyncpool_shared_open_named_flags(name, ASYNCPOOL_SHM_OPEN_UNSEALED, &sp), -EINVAL,
	       "shared_open_named_flags: UNSEALED does not apply to names: EINVAL");
	is_int(asyncpool_shared_open_named_flags(name, ASYNCPOOL_SHM_OPEN_OTHER_WRITERS, &sp), 0,
	       "asked explicitly (OTHER_WRITERS): opened");
	if (sp) {
		is_int(asyncpool_acquire(asyncpool_shared_pool(sp), &l), 0,
		       "  and it is the squatter's pool");
		asyncpool_lease_release(&l);
		asyncpool_shared_close(sp);
	} else {
		skip(1, "not opened");
	}
	shm_unlink(name);

	/* Not writable by us but owned by another: refused all the same
	 * (root could write it, the owner could truncate it). */
	is_int(as_nobody(own_private, name), 0, "another user creates a 0600 pool");
	is_int(asyncpool_shared_open_named(name, &sp), -EPERM,
	       "shared_open_named refuses it (root could open it): EPERM");
	shm_unlink(name);
}

/* 1. Our own objects: refused when group or others can write them. */
static void test_modes(void)
{
	static const struct { mode_t mode; int want; } cases[] = {
		{ 0600, 0 }, { 0640, 0 }, { 0644, 0 },
		{ 0620, -EPERM }, { 0660, -EPERM }, { 0602, -EPERM }, { 0666, -EPERM },
	};
	struct asyncpool_shm a, b;
	struct asyncpool_shared *sp;
	char name[128];

	test_shm_name(name, sizeof(name), "modes");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (asyncpool_shm_create_named(name, 8192, cases[i].mode, &a))
			bail_out("create_named %03o", (unsigned)cases[i].mode);
		is_int(asyncpool_shm_open_named(name, &b), cases[i].want,
		       "shm_open_named of our own object, mode %03o", (unsigned)cases[i].mode);
		if (b.base)
			asyncpool_shm_close(&b);
		is_int(asyncpool_shm_open_named_flags(name, ASYNCPOOL_SHM_OPEN_OTHER_WRITERS, &b), 0,
		       "  with OTHER_WRITERS: opened");
		asyncpool_shm_close(&b);
		asyncpool_shm_close(&a);
		asyncpool_shm_unlink_named(name);
	}
	is_int(asyncpool_shm_open_named_flags(name, 4, &b), -EINVAL, "open_named_flags: unknown flag");
	is_int(asyncpool_shm_open_named_flags(name, ASYNCPOOL_SHM_OPEN_UNSEALED, &b), -EINVAL,
	       "open_named_flags: UNSEALED does not apply to names");
	is_int(asyncpool_shm_open_named_flags(name, 0, NULL), -EINVAL, "open_named_flags: NULL out");

	/* The one-call API: a pool named for others to write is not opened
	 * by accident; untrusted peers get the fd of an anonymous one. */
	if (shared_named(name, 0666, &sp))
		bail_out("shared_create 0666");
	asyncpool_shared_close(sp);
	is_int(asyncpool_shared_open_named(name, &sp), -EPERM,
	       "shared_open_named of a pool created with mode 0666: EPERM");
	asyncpool_shm_unlink_named(name);
}

/* One check: a pool the peer opened (or failed to, NULL) gives a lease. */
static void check_usable_and_close(struct asyncpool_shared *peer)
{
	struct asyncpool_lease l;

	if (!peer) {
		skip(1, "not opened");
		return;
	}
	is_int(asyncpool_acquire(asyncpool_shared_pool(peer), &l), 0, "  and usable");
	asyncpool_lease_release(&l);
	asyncpool_shared_close(peer);
}

/* 2. What each kind of object protects against. */
static void test_kinds(void)
{
	struct asyncpool_shared *sp, *peer;
	char name[128];
	int sock, res[3] = { -1, -1, -1 }, fd, seals;
	pid_t pid;

	/* A memfd: the one-call API's default, for untrusted peers. */
	if (shared_anon(&sp))
		bail_out("shared_create");
	seals = fcntl(asyncpool_shared_fd(sp), F_GET_SEALS);
	ok(seals >= 0 && (seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) ==
	   (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
	   "memfd pool: sealed against shrink, grow and more seals");
	pid = spawn_peer(&sock, "truncate", NULL);
	if (pid < 0)
		bail_out("spawn");
	is_int(asyncpool_shm_send_fd(sock, asyncpool_shared_fd(sp)), 0, "memfd pool: fd sent to a peer");
	ok(read_full(sock, res, sizeof(res)) == 0, "  the peer answered");
	ok(res[0] == EPERM && res[1] == EPERM && res[2] == EPERM,
	   "  the peer can neither shrink, grow nor reseal it (EPERM x3)");
	is_int(wait_peer(pid), 0, "  the peer exited 0");
	close(sock);
	ok(tap_survives(touch_all_child, sp),
	   "memfd pool: every buffer written after the peer's attempts (no SIGBUS)");
	asyncpool_shared_close(sp);

	/* A name: closed to other users (mode 0600)... */
	test_shm_name(name, sizeof(name), "kinds");
	if (shared_named(name, 0, &sp))
		bail_out("shared_create named");
	if (geteuid() == 0) {
		int st = as_nobody(try_open, name);

		if (st == 100)
			skip(1, "cannot become uid %d", NOBODY);
		else
			is_int(st, EACCES, "named pool 0600: another user cannot open it (EACCES)");
	} else {
		skip(1, "not root: cannot run a second user");
	}
	/* ...but not to our own uid: a peer that opens it can truncate it.
	 * The name is for peers trusted as ourselves. */
	fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
	/* (to the end of the pool layout: the buffers are gone) */
	ok(fd >= 0 && ftruncate(fd, 8192) == 0,
	   "named pool: a peer of the same uid can truncate it (not protected)");
	if (fd >= 0)
		close(fd);
	is_int(asyncpool_shared_open_named(name, &peer), -EBADMSG,
	       "  a later open sees the object too small for its buffers: EBADMSG");
	/* (sp's buffers now fault: close it without touching them) */
	asyncpool_shared_close(sp);
	asyncpool_shm_unlink_named(name);

	/* The fd of a named object cannot be sealed: refused as an fd. */
	if (shared_named(name, 0, &sp))
		bail_out("shared_create named");
	is_int(asyncpool_shared_open_fd(asyncpool_shared_fd(sp), &peer), -EPERM,
	       "shared_open_fd of a named object's fd: EPERM (cannot be sealed)");
	is_int(asyncpool_shared_open_fd_flags(asyncpool_shared_fd(sp), ASYNCPOOL_SHM_OPEN_UNSEALED,
					      &peer), 0, "  with UNSEALED: opened");
	check_usable_and_close(peer);
	asyncpool_shared_close(sp);
	asyncpool_shm_unlink_named(name);
}

/* 3. A valid pool in a regular file on disk. */
static void test_disk_file(void)
{
	struct asyncpool_shared *sp, *peer;
	struct asyncpool_shm shm;
	const struct asyncpool_shm *src;
	char path[128];
	int fd;

	if (shared_anon(&sp))
		bail_out("shared_create");
	src = asyncpool_shared_shm(sp);
	/* The build directory: on disk, unlike /dev/shm. */
	snprintf(path, sizeof(path), "./test-shm-trust-%ld.pool", (long)getpid());
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 || write_full(fd, src->base, src->size))
		bail_out("cannot write %s", path);
	unlink(path);
	asyncpool_shared_close(sp);
	if (fcntl(fd, F_GET_SEALS) >= 0)
		diag("%s can carry seals here (tmpfs?): refused as unsealed", path);

	memset(&shm, 0x55, sizeof(shm));
	is_int(asyncpool_shm_open_fd(fd, &shm), -EPERM,
	       "shm_open_fd: a regular file on disk cannot be sealed: EPERM");
	ok(shm.base == NULL && shm.fd == -1, "  out cleared");
	peer = (void *)1;
	is_int(asyncpool_shared_open_fd(fd, &peer), -EPERM,
	       "shared_open_fd: a valid pool in a file on disk: EPERM");
	ok(peer == NULL, "  *out is NULL");
	is_int(asyncpool_shared_open_fd_flags(fd, ASYNCPOOL_SHM_OPEN_OTHER_WRITERS, &peer), -EINVAL,
	       "shared_open_fd_flags: OTHER_WRITERS does not apply to fds: EINVAL");
	is_int(asyncpool_shm_open_fd_flags(fd, 0x100, &shm), -EINVAL, "shm_open_fd_flags: unknown flag");
	is_int(asyncpool_shm_open_fd_flags(fd, ASYNCPOOL_SHM_OPEN_UNSEALED, NULL), -EINVAL,
	       "shm_open_fd_flags: NULL out");
	is_int(asyncpool_shm_open_fd_flags(fd, ASYNCPOOL_SHM_OPEN_UNSEALED, &shm), 0,
	       "shm_open_fd_flags with UNSEALED: mapped");
	asyncpool_shm_close(&shm);
	is_int(asyncpool_shared_open_fd_flags(fd, ASYNCPOOL_SHM_OPEN_UNSEALED, &peer), 0,
	       "shared_open_fd_flags with UNSEALED: opened");
	check_usable_and_close(peer);
	close(fd);

	/* An unsealed memfd is the same case. */
	fd = memfd_create("unsealed", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0 || ftruncate(fd, 8192))
		bail_out("memfd");
	is_int(asyncpool_shm_open_fd(fd, &shm), -EPERM, "shm_open_fd: an unsealed memfd: EPERM");
	is_int(asyncpool_shm_open_fd_flags(fd, ASYNCPOOL_SHM_OPEN_UNSEALED, &shm), 0,
	       "  with UNSEALED: mapped");
	asyncpool_shm_close(&shm);
	close(fd);
}

/* 9. Write seals, and the names "/." and "/..". */
static void test_small_ones(void)
{
	static const int seals[] = { F_SEAL_WRITE, F_SEAL_FUTURE_WRITE };
	static const char *const dots[] = { "/.", "/.." };
	struct asyncpool_shared *sp;
	struct asyncpool_shm shm;

	for (size_t i = 0; i < 2; i++) {
		const char *what = seals[i] == F_SEAL_WRITE ? "SHRINK|WRITE" : "SHRINK|FUTURE_WRITE";
		int fd = memfd_create("wsealed", MFD_CLOEXEC | MFD_ALLOW_SEALING);

		if (fd < 0 || ftruncate(fd, 8192) || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | seals[i])) {
			skip(3, "cannot seal a memfd %s here", what);
			if (fd >= 0)
				close(fd);
			continue;
		}
		is_int(asyncpool_shm_open_fd(fd, &shm), -EACCES,
		       "shm_open_fd: a memfd sealed %s is not writable: EACCES", what);
		is_int(asyncpool_shm_open_fd_flags(fd, ASYNCPOOL_SHM_OPEN_UNSEALED, &shm), -EACCES,
		       "  UNSEALED does not change that");
		is_int(asyncpool_shared_open_fd(fd, &sp), -EACCES, "  shared_open_fd: EACCES");
		close(fd);
	}
	for (size_t i = 0; i < 2; i++) {
		struct asyncpool_shared_options o;

		is_int(asyncpool_shm_create_named(dots[i], 4096, 0, &shm), -EINVAL,
		       "create_named \"%s\": EINVAL", dots[i]);
		is_int(asyncpool_shm_open_named(dots[i], &shm), -EINVAL,
		       "open_named \"%s\": EINVAL", dots[i]);
		is_int(asyncpool_shm_open_named_flags(dots[i], ASYNCPOOL_SHM_OPEN_OTHER_WRITERS, &shm),
		       -EINVAL, "open_named_flags \"%s\": EINVAL", dots[i]);
		is_int(asyncpool_shm_unlink_named(dots[i]), -EINVAL,
		       "unlink_named \"%s\": EINVAL", dots[i]);
		is_int(asyncpool_shared_open_named(dots[i], &sp), -EINVAL,
		       "shared_open_named \"%s\": EINVAL", dots[i]);
		memset(&o, 0, sizeof(o));
		o.size = sizeof(o);
		o.buffer_size = BS;
		o.buffer_count = N;
		o.name = dots[i];
		is_int(asyncpool_shared_create(&o, &sp), -EINVAL, "shared_create \"%s\": EINVAL", dots[i]);
	}
	/* Names that only start with dots are names. */
	{
		char name[128], dotted[130];

		test_shm_name(name, sizeof(name), "dots");
		snprintf(dotted, sizeof(dotted), "/..%s", name + 1);
		is_int(asyncpool_shm_create_named(dotted, 4096, 0, &shm), 0,
		       "a name that starts with \"..\" is a name");
		asyncpool_shm_close(&shm);
		asyncpool_shm_unlink_named(dotted);
	}
}

int main(void)
{
	test_squatter();
	test_modes();
	test_kinds();
	test_disk_file();
	test_small_ones();
	return done_testing();
}
