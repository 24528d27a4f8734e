/* Live counters in a shared-memory segment /dev/shm/dragstrip.<pid>. */
#include <dragstrip/live.h>

#include <dragstrip/error.h>

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <dragstrip/clock.h>

/* The slots begin on a 128-byte boundary, so each has its cache lines to itself. */
#define SLOT_OFFSET ((sizeof(struct ds_live_segment) + 127u) & ~(size_t)127u)
#define SHARED_SIZE (SLOT_OFFSET + DS_LIVE_SLOTS * sizeof(struct ds_live_slot))

_Static_assert(sizeof(struct ds_live_slot) == 128, "a slot is two cache lines");

struct ds_live {
        struct ds_live_segment *seg;
        bool shared;
        char name[32]; /* shm name, "/dragstrip.<pid>" */
};

static atomic_bool publishing_disabled;

void ds_live_disable(void)
{
        atomic_store(&publishing_disabled, true);
}

/* Whether the option word arg takes the next word as its value, as getopt_long reads it
 * with the tool's shorts and longs (an abbreviated long name included). */
static bool takes_next_word(const char *arg, const char *shorts, const struct option *longs)
{
        if (arg[1] == '-') {
                const char *name = arg + 2;
                size_t len = strlen(name);
                const struct option *abbreviated = NULL;
                if (strchr(name, '='))
                        return false;
                for (const struct option *o = longs; o && o->name; o++) {
                        if (strcmp(o->name, name) == 0)
                                return o->has_arg == required_argument;
                        if (!abbreviated && strncmp(o->name, name, len) == 0)
                                abbreviated = o;
                }
                return abbreviated && abbreviated->has_arg == required_argument;
        }
        for (const char *c = arg + 1; *c; c++) {
                const char *spec = *c == ':' ? NULL : strchr(shorts, *c);
                /* Its value is the rest of the word, else (unless optional) the next word. */
                if (spec && spec[1] == ':')
                        return c[1] == '\0' && spec[2] != ':';
        }
        return false;
}

int ds_live_take_option(int argc, char **argv, const char *shorts, const struct option *longs)
{
        int kept = 1, i = 1;
        for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
                if (strcmp(argv[i], "--no-stats") == 0) {
                        ds_live_disable();
                        continue;
                }
                argv[kept++] = argv[i];
                if (argv[i][0] == '-' && argv[i][1] && i + 1 < argc &&
                    takes_next_word(argv[i], shorts, longs))
                        argv[kept++] = argv[++i]; /* a value, whatever it reads like */
        }
        while (i < argc)
                argv[kept++] = argv[i++];
        argv[kept] = NULL;
        return kept;
}

const char *ds_fault_name(enum ds_fault fault)
{
        static const char *const names[DS_FAULT_COUNT] = {
            [DS_FAULT_LOST] = "lost",           [DS_FAULT_DUP] = "dup",
            [DS_FAULT_REORDERED] = "reordered", [DS_FAULT_CORRUPT] = "corrupt",
            [DS_FAULT_MALFORMED] = "malformed",
        };
        if ((unsigned)fault >= DS_FAULT_COUNT)
                return "unknown";
        return names[fault];
}

/* Copies text into a fixed field, always NUL-terminated, cut short if it must be. */
static void set_text(char *field, size_t size, const char *text)
{
        snprintf(field, size, "%s", text ? text : "");
}

/* Removes the segments of processes that are gone: a tool killed by a signal never
 * reaches ds_live_close, and without this /dev/shm would fill with them. A process in
 * another pid namespace sharing /dev/shm would look gone too; dragstrip's tests and tools
 * share one. */
static void sweep_stale(void)
{
        DIR *dir = opendir("/dev/shm");
        if (!dir)
                return;
        size_t prefix_len = strlen(DS_LIVE_PREFIX);
        struct dirent *entry;
        while ((entry = readdir(dir)) != NULL) {
                if (strncmp(entry->d_name, DS_LIVE_PREFIX, prefix_len) != 0)
                        continue;
                const char *digits = entry->d_name + prefix_len;
                char *end;
                errno = 0;
                long pid = strtol(digits, &end, 10);
                if (*digits < '1' || *digits > '9' || *end || errno || pid > INT32_MAX)
                        continue;
                if (kill((pid_t)pid, 0) < 0 && errno == ESRCH) {
                        char name[sizeof(entry->d_name) + 1];
                        snprintf(name, sizeof(name), "/%s", entry->d_name);
                        shm_unlink(name); /* another tool may have swept it first */
                }
        }
        closedir(dir);
}

/* O_EXCL: a segment with our pid can only be left by a dead process whose pid we now
 * reuse, so remove it and try once more. */
static int create_segment(const char *name)
{
        /* Owner only: a peer's address and what moves are nobody else's business. */
        int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
        if (fd < 0 && errno == EEXIST && shm_unlink(name) == 0)
                fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
        return fd < 0 ? -errno : fd;
}

static int map_shared(struct ds_live *live)
{
        sweep_stale();
        snprintf(live->name, sizeof(live->name), "/%s%d", DS_LIVE_PREFIX, (int)getpid());
        int fd = create_segment(live->name);
        if (fd < 0)
                return fd;

        int rc = 0;
        void *p = MAP_FAILED;
        if (ftruncate(fd, SHARED_SIZE) < 0)
                rc = -errno;
        else
                p = mmap(NULL, SHARED_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (rc == 0 && p == MAP_FAILED)
                rc = -errno;
        /* The mapping keeps the segment; the descriptor is no longer needed. */
        if (close(fd) < 0 && rc == 0)
                rc = -errno;
        if (rc < 0) {
                if (p != MAP_FAILED)
                        munmap(p, SHARED_SIZE);
                shm_unlink(live->name);
                return rc;
        }
        live->seg = p;
        live->shared = true;
        live->seg->slot_count = DS_LIVE_SLOTS;
        return 0;
}

int ds_live_open(struct ds_live **out, const char *tool, const char *role, const char *link,
                 int *shared, struct ds_error *err)
{
        struct ds_live *live = calloc(1, sizeof(*live));
        if (!live)
                return ds_fail(err, -ENOMEM, "live counters");

        /* Without shared memory the tool still counts and reports; only tach is blind. */
        if (atomic_load(&publishing_disabled) || map_shared(live) < 0) {
                live->seg = calloc(1, sizeof(*live->seg));
                if (!live->seg) {
                        free(live);
                        return ds_fail(err, -ENOMEM, "live counters");
                }
        }

        struct ds_live_segment *seg = live->seg;
        seg->version = DS_LIVE_VERSION;
        seg->pid = (int32_t)getpid();
        seg->slot_offset = (uint32_t)SLOT_OFFSET;
        seg->slot_size = sizeof(struct ds_live_slot);
        seg->fault_count = DS_FAULT_COUNT;
        atomic_store_explicit(&seg->state, DS_LIVE_STARTING, memory_order_relaxed);
        set_text(seg->tool, sizeof(seg->tool), tool);
        set_text(seg->role, sizeof(seg->role), role);
        set_text(seg->link, sizeof(seg->link), link);
        /* The magic goes last: a reader that sees it sees a filled-in header. */
        atomic_thread_fence(memory_order_release);
        seg->magic = DS_LIVE_MAGIC;

        if (shared)
                *shared = live->shared;
        *out = live;
        return 0;
}

void ds_live_close(struct ds_live *live)
{
        if (!live)
                return;
        if (live->shared) {
                /* Unlink first so tach stops finding it; neither call fails on our own
                 * segment, and there is nothing to do at exit if one did. */
                shm_unlink(live->name);
                munmap(live->seg, SHARED_SIZE);
        } else {
                free(live->seg);
        }
        free(live);
}

void ds_live_set_peer(struct ds_live *live, const char *peer)
{
        set_text(live->seg->peer, sizeof(live->seg->peer), peer);
}

void ds_live_set_msg_size(struct ds_live *live, uint64_t msg_size)
{
        live->seg->msg_size = msg_size;
}

void ds_live_start(struct ds_live *live)
{
        struct timespec wall;
        clock_gettime(CLOCK_REALTIME, &wall);
        live->seg->start_unix_ns = (uint64_t)wall.tv_sec * 1000000000u + (uint64_t)wall.tv_nsec;
        live->seg->start_ns = ds_now_ns();
        atomic_store_explicit(&live->seg->state, DS_LIVE_RUNNING, memory_order_release);
}

void ds_live_done(struct ds_live *live)
{
        live->seg->end_ns = ds_now_ns();
        atomic_store_explicit(&live->seg->state, DS_LIVE_DONE, memory_order_release);
}

static struct ds_live_slot *slot_at(struct ds_live_segment *seg, unsigned i)
{
        return (struct ds_live_slot *)((char *)seg + seg->slot_offset) + i;
}

struct ds_live_slot *ds_live_slot_open(struct ds_live_segment *seg, enum ds_live_slot_kind kind,
                                       unsigned index, const char *name)
{
        /* Two passes: never-used slots first, so ended ones stay on show while there is
         * room; then ended ones, oldest occupant or not. */
        const uint32_t wanted[2] = {DS_SLOT_FREE, DS_SLOT_ENDED};
        for (int pass = 0; pass < 2; pass++) {
                for (unsigned i = 0; i < seg->slot_count; i++) {
                        struct ds_live_slot *slot = slot_at(seg, i);
                        uint32_t expect = wanted[pass];
                        if (!atomic_compare_exchange_strong(&slot->state, &expect, DS_SLOT_CLAIMED))
                                continue;
                        atomic_fetch_add(&slot->generation, 1);
                        slot->kind = kind;
                        slot->index = index;
                        set_text(slot->name, sizeof(slot->name), name);
                        atomic_store_explicit(&slot->messages, 0, memory_order_relaxed);
                        atomic_store_explicit(&slot->bytes, 0, memory_order_relaxed);
                        for (int f = 0; f < DS_FAULT_COUNT; f++)
                                atomic_store_explicit(&slot->faults[f], 0, memory_order_relaxed);
                        atomic_store_explicit(&slot->state, DS_SLOT_ACTIVE, memory_order_release);
                        return slot;
                }
        }
        return NULL;
}

void ds_live_slot_close(struct ds_live_slot *slot)
{
        if (slot)
                atomic_store_explicit(&slot->state, DS_SLOT_ENDED, memory_order_release);
}

struct ds_live_segment *ds_live_segment(struct ds_live *live)
{
        return live->seg;
}

void ds_live_read(const struct ds_live_segment *seg, struct ds_counters *out)
{
        out->messages = atomic_load_explicit(&seg->messages, memory_order_relaxed);
        out->bytes = atomic_load_explicit(&seg->bytes, memory_order_relaxed);
        for (int i = 0; i < DS_FAULT_COUNT; i++)
                out->faults[i] = atomic_load_explicit(&seg->faults[i], memory_order_relaxed);
}
