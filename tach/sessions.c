/* Finding and reading the live-counter segments. */
#include "sessions.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Larger than any segment this version writes, with room for growth; a file beyond it is
 * not mapped at all. */
#define MAX_SEGMENT_BYTES (1u << 20)

/* A segment's owner could cut its file short while we read the mapping, which the kernel
 * answers with SIGBUS; while a segment is being read, that ends the read instead of tach. */
static sigjmp_buf bus_jump;
static volatile sig_atomic_t bus_armed;

static void on_bus(int sig)
{
        if (bus_armed)
                siglongjmp(bus_jump, 1);
        signal(sig, SIG_DFL);
        raise(sig);
}

void tach_sessions_init(struct tach_sessions *s, const char *dir)
{
        memset(s, 0, sizeof(*s));
        s->dir = dir ? dir : "/dev/shm";
        struct sigaction sa = {.sa_handler = on_bus};
        sigemptyset(&sa.sa_mask);
        sigaction(SIGBUS, &sa, NULL);
}

/* ds_live_parse, with a SIGBUS from a shrunken file turned into a note. */
static int guarded_parse(const void *mem, size_t len, struct ds_live_view *view, char *why,
                         size_t why_len)
{
        if (sigsetjmp(bus_jump, 1)) {
                bus_armed = 0;
                snprintf(why, why_len, "its file shrank while being read");
                return -EINVAL;
        }
        bus_armed = 1;
        int rc = ds_live_parse(mem, len, view, why, why_len);
        bus_armed = 0;
        return rc;
}

static void unmap(struct tach_session *t)
{
        if (t->mem)
                munmap((void *)t->mem, t->len);
        t->mem = NULL;
}

void tach_sessions_free(struct tach_sessions *s)
{
        for (unsigned i = 0; i < s->count; i++) {
                unmap(s->list[i]);
                free(s->list[i]);
        }
        s->count = 0;
}

static void note(struct tach_sessions *s, const char *segment, const char *why)
{
        if (s->note_count == TACH_MAX_NOTES)
                return;
        struct tach_note *n = &s->notes[s->note_count++];
        snprintf(n->segment, sizeof(n->segment), "%.*s", (int)sizeof(n->segment) - 1, segment);
        snprintf(n->why, sizeof(n->why), "%s", why);
}

/* The pid in a name "dragstrip.<pid>", or 0 if the name is not one. */
static pid_t name_pid(const char *name)
{
        size_t prefix = strlen(DS_LIVE_PREFIX);
        if (strncmp(name, DS_LIVE_PREFIX, prefix) != 0)
                return 0;
        const char *digits = name + prefix;
        if (*digits < '1' || *digits > '9' || strlen(digits) > 9)
                return 0;
        char *end;
        long pid = strtol(digits, &end, 10);
        return *end ? 0 : (pid_t)pid;
}

static struct tach_session *find(struct tach_sessions *s, const char *segment)
{
        for (unsigned i = 0; i < s->count; i++)
                if (strcmp(s->list[i]->segment, segment) == 0)
                        return s->list[i];
        return NULL;
}

/* Maps the segment read-only. Returns 0, or a negative errno with why filled. Only
 * regular files of a sane size are mapped, and never through a symbolic link or a FIFO's
 * blocking open. */
static int map_segment(int dir_fd, const char *name, const void **mem, size_t *len, uint64_t *inode,
                       char *why, size_t why_len)
{
        int fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) {
                snprintf(why, why_len, "cannot open: %s", strerror(errno));
                return -errno;
        }
        struct stat st;
        int rc = -EINVAL;
        if (fstat(fd, &st) < 0) {
                rc = -errno;
                snprintf(why, why_len, "cannot stat: %s", strerror(errno));
        } else if (!S_ISREG(st.st_mode)) {
                snprintf(why, why_len, "not a regular file");
        } else if (st.st_size <= 0 || st.st_size > MAX_SEGMENT_BYTES) {
                snprintf(why, why_len, "%lld bytes, not the size of a segment",
                         (long long)st.st_size);
        } else {
                void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
                if (p == MAP_FAILED) {
                        rc = -errno;
                        snprintf(why, why_len, "cannot map: %s", strerror(errno));
                } else {
                        *mem = p;
                        *len = (size_t)st.st_size;
                        *inode = (uint64_t)st.st_ino;
                        rc = 0;
                }
        }
        close(fd);
        return rc;
}

static bool process_alive(pid_t pid)
{
        return kill(pid, 0) == 0 || errno == EPERM;
}

static void end_session(struct tach_session *t, uint64_t t_ns)
{
        unmap(t);
        if (t->ended)
                return;
        t->ended = true;
        t->ended_ns = t_ns;
        tach_series_stop(&t->rate);
        for (unsigned i = 0; i < DS_LIVE_SLOTS; i++)
                tach_series_stop(&t->slots[i].rate);
}

/* Moves the session's rates on with what its segment says now. */
static void update(struct tach_session *t, const struct ds_live_view *view, uint64_t t_ns)
{
        bool grew = view->counters.bytes != t->view.counters.bytes;
        if (!grew && t->rate.primed && view->start_ns && !view->end_ns) {
                uint64_t from = t->rate.last_ns > view->start_ns ? t->rate.last_ns : view->start_ns;
                t->idle_ns += t_ns > from ? t_ns - from : 0;
        }
        if (grew || !t->moved_ns)
                t->moved_ns = t_ns;
        t->view = *view;
        tach_series_sample(&t->rate, t_ns, view->counters.bytes);
        bool used[DS_LIVE_SLOTS] = {false};
        for (unsigned i = 0; i < view->slot_count; i++) {
                const struct ds_live_view_slot *v = &view->slots[i];
                struct tach_slot *slot = &t->slots[v->position];
                if (!slot->used || slot->generation != v->generation) {
                        memset(slot, 0, sizeof(*slot));
                        slot->used = true;
                        slot->generation = v->generation;
                }
                used[v->position] = true;
                tach_series_sample(&slot->rate, t_ns, v->counters.bytes);
                if (v->ended)
                        tach_series_stop(&slot->rate);
        }
        for (unsigned i = 0; i < DS_LIVE_SLOTS; i++)
                if (!used[i])
                        t->slots[i].used = false;
        if (view->state == DS_LIVE_DONE)
                end_session(t, t_ns);
}

/* Reads the session's mapping once more; false (with a note) if it no longer parses. */
static bool reread(struct tach_sessions *s, struct tach_session *t, uint64_t t_ns)
{
        static struct ds_live_view view; /* 17 KB: off the stack */
        char why[128] = "";
        int rc = guarded_parse(t->mem, t->len, &view, why, sizeof(why));
        if (rc == -EAGAIN)
                return true;
        if (rc == 0 && view.pid != t->view.pid && t->view.pid != 0)
                snprintf(why, sizeof(why), "its pid changed to %d", view.pid);
        else if (rc == 0) {
                update(t, &view, t_ns);
                return true;
        }
        note(s, t->segment, why);
        return false;
}

static void drop(struct tach_sessions *s, struct tach_session *t)
{
        unsigned i = 0;
        while (i < s->count && s->list[i] != t)
                i++;
        if (i < s->count)
                s->list[i] = s->list[--s->count];
        unmap(t);
        free(t);
}

/* Takes in a new segment (or a new file under a name already watched). */
static void look_new(struct tach_sessions *s, int dir_fd, const char *name, pid_t pid,
                     uint64_t t_ns)
{
        const void *mem = NULL;
        size_t len = 0;
        uint64_t inode = 0;
        char why[128] = "";
        if (map_segment(dir_fd, name, &mem, &len, &inode, why, sizeof(why)) < 0) {
                note(s, name, why);
                return;
        }
        struct tach_session *t = find(s, name);
        if (t) { /* the name was reused: forget the old session */
                unmap(t);
        } else if (s->count == TACH_MAX_SESSIONS || !(t = malloc(sizeof(*t)))) {
                munmap((void *)mem, len);
                note(s, name, "too many sessions to watch");
                return;
        } else {
                s->list[s->count++] = t;
        }
        memset(t, 0, sizeof(*t));
        snprintf(t->segment, sizeof(t->segment), "%.*s", (int)sizeof(t->segment) - 1, name);
        t->mem = mem;
        t->len = len;
        t->inode = inode;
        t->seen = true;
        bool ok = reread(s, t, t_ns);
        if (ok && t->view.pid == pid)
                return;
        if (ok && t->view.pid != 0) {
                snprintf(why, sizeof(why), "says pid %d in a segment named for %d", t->view.pid,
                         (int)pid);
                note(s, name, why);
        }
        /* Not (yet) a session: one still being filled in is taken at the next look. */
        drop(s, t);
}

static void look_one(struct tach_sessions *s, int dir_fd, const char *name, uint64_t t_ns)
{
        pid_t pid = name_pid(name);
        if (pid == 0)
                return; /* dragstrip.* but not a segment's name: not ours to judge */
        struct stat st;
        if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return; /* gone since the directory was read */
        struct tach_session *t = find(s, name);
        if (!process_alive(pid)) {
                if (t)
                        t->seen = false; /* its process is gone: the session has ended */
                return; /* a segment left by a killed process; the next tool sweeps it */
        }
        if (t && t->mem && t->inode == (uint64_t)st.st_ino && (size_t)st.st_size >= t->len) {
                t->seen = reread(s, t, t_ns);
                return;
        }
        if (t && !t->mem && t->inode == (uint64_t)st.st_ino)
                return; /* ended, and its file not yet removed */
        look_new(s, dir_fd, name, pid, t_ns);
}

void tach_sessions_look(struct tach_sessions *s, uint64_t t_ns)
{
        s->note_count = 0;
        for (unsigned i = 0; i < s->count; i++)
                s->list[i]->seen = false;
        DIR *dir = opendir(s->dir);
        if (dir) {
                struct dirent *e;
                while ((e = readdir(dir)) != NULL)
                        look_one(s, dirfd(dir), e->d_name, t_ns);
                closedir(dir);
        }
        unsigned kept = 0;
        for (unsigned i = 0; i < s->count; i++) {
                struct tach_session *t = s->list[i];
                if (!t->seen && !t->ended && t->mem)
                        reread(s, t, t_ns); /* the final counts, from the mapping we hold */
                if (!t->seen)
                        end_session(t, t_ns);
                if (t->ended && t_ns - t->ended_ns >= (uint64_t)TACH_LINGER_S * 1000000000u) {
                        unmap(t);
                        free(t);
                        continue;
                }
                s->list[kept++] = t;
        }
        s->count = kept;
}

/* When the session's transfer stopped, or now while it runs. */
static uint64_t session_end(const struct tach_session *t, uint64_t now_ns)
{
        return !t->ended ? now_ns : t->view.end_ns ? t->view.end_ns : t->moved_ns;
}

double tach_session_seconds(const struct tach_session *t, uint64_t now_ns)
{
        uint64_t end = session_end(t, now_ns);
        return t->view.start_ns && end > t->view.start_ns ? (double)(end - t->view.start_ns) / 1e9
                                                          : 0;
}

double tach_session_average(const struct tach_session *t, uint64_t now_ns)
{
        uint64_t end = session_end(t, now_ns);
        if (!t->view.start_ns || end <= t->view.start_ns + t->idle_ns)
                return 0;
        return tach_average(t->view.counters.bytes, t->view.start_ns + t->idle_ns, end);
}

double tach_session_peak(const struct tach_session *t, uint64_t now_ns)
{
        double average = tach_session_average(t, now_ns);
        return t->rate.peak > average ? t->rate.peak : average;
}

const char *tach_sort_name(enum tach_sort by)
{
        static const char *const names[TACH_SORTS] = {"rate", "total", "tool", "pid"};
        return (unsigned)by < TACH_SORTS ? names[by] : "?";
}

static enum tach_sort sort_by;

static int compare(const void *a, const void *b)
{
        const struct tach_session *x = *(struct tach_session *const *)a;
        const struct tach_session *y = *(struct tach_session *const *)b;
        if (x->ended != y->ended)
                return x->ended ? 1 : -1;
        int c = 0;
        switch (sort_by) {
        case TACH_SORT_RATE:
                c = (y->rate.now > x->rate.now) - (y->rate.now < x->rate.now);
                break;
        case TACH_SORT_TOTAL:
                c = (y->view.counters.bytes > x->view.counters.bytes) -
                    (y->view.counters.bytes < x->view.counters.bytes);
                break;
        case TACH_SORT_TOOL:
                c = strcmp(x->view.tool, y->view.tool);
                break;
        default:
                break;
        }
        return c ? c : (x->view.pid > y->view.pid) - (x->view.pid < y->view.pid);
}

void tach_sessions_sort(struct tach_sessions *s, enum tach_sort by)
{
        sort_by = by;
        qsort(s->list, s->count, sizeof(s->list[0]), compare);
}
