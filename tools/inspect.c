/* SPDX-License-Identifier: MIT */
/*
 * asyncpool inspect [--json] NAME|FD-PATH: print the header, check the
 * freelist and list the attachments and the channels of a shared pool,
 * read-only.  The
 * memory belongs to other processes and may be corrupt or changing: it
 * is mapped PROT_READ and MAP_PRIVATE (never written), every field is
 * checked before it is used, every walk is bounded, and a SIGBUS from a
 * file that shrinks under us is caught.  Alive or dead is the library's
 * own test (lib/attach_live.h), asked through our read-only descriptor:
 * inspect never attaches.
 *
 * What is read goes into a struct inspection first; the text and the
 * JSON are two printers of it.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <asyncpool.h>
#include "tool.h"
#include "../lib/pool_check.h"
#include "../lib/attach_live.h"
#include "../lib/channel_ring.h"

static sigjmp_buf bus_jump;

static void on_sigbus(int sig)
{
	(void)sig;
	siglongjmp(bus_jump, 1);
}

static void inspect_usage(FILE *f)
{
	fputs("Usage: asyncpool inspect [--json] NAME|FD-PATH\n"
	      "\n"
	      "Print the header of a shared pool, check its freelist and list its\n"
	      "attachments, read-only.  NAME is a POSIX shared memory name (\"/name\");\n"
	      "FD-PATH is a file, e.g. /dev/shm/name or /proc/PID/fd/N for a memfd.\n"
	      "--json prints the same as one JSON object.\n"
	      "\n"
	      "Exit status: 0 consistent; 1 cannot open or read it, invalid or\n"
	      "inconsistent; 2 usage error.\n", f);
}

/* One attachment record, or a holder that buffers name. */
struct att_view {
	uint32_t slot;
	uint32_t state;                 /* AP_ATT_* of the record */
	int alive;                      /* ap_attach_live(): 1, 0 or -errno */
	uint32_t pid;                   /* as the record says: not trusted */
	bool pid_known;                 /* not 0, and of our PID namespace */
	int64_t dead_for_ms;            /* since a reclaim found it dead; -1 unknown */
	uint32_t leased, cached;
	uint32_t nsteps;
	struct { uint32_t step, first, count; } steps[AP_STEPS];
	/* Its AF_XDP frames by place (since 1.12): 0 no summary, 1 known,
	 * -1 unknown (xdp_why). */
	int xdp;
	const char *xdp_why;
	uint32_t xdp_sockets, xdp_leased;
	uint32_t xdp_place[AP_XS_PLACES];
};

/* An end of a channel: free, or the attachment it names and whether it lives. */
struct end_view {
	uint64_t word;
	uint32_t slot;                  /* of the attachment */
	const char *state;              /* "free", "alive", "dead", "unknown", "bad" */
};

/* A channel (layout version 5). */
struct chan_view {
	uint32_t depth, step_n;
	struct end_view send, recv;
	uint64_t sent, received, full, corruptions, reclaimed;
	uint32_t redo_depth;            /* the redelivery ring (layout 5): items queued */
	uint64_t redelivered, bad_spans;
};

/* How far the reading got. */
enum stage { SEEN_SIZE, SEEN_MAGIC, SEEN_HEADER, SEEN_ALL };

struct inspection {
	const char *what;
	size_t size;
	enum stage stage;
	int error;                      /* of the header, or 0 */
	uint32_t magic;
	struct ap_pool_header h;        /* a copy: the original may change */
	bool buffers_here;
	uint64_t buffers_off;
	uint64_t bad_releases, corruptions, empty;
	uint32_t wait, flush;
	struct ap_audit a;
	int audit;                      /* 0 or -EUCLEAN */
	uint32_t natt;
	struct att_view att[AP_ATTACH_SLOTS];
	uint32_t stray_leased, stray_cached; /* holders beyond the slots */
	uint32_t nchan;
	struct chan_view *chan;         /* nchan of them */
	bool shrank;                    /* SIGBUS */
};

static uint64_t load64(const unsigned char *p)
{
	return atomic_load_explicit((_Atomic uint64_t *)p, memory_order_relaxed);
}

static uint32_t load32(const unsigned char *p)
{
	return atomic_load_explicit((_Atomic uint32_t *)p, memory_order_relaxed);
}

/* The AF_XDP summary of a record (pool_layout.h): epoch, sockets, places. */
static void xdp_load(const struct ap_attach *rec, uint32_t *w)
{
	w[0] = load32((const void *)&rec->xdp.epoch);
	w[1] = load32((const void *)&rec->xdp.sockets);
	for (uint32_t i = 0; i < AP_XS_PLACES; i++)
		w[2 + i] = load32((const void *)&rec->xdp.place[i]);
}

/*
 * Where the AF_XDP frames of attachment v are, as its process last
 * published them: only a summary of the record's epoch counts (an
 * earlier holder's is none), and it is believed only from a live
 * process, read the same twice, with sockets, its places adding up to
 * no more than the buffers the attachment leases (the rest are leased
 * to its callers).  Else unknown, and why.
 */
static void read_xdp(struct att_view *v, const struct ap_attach *rec, uint64_t life)
{
	uint32_t a[2 + AP_XS_PLACES], b[2 + AP_XS_PLACES];
	bool steady = false, any = false;
	uint64_t in_rings = 0;

	for (int tries = 0; tries < 16 && !steady; tries++) {
		xdp_load(rec, a);
		xdp_load(rec, b);
		steady = !memcmp(a, b, sizeof(a));
	}
	if (!a[0] || a[0] != (uint32_t)AP_ATT_EPOCH(life))
		return;
	for (uint32_t i = 1; i < 2 + AP_XS_PLACES; i++)
		any |= a[i] != 0;
	if (!any)
		return;                 /* sockets all closed: nothing to say */
	v->xdp = -1;
	v->xdp_sockets = a[1];
	for (uint32_t i = 0; i < AP_XS_PLACES; i++) {
		v->xdp_place[i] = a[2 + i];
		in_rings += a[2 + i];
	}
	if (v->alive != 1)
		v->xdp_why = "its process is gone";
	else if (!steady)
		v->xdp_why = "changing while read";
	else if (!a[1])
		v->xdp_why = "frames in the rings of no socket";
	else if (in_rings > v->leased)
		v->xdp_why = "more frames in its rings than it leases";
	else {
		v->xdp = 1;
		v->xdp_leased = v->leased - (uint32_t)in_rings;
	}
}

/* The records that are in use or that buffers name as their holder. */
static void read_attachments(struct inspection *in, const unsigned char *mem, int fd)
{
	const unsigned char *base = mem + in->h.attach_offset;
	uint64_t now = tool_now_ns(), ns = ap_pid_ns();

	for (uint32_t s = 0; s < AP_ATTACH_SLOTS; s++) {
		const struct ap_attach *rec = (const void *)(base + (size_t)s * AP_ATTACH_SIZE);
		struct att_view *v = &in->att[in->natt];
		uint64_t since, life;

		memset(v, 0, sizeof(*v));
		v->slot = s;
		v->alive = ap_attach_live(rec, fd, s);
		life = load64((const void *)&rec->life);
		v->state = AP_ATT_STATE(life);
		v->leased = in->a.held_leased[s + 1];
		v->cached = in->a.held_cached[s + 1];
		if (v->state == AP_ATT_FREE && !v->leased && !v->cached)
			continue;
		v->pid = load32((const void *)&rec->pid);
		/* A PID of another namespace (a container's 1, say) names
		 * another process here, or none: unknown. */
		v->pid_known = v->pid && ns && load64((const void *)&rec->pidns) == ns;
		since = load64((const void *)&rec->dead_since);
		v->dead_for_ms = since && since <= now ? (int64_t)((now - since) / 1000000u) : -1;
		for (uint32_t k = 0; k < AP_STEPS; k++) {
			uint32_t n = load32((const void *)&rec->step[k].count);

			if (!n)
				continue;
			v->steps[v->nsteps].step = k;
			v->steps[v->nsteps].count = n;
			v->steps[v->nsteps].first = load32((const void *)&rec->step[k].idx[0]);
			v->nsteps++;
		}
		read_xdp(v, rec, life);
		in->natt++;
	}
	for (uint32_t hld = AP_ATTACH_SLOTS + 1; hld <= AP_HOLDER_MASK; hld++) {
		in->stray_leased += in->a.held_leased[hld];
		in->stray_cached += in->a.held_cached[hld];
	}
}

/* An end word: the liveness of the attachment it names, by the library's test. */
static void read_end(struct end_view *e, uint64_t v, const unsigned char *mem,
		     const struct ap_pool_header *h, int fd)
{
	const struct ap_attach *rec;
	uint64_t life;
	int alive;

	e->word = v;
	e->slot = AP_END_WHO(v) - 1;
	if (!v) {
		e->state = "free";
		return;
	}
	if (AP_END_WHO(v) == 0 || AP_END_WHO(v) > AP_ATTACH_SLOTS) {
		e->state = "bad";
		return;
	}
	rec = (const void *)(mem + h->attach_offset + (size_t)e->slot * AP_ATTACH_SIZE);
	life = load64((const void *)&rec->life);
	if (AP_ATT_STATE(life) != AP_ATT_LIVE || AP_ATT_EPOCH(life) != AP_END_EPOCH(v)) {
		e->state = "dead";
		return;
	}
	alive = ap_attach_live(rec, fd, e->slot);
	e->state = alive < 0 ? "unknown" : alive ? "alive" : "dead";
}

static void read_channels(struct inspection *in, const unsigned char *mem, int fd)
{
	const struct ap_pool_header *h = &in->h;

	in->chan = calloc(h->channel_count ? h->channel_count : 1, sizeof(*in->chan));
	if (!in->chan)
		return;
	for (uint32_t c = 0; c < h->channel_count; c++) {
		struct ap_chan *ch = ap_chan_in((void *)mem, h->buffer_count, h->channel_count,
						h->channel_capacity, c);
		struct chan_view *v = &in->chan[c];

		v->depth = ap_chan_depth(ch, h->channel_capacity,
					 load64((const void *)&ch->head));
		v->step_n = load32((const void *)&ch->step_n);
		read_end(&v->send, load64((const void *)&ch->send_end), mem, h, fd);
		read_end(&v->recv, load64((const void *)&ch->recv_end), mem, h, fd);
		v->sent = load64((const void *)&ch->sent);
		v->received = load64((const void *)&ch->received);
		v->full = load64((const void *)&ch->full);
		v->corruptions = load64((const void *)&ch->corruptions);
		v->reclaimed = load64((const void *)&ch->reclaimed);
		v->redo_depth = ap_ring_depth(ap_chan_redo(ch, h->channel_capacity),
					      h->channel_capacity,
					      load64((const void *)&ch->rhead));
		v->redelivered = load64((const void *)&ch->redelivered);
		v->bad_spans = load64((const void *)&ch->bad_spans);
	}
	in->nchan = h->channel_count;
}

/* Fill *in from the size bytes at mem; stops where the object stops being a pool. */
static int inspect_read(struct inspection *in, const unsigned char *mem, int fd)
{
	const struct ap_pool_head *hl = (const void *)(mem + AP_OFF_HEAD);
	const struct ap_pool_counters *c = (const void *)(mem + AP_OFF_COUNTERS);
	unsigned char *seen;
	uint64_t total;

	if (in->size < sizeof(in->h))
		return 0;
	in->stage = SEEN_MAGIC;
	memcpy(&in->h, mem, sizeof(in->h));
	in->magic = (uint32_t)atomic_load(&in->h.magic);
	if (in->magic != AP_POOL_MAGIC) {
		in->error = -EPROTO;
		return 0;
	}
	in->stage = SEEN_HEADER;
	in->error = ap_header_check(mem, in->size, true, &in->h);
	if (in->error) {
		memcpy(&in->h, mem, sizeof(in->h));    /* print what is there */
		return 0;
	}
	in->buffers_here = ap_bundle_geometry(in->h.buffer_count, in->h.buffer_size,
					      in->h.channel_count, in->h.channel_capacity,
					      &in->buffers_off, &total) && total <= in->size;
	in->bad_releases = load64((const void *)&c->bad_releases);
	in->corruptions = load64((const void *)&c->corruptions);
	in->empty = load64((const void *)&c->empty);
	in->wait = load32((const void *)&hl->wait);
	in->flush = load32((const void *)&hl->flush);
	seen = calloc(in->h.buffer_count / 8 + 1, 1);
	if (!seen)
		return -ENOMEM;
	in->audit = ap_freelist_audit(atomic_load_explicit((_Atomic uint64_t *)&hl->head,
							   memory_order_acquire),
				      (const _Atomic uint64_t *)(mem + AP_OFF_NEXT),
				      (const _Atomic uint32_t *)(mem + in->h.link_offset),
				      in->h.buffer_count, in->h.channel_count, seen, &in->a);
	free(seen);
	read_attachments(in, mem, fd);
	read_channels(in, mem, fd);
	in->stage = SEEN_ALL;
	return 0;
}

/* inspect_read(), with a SIGBUS (the object shrank) caught. */
static int inspect_guarded(struct inspection *in, const unsigned char *mem, int fd)
{
	struct sigaction sa, old;
	int rc = 0;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigbus;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, &old);
	if (sigsetjmp(bus_jump, 1) == 0)
		rc = inspect_read(in, mem, fd);
	else
		in->shrank = true;
	sigaction(SIGBUS, &old, NULL);
	return rc;
}

static const char *att_state(const struct att_view *v)
{
	if (v->alive < 0)
		return "unknown";
	if (v->alive)
		return "alive";
	return v->state == AP_ATT_FREE ? "detached" : "dead";
}

static int verdict(const struct inspection *in)
{
	return in->stage == SEEN_ALL && !in->audit && !in->shrank ? TOOL_EXIT_OK :
	       TOOL_EXIT_FAILURE;
}

/* ---- text ---- */
static void print_text(const struct inspection *in)
{
	const struct ap_pool_header *h = &in->h;
	const struct ap_audit *a = &in->a;

	printf("object:          %s\n", in->what);
	printf("size:            %zu bytes\n", in->size);
	if (in->stage == SEEN_SIZE) {
		printf("header:          too small for a header (%zu < %zu bytes)\n",
		       in->size, sizeof(*h));
		return;
	}
	printf("magic:           0x%08" PRIx32 "%s\n", in->magic,
	       in->magic == AP_POOL_MAGIC ? " (APOL)" : "");
	if (in->stage == SEEN_MAGIC) {
		/* Not a pool: the rest of the header would be noise. */
		printf("header:          INVALID: %s\n", tool_pool_error(in->error));
		return;
	}
	printf("version:         %" PRIu32 "\n", h->version);
	printf("header_size:     %" PRIu32 "\n", h->header_size);
	printf("flags:           0x%" PRIx32 "%s\n", h->flags,
	       h->flags == AP_POOL_F_SHARED ? " (shared)" : "");
	printf("storage_size:    %" PRIu64 "\n", h->storage_size);
	printf("buffer_size:     %" PRIu64 "\n", h->buffer_size);
	printf("buffer_count:    %" PRIu32 "\n", h->buffer_count);
	printf("attach_slots:    %" PRIu32 "\n", h->attach_slots);
	printf("head_offset:     %" PRIu64 "\n", h->head_offset);
	printf("counters_offset: %" PRIu64 "\n", h->counters_offset);
	printf("next_offset:     %" PRIu64 "\n", h->next_offset);
	printf("link_offset:     %" PRIu64 "\n", h->link_offset);
	printf("depth_offset:    %" PRIu64 "\n", h->depth_offset);
	printf("attach_offset:   %" PRIu64 "\n", h->attach_offset);
	if (in->error) {
		printf("header:          INVALID: %s\n", tool_pool_error(in->error));
		return;
	}
	printf("header:          valid (layout v%" PRIu32 ")\n", h->version);
	if (in->stage != SEEN_ALL)
		return;
	if (in->buffers_here)
		printf("buffers:         at offset %" PRIu64 " (%" PRIu64 " bytes)\n",
		       in->buffers_off, h->buffer_size * h->buffer_count);
	else
		printf("buffers:         not in this object (the pool layout only)\n");
	printf("bad_releases:    %" PRIu64 "\n", in->bad_releases);
	printf("corruptions:     %" PRIu64 "\n", in->corruptions);
	printf("empty:           %" PRIu64 "\n", in->empty);
	if (a->head_index == AP_FL_END)
		printf("head:            empty, tag %" PRIu32 "\n", a->head_tag);
	else
		printf("head:            index %" PRIu32 ", tag %" PRIu32 "\n", a->head_index,
		       a->head_tag);
	printf("waiters:         %s (wait word 0x%08" PRIx32 ")\n",
	       in->wait & AP_WAIT_WAITERS ? "announced" : "none", in->wait);
	printf("flush requests:  %" PRIu32 "\n", in->flush);
	printf("capacity:        %" PRIu32 "\n", h->buffer_count);
	/*
	 * As asyncpool_available() in a process that caches none: the
	 * freelist.  Cached buffers are available only to the process
	 * whose threads cache them (man asyncpool_available).
	 */
	printf("available:       %" PRIu32 " (on the freelist)\n", a->free);
	printf("leased:          %" PRIu32 "\n", a->leased);
	printf("cached:          %" PRIu32 " (in thread caches: available to their process only)\n",
	       a->cached);
	if (a->lost)
		printf("lost:            %" PRIu32 "\n", a->lost);
	printf("attachments:     %" PRIu32 "\n", in->natt);
	for (uint32_t i = 0; i < in->natt; i++) {
		const struct att_view *v = &in->att[i];

		char pid[16] = "unknown";

		if (v->pid_known)
			snprintf(pid, sizeof(pid), "%" PRIu32, v->pid);
		printf("attachment:      slot %" PRIu32 " pid %s %s leased %" PRIu32
		       " cached %" PRIu32, v->slot, pid, att_state(v), v->leased, v->cached);
		if (v->alive < 0)
			printf(" (%s)", strerror(-v->alive));
		if (!v->alive && v->dead_for_ms >= 0)
			printf(" found dead %" PRId64 " ms ago", v->dead_for_ms);
		for (uint32_t k = 0; k < v->nsteps; k++)
			printf(" step %" PRIu32 ": %" PRIu32 " from buffer %" PRIu32, v->steps[k].step,
			       v->steps[k].count, v->steps[k].first);
		printf("\n");
		if (v->xdp > 0)
			printf("xdp frames:      slot %" PRIu32 " sockets %" PRIu32 " fill %" PRIu32
			       " kernel-rx %" PRIu32 " rx %" PRIu32 " leased %" PRIu32 " tx %" PRIu32
			       " kernel-tx %" PRIu32 " completion %" PRIu32 "\n", v->slot,
			       v->xdp_sockets, v->xdp_place[AP_XS_FILL], v->xdp_place[AP_XS_KERNEL_RX],
			       v->xdp_place[AP_XS_RX], v->xdp_leased, v->xdp_place[AP_XS_TX],
			       v->xdp_place[AP_XS_KERNEL_TX], v->xdp_place[AP_XS_COMPLETION]);
		else if (v->xdp < 0)
			printf("xdp frames:      slot %" PRIu32 " unknown (%s)\n", v->slot, v->xdp_why);
	}
	if (a->held_leased[0] || a->held_cached[0])
		printf("unattached:      leased %" PRIu32 " cached %" PRIu32 "\n",
		       a->held_leased[0], a->held_cached[0]);
	if (in->stray_leased || in->stray_cached)
		printf("bad holders:     leased %" PRIu32 " cached %" PRIu32 "\n",
		       in->stray_leased, in->stray_cached);
	if (in->nchan)
		printf("channels:        %" PRIu32 " of %" PRIu32 " entries, %" PRIu32
		       " buffers queued\n", in->nchan, in->h.channel_capacity, a->queued);
	for (uint32_t c = 0; c < in->nchan; c++) {
		const struct chan_view *v = &in->chan[c];

		printf("channel:         %" PRIu32 " depth %" PRIu32, c, v->depth);
		if (v->send.word)
			printf(" send slot %" PRIu32 " %s", v->send.slot, v->send.state);
		else
			printf(" send free");
		if (v->recv.word)
			printf(" recv slot %" PRIu32 " %s", v->recv.slot, v->recv.state);
		else
			printf(" recv free");
		printf(" sent %" PRIu64 " received %" PRIu64 " full %" PRIu64 " corruptions %" PRIu64
		       " reclaimed %" PRIu64, v->sent, v->received, v->full, v->corruptions,
		       v->reclaimed);
		printf(" redelivery %" PRIu32 " redelivered %" PRIu64 " bad_spans %" PRIu64,
		       v->redo_depth, v->redelivered, v->bad_spans);
		if (v->step_n)
			printf(" send in flight %" PRIu32, v->step_n);
		printf("\n");
	}
	if (!in->audit)
		printf("freelist:        consistent\n");
	else if (a->problem_index != AP_FL_END)
		printf("freelist:        INCONSISTENT: %s (at buffer %" PRIu32 ")\n",
		       a->problem, a->problem_index);
	else
		printf("freelist:        INCONSISTENT: %s\n", a->problem);
}

/* ---- JSON: one object on one line ---- */
static void json_str(const char *s)
{
	putchar('"');
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			printf("\\%c", *p);
		else if (*p < 0x20)
			printf("\\u%04x", *p);
		else
			putchar(*p);
	}
	putchar('"');
}

static void print_json(const struct inspection *in)
{
	const struct ap_pool_header *h = &in->h;
	const struct ap_audit *a = &in->a;
	const char *v = in->shrank ? "invalid" : in->stage != SEEN_ALL ? "invalid" :
			in->audit ? "inconsistent" : "consistent";

	printf("{\"object\":");
	json_str(in->what);
	printf(",\"size\":%zu,\"verdict\":\"%s\"", in->size, v);
	if (in->shrank)
		printf(",\"error\":\"SIGBUS: the object shrank while it was read\"");
	if (in->stage == SEEN_SIZE)
		printf(",\"error\":\"too small for a header\"");
	if (in->stage >= SEEN_MAGIC)
		printf(",\"magic\":%" PRIu32, in->magic);
	if (in->error) {
		printf(",\"error\":");
		json_str(tool_pool_error(in->error));
	}
	if (in->stage >= SEEN_HEADER)
		printf(",\"header\":{\"version\":%" PRIu32 ",\"header_size\":%" PRIu32
		       ",\"flags\":%" PRIu32 ",\"storage_size\":%" PRIu64 ",\"buffer_size\":%" PRIu64
		       ",\"buffer_count\":%" PRIu32 ",\"attach_slots\":%" PRIu32
		       ",\"head_offset\":%" PRIu64 ",\"counters_offset\":%" PRIu64
		       ",\"next_offset\":%" PRIu64 ",\"link_offset\":%" PRIu64
		       ",\"depth_offset\":%" PRIu64
		       ",\"attach_offset\":%" PRIu64 ",\"valid\":%s}",
		       h->version, h->header_size, h->flags, h->storage_size, h->buffer_size,
		       h->buffer_count, h->attach_slots, h->head_offset, h->counters_offset,
		       h->next_offset, h->link_offset, h->depth_offset, h->attach_offset,
		       in->error ? "false" : "true");
	if (in->stage == SEEN_ALL) {
		if (in->buffers_here)
			printf(",\"buffers_offset\":%" PRIu64, in->buffers_off);
		if (a->head_index == AP_FL_END)
			printf(",\"head_index\":null");
		else
			printf(",\"head_index\":%" PRIu32, a->head_index);
		printf(",\"bad_releases\":%" PRIu64 ",\"corruptions\":%" PRIu64 ",\"empty\":%" PRIu64
		       ",\"head_empty\":%s,\"head_tag\":%" PRIu32
		       ",\"waiters\":%s,\"wait_word\":%" PRIu32 ",\"flush_requests\":%" PRIu32
		       ",\"capacity\":%" PRIu32 ",\"available\":%" PRIu32 ",\"free\":%" PRIu32
		       ",\"leased\":%" PRIu32 ",\"cached\":%" PRIu32 ",\"lost\":%" PRIu32
		       ",\"unattached_leased\":%" PRIu32 ",\"unattached_cached\":%" PRIu32
		       ",\"bad_holder_leased\":%" PRIu32 ",\"bad_holder_cached\":%" PRIu32,
		       in->bad_releases, in->corruptions, in->empty,
		       a->head_index == AP_FL_END ? "true" : "false", a->head_tag,
		       in->wait & AP_WAIT_WAITERS ? "true" : "false", in->wait, in->flush,
		       h->buffer_count, a->free, a->free, a->leased, a->cached, a->lost,
		       a->held_leased[0], a->held_cached[0], in->stray_leased, in->stray_cached);
		if (a->problem) {
			printf(",\"problem\":");
			json_str(a->problem);
			if (a->problem_index != AP_FL_END)
				printf(",\"problem_index\":%" PRIu32, a->problem_index);
		}
		printf(",\"queued\":%" PRIu32 ",\"channel_capacity\":%" PRIu32 ",\"channels\":[",
		       a->queued, h->channel_capacity);
		for (uint32_t c = 0; c < in->nchan; c++) {
			const struct chan_view *cv = &in->chan[c];

			printf("%s{\"channel\":%" PRIu32 ",\"depth\":%" PRIu32, c ? "," : "", c,
			       cv->depth);
			for (int e = 0; e < 2; e++) {
				const struct end_view *x = e ? &cv->recv : &cv->send;

				printf(",\"%s\":", e ? "recv" : "send");
				if (x->word)
					printf("{\"slot\":%" PRIu32 ",\"state\":\"%s\"}", x->slot,
					       x->state);
				else
					printf("null");
			}
			printf(",\"sent\":%" PRIu64 ",\"received\":%" PRIu64 ",\"full\":%" PRIu64
			       ",\"corruptions\":%" PRIu64 ",\"reclaimed\":%" PRIu64
			       ",\"in_flight\":%" PRIu32 ",\"redelivery_depth\":%" PRIu32
			       ",\"redelivered\":%" PRIu64 ",\"bad_spans\":%" PRIu64 "}", cv->sent,
			       cv->received, cv->full, cv->corruptions, cv->reclaimed, cv->step_n,
			       cv->redo_depth, cv->redelivered, cv->bad_spans);
		}
		printf("]");
		printf(",\"attachments\":[");
		for (uint32_t i = 0; i < in->natt; i++) {
			const struct att_view *t = &in->att[i];

			printf("%s{\"slot\":%" PRIu32, i ? "," : "", t->slot);
			if (t->pid_known)
				printf(",\"pid\":%" PRIu32, t->pid);
			else
				printf(",\"pid\":null");
			printf(",\"pid_recorded\":%" PRIu32 ",\"state\":\"%s\""
			       ",\"leased\":%" PRIu32 ",\"cached\":%" PRIu32, t->pid, att_state(t),
			       t->leased, t->cached);
			if (!t->alive && t->dead_for_ms >= 0)
				printf(",\"dead_for_ms\":%" PRId64, t->dead_for_ms);
			printf(",\"steps\":[");
			for (uint32_t k = 0; k < t->nsteps; k++)
				printf("%s{\"step\":%" PRIu32 ",\"first\":%" PRIu32 ",\"count\":%" PRIu32 "}",
				       k ? "," : "", t->steps[k].step, t->steps[k].first,
				       t->steps[k].count);
			printf("]");
			if (t->xdp > 0)
				printf(",\"xdp\":{\"known\":true,\"sockets\":%" PRIu32 ",\"fill\":%" PRIu32
				       ",\"kernel_rx\":%" PRIu32 ",\"rx\":%" PRIu32 ",\"leased\":%" PRIu32
				       ",\"tx\":%" PRIu32 ",\"kernel_tx\":%" PRIu32 ",\"completion\":%" PRIu32
				       "}", t->xdp_sockets, t->xdp_place[AP_XS_FILL],
				       t->xdp_place[AP_XS_KERNEL_RX], t->xdp_place[AP_XS_RX], t->xdp_leased,
				       t->xdp_place[AP_XS_TX], t->xdp_place[AP_XS_KERNEL_TX],
				       t->xdp_place[AP_XS_COMPLETION]);
			else if (t->xdp < 0) {
				printf(",\"xdp\":{\"known\":false,\"why\":");
				json_str(t->xdp_why);
				printf("}");
			}
			printf("}");
		}
		printf("]");
	}
	printf("}\n");
}

int cmd_inspect(int argc, char **argv)
{
	struct inspection *in;
	struct tool_args a;
	struct stat st;
	const char *what;
	bool json = false;
	void *mem;
	int fd, rc;

	if ((rc = tool_options(argc, argv, 1, inspect_usage, &a)) != TOOL_GO)
		return rc;
	what = argv[a.first];
	json = a.given['j'];
	if (tool_is_shm_name(what))
		fd = shm_open(what, O_RDONLY | O_CLOEXEC, 0);
	else
		fd = open(what, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		fprintf(stderr, "asyncpool: %s: %s\n", what, strerror(errno));
		return TOOL_EXIT_FAILURE;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		fprintf(stderr, "asyncpool: %s: not a shared memory object or file\n", what);
		close(fd);
		return TOOL_EXIT_FAILURE;
	}
	in = calloc(1, sizeof(*in));
	if (!in) {
		fprintf(stderr, "asyncpool: out of memory\n");
		close(fd);
		return TOOL_EXIT_FAILURE;
	}
	in->what = what;
	in->size = (uintmax_t)st.st_size > SIZE_MAX ? SIZE_MAX : (size_t)st.st_size;
	mem = in->size ? mmap(NULL, in->size, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
	if (mem == MAP_FAILED) {
		fprintf(stderr, "asyncpool: %s: mmap: %s\n", what, strerror(errno));
		close(fd);
		free(in->chan);
		free(in);
		return TOOL_EXIT_FAILURE;
	}
	rc = mem ? inspect_guarded(in, mem, fd) : 0;
	if (mem)
		munmap(mem, in->size);
	close(fd);
	if (rc) {
		fprintf(stderr, "asyncpool: %s\n", strerror(-rc));
		free(in->chan);
		free(in);
		return TOOL_EXIT_FAILURE;
	}
	if (json) {
		print_json(in);
	} else {
		print_text(in);
		if (in->shrank)
			printf("\nobject:          SIGBUS: the object shrank while it was read\n");
	}
	rc = verdict(in);
	free(in->chan);
	free(in);
	return rc;
}
