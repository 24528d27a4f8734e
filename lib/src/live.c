/* Live counters in a shared-memory segment /dev/shm/dragstrip.<pid>. */
#include <dragstrip/live.h>

#include <dragstrip/error.h>

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <dragstrip/clock.h>

struct ds_live {
        struct ds_live_segment *seg;
        bool shared;
        char name[32]; /* shm name, "/dragstrip.<pid>" */
};

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
        int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0644);
        if (fd < 0 && errno == EEXIST && shm_unlink(name) == 0)
                fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0644);
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
        if (ftruncate(fd, sizeof(struct ds_live_segment)) < 0)
                rc = -errno;
        else
                p = mmap(NULL, sizeof(struct ds_live_segment), PROT_READ | PROT_WRITE, MAP_SHARED,
                         fd, 0);
        if (rc == 0 && p == MAP_FAILED)
                rc = -errno;
        /* The mapping keeps the segment; the descriptor is no longer needed. */
        if (close(fd) < 0 && rc == 0)
                rc = -errno;
        if (rc < 0) {
                if (p != MAP_FAILED)
                        munmap(p, sizeof(struct ds_live_segment));
                shm_unlink(live->name);
                return rc;
        }
        live->seg = p;
        live->shared = true;
        return 0;
}

int ds_live_open(struct ds_live **out, const char *tool, const char *role, const char *link,
                 int *shared, struct ds_error *err)
{
        struct ds_live *live = calloc(1, sizeof(*live));
        if (!live)
                return ds_fail(err, -ENOMEM, "live counters");

        /* Without shared memory the tool still counts and reports; only tach is blind. */
        if (map_shared(live) < 0) {
                live->seg = calloc(1, sizeof(*live->seg));
                if (!live->seg) {
                        free(live);
                        return ds_fail(err, -ENOMEM, "live counters");
                }
        }

        struct ds_live_segment *seg = live->seg;
        seg->version = DS_LIVE_VERSION;
        seg->pid = (int32_t)getpid();
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
                munmap(live->seg, sizeof(*live->seg));
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
        live->seg->start_ns = ds_now_ns();
        atomic_store_explicit(&live->seg->state, DS_LIVE_RUNNING, memory_order_release);
}

void ds_live_done(struct ds_live *live)
{
        atomic_store_explicit(&live->seg->state, DS_LIVE_DONE, memory_order_release);
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
