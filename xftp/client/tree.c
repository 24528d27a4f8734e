/* Many files in one job.
 *
 * First the plan: the sources walked on one control connection (listings of the server's
 * directories for a get, the local tree for a put) into one list of files, the local or
 * remote directories made on the way. Then the run: -j workers, each with a control
 * connection of its own, take the next file from the list until none is left, as lftp's
 * mirror does; per-file round trips overlap instead of adding up. A download is synced
 * with the others of its batch (part.h) rather than on its own. A file or directory that
 * fails is remembered and named at the end; the others go on. */
#include "tree.h"

#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dragstrip/clock.h>
#include <dragstrip/error.h>
#include <dragstrip/pool.h>

#include "listing.h"
#include "part.h"
#include "url.h"

#define PATH_ROOM 4096
/* What the listings of a tree may cost: those held at once down a path of nested
 * directories, and all of its entries together. */
#define LISTINGS_HELD_MAX (128u << 20)
#define TREE_ENTRIES_MAX  10000000u
#define TREE_DEPTH_MAX    64u /* directories nested deeper are not copied */
/* What the list of files may hold, its paths included: a hostile server's deep, long
 * names would otherwise make a few MB of listings into GBs of plan (about 5 million files
 * of ordinary names fit). */
#define PLAN_BYTES_MAX (1ull << 30)
#define FAILURES_SHOWN 100u /* failures named one by one; the rest are counted */
/* Files at once by default. A get of small files keeps both ends' CPUs busy: more than 4
 * at once was 7% slower here. A put waits on the server's two syncs of each file: 8 at
 * once was 7% faster than 4 (2,000 files of 64 KiB, paired runs). */
#define JOBS_GET 4u
#define JOBS_PUT 8u

struct tree_item {
        char *remote, *local;
        struct listing_facts facts; /* get: the remote file; put: what is there already */
        bool have_facts;
};

/* The list of files, and what could not go on it. Workers add failures: lock. */
struct plan {
        struct tree_item *items;
        size_t count, room;
        size_t dropped;      /* files taken off for another's destination: not copied */
        uint64_t bytes;      /* the sizes known, for the progress */
        uint64_t held_bytes; /* what the items and their paths take */
        size_t held;         /* bytes of the listings held down the current path */
        uint64_t seen;       /* entries of every listing so far */
        char *failures[FAILURES_SHOWN];
        unsigned failed;
        pthread_mutex_t lock;
};

struct job;

/* The run: workers, each a control connection, taking files from the plan in turn. Those
 * besides the first connection are hired while the plan is made, one for each file listed
 * past the connections there are, so that their logins (each a password hash on the
 * server: 22 ms of its CPU with yescrypt here) overlap the listings instead of holding
 * back the first files; they take no file before the plan is whole. */
struct run {
        struct job *job;
        bool get;
        const struct tree_login *login;
        struct job_totals *t;
        struct part_batch batch;
        _Atomic unsigned unnamed; /* files of the batch that took no name: not copied */
        _Atomic size_t next;
        pthread_mutex_t lock; /* t's sums, go, refused */
        pthread_cond_t told;  /* go changed */
        int go;               /* 0 while the plan is made; 1 when it is whole; -1 no run */
        unsigned wanted;      /* connections the run may use, the first one's among them */
        unsigned hired;       /* worker threads started */
        pthread_t threads[TREE_JOBS_MAX];
        unsigned refused; /* connections the server would not give */
        char refused_why[sizeof(((struct ds_error *)0)->text)];
};

/* The sources of one job, and where they go. */
struct job {
        struct ftp *ftp;  /* the first control connection: the plan is made on it */
        const char *pass; /* hidden in every failure named */
        const struct job_opts *o;
        struct plan plan;
        struct run run;
};

static bool stopping(const struct job_opts *o)
{
        return o->stop && atomic_load(o->stop);
}

/* Whether err says it ended the job: a stop, or a control connection out of step. */
static bool ends_job(const struct job *j, const struct ftp *ftp)
{
        return stopping(j->o) || ftp->broken;
}

/* Remembers that what (a path) was not copied, and why (which often names it already). */
static void plan_fail(struct plan *p, const char *what, const char *why)
{
        char *line = NULL;
        int n =
            strstr(why, what) ? asprintf(&line, "%s", why) : asprintf(&line, "%s: %s", what, why);
        pthread_mutex_lock(&p->lock);
        if (n >= 0 && p->failed < FAILURES_SHOWN) {
                p->failures[p->failed] = line;
                line = NULL;
        }
        p->failed++;
        pthread_mutex_unlock(&p->lock);
        free(line);
}

/* One more file for the run: size is what the progress expects of it. */
static int plan_add(struct plan *p, const char *remote, const char *local,
                    const struct listing_facts *facts, uint64_t size, struct ds_error *err)
{
        if (p->count == p->room) {
                size_t room = p->room ? 2 * p->room : 256;
                struct tree_item *more = realloc(p->items, room * sizeof(*more));
                if (!more)
                        return ds_fail(err, -ENOMEM, "the list of files");
                p->items = more;
                p->room = room;
        }
        uint64_t cost = sizeof(struct tree_item) + strlen(remote) + strlen(local) + 2;
        if (p->held_bytes + cost > PLAN_BYTES_MAX)
                return ds_fail(err, 0,
                               "%s: the list of files would pass %llu MiB: copy the tree "
                               "in parts",
                               remote, PLAN_BYTES_MAX >> 20),
                       -EFBIG;
        struct tree_item item = {.remote = strdup(remote), .local = strdup(local)};
        if (!item.remote || !item.local) {
                free(item.remote);
                free(item.local);
                return ds_fail(err, -ENOMEM, "the list of files");
        }
        item.have_facts = facts != NULL;
        item.facts = facts ? *facts : (struct listing_facts){.size = UINT64_MAX};
        p->items[p->count++] = item;
        p->held_bytes += cost;
        if (size != UINT64_MAX)
                p->bytes += size;
        return 0;
}

/* The files the job was asked for: those planned and those dropped from the plan. */
static size_t plan_files(const struct plan *p)
{
        return p->count + p->dropped;
}

static void plan_free(struct plan *p)
{
        for (size_t i = 0; i < p->count; i++) {
                free(p->items[i].remote);
                free(p->items[i].local);
        }
        free(p->items);
        for (unsigned i = 0; i < p->failed && i < FAILURES_SHOWN; i++)
                free(p->failures[i]);
        pthread_mutex_destroy(&p->lock);
}

static void *worker_main(void *arg);

/* One more file for the run (plan_add), and one more worker when the files outnumber the
 * connections. */
static int job_add(struct job *j, const char *remote, const char *local,
                   const struct listing_facts *facts, uint64_t size, struct ds_error *err)
{
        struct run *r = &j->run;
        int rc = plan_add(&j->plan, remote, local, facts, size, err);
        if (rc == 0 && j->plan.count > r->hired + 1 && r->hired + 1 < r->wanted &&
            pthread_create(&r->threads[r->hired], NULL, worker_main, r) == 0)
                r->hired++;
        return rc;
}

static int join(char *out, size_t room, const char *dir, const char *name)
{
        size_t len = strlen(dir);
        int n = len == 0              ? snprintf(out, room, "%s", name)
                : dir[len - 1] == '/' ? snprintf(out, room, "%s%s", dir, name)
                                      : snprintf(out, room, "%s/%s", dir, name);
        return n > 0 && (size_t)n < room ? 0 : -ENAMETOOLONG;
}

/* The last part of a path, after any '/' ("" for none). */
static const char *base_of(const char *path)
{
        const char *slash = strrchr(path, '/');
        return slash ? slash + 1 : path;
}

/* Whether path's last part names a directory whatever the server says of it: "dir/",
 * "." and ".." (and nothing at all) have no name a file could take here. */
static bool names_directory(const char *path)
{
        const char *last = base_of(path);
        return !*last || strcmp(last, ".") == 0 || strcmp(last, "..") == 0;
}

static bool has_glob(const char *path)
{
        return strpbrk(base_of(path), "*?[") != NULL;
}

/* Makes the directory local of a get, or takes the one there. Below the top, the names
 * are the server's: one that is there already must be a directory itself, never a link to
 * one, or the server could have files written wherever the link points. The top is the
 * user's own DEST, and may be a link. 0 or a negative errno with err filled. */
static int make_dir(const char *local, bool top, struct ds_error *err)
{
        struct stat st;
        if (mkdir(local, 0777) == 0)
                return 0;
        if (errno != EEXIST)
                return ds_fail(err, -errno, "mkdir %s", local);
        if ((top ? stat(local, &st) : lstat(local, &st)) < 0)
                return ds_fail(err, -errno, "%s", local);
        if (!S_ISDIR(st.st_mode))
                return ds_fail(err, 0, "%s exists and is not a directory%s: not written into",
                               local, S_ISLNK(st.st_mode) ? " (a symbolic link)" : ""),
                       -ENOTDIR;
        return 0;
}

/* The listing of the remote directory path (MLSD where offered), within what the tree
 * may still hold. 0 and *text of *lines (the caller frees it and gives back *len of the
 * budget), or a negative errno with err filled. */
static int list_remote(struct job *j, const char *path, char **text, size_t *len, size_t *lines,
                       struct ds_error *err)
{
        struct plan *p = &j->plan;
        size_t room = LISTINGS_HELD_MAX - p->held;
        int rc =
            transfer_listing(j->ftp, j->ftp->feat.mlst ? "MLSD" : "LIST", path,
                             room < LISTING_MAX ? room : LISTING_MAX, j->o, text, len, lines, err);
        if (rc == -EFBIG && room < LISTING_MAX)
                return ds_fail(err, 0, "%s: listings of nested directories over %u MiB together",
                               path, LISTINGS_HELD_MAX >> 20),
                       -EFBIG;
        if (rc < 0)
                return rc;
        p->seen += *lines;
        if (p->seen > TREE_ENTRIES_MAX) {
                free(*text);
                return ds_fail(err, 0, "%s: the tree lists over %u entries", path,
                               TREE_ENTRIES_MAX),
                       -EFBIG;
        }
        p->held += *len;
        return 0;
}

static int plan_remote_dir(struct job *j, const char *remote, const char *local, unsigned depth);

/* One entry of a remote listing, found under remote and going to local. */
static int plan_remote_entry(struct job *j, const char *remote, const char *local,
                             const struct listing_facts *facts, unsigned depth)
{
        struct ds_error err;
        if (!facts->is_dir && part_name_like(base_of(local))) {
                plan_fail(&j->plan, remote,
                          "a name xftp keeps for its partial downloads: not copied");
                return 0;
        }
        if (!facts->is_dir) {
                int rc = job_add(j, remote, local, facts, facts->size, &err);
                if (rc < 0) /* what ends the walk: remembered last, the job's error */
                        plan_fail(&j->plan, remote, err.text);
                return rc;
        }
        if (!j->o->recursive) {
                plan_fail(&j->plan, remote, "a directory (-r copies directories)");
                return 0;
        }
        return plan_remote_dir(j, remote, local, depth + 1);
}

/* The entries of a listing of the remote directory dir (those whose names match pattern,
 * or all when it is NULL) into the plan, each to local/NAME; *matched counts them. */
static int plan_entries(struct job *j, char *text, const char *dir, const char *local,
                        const char *pattern, unsigned depth, unsigned *matched)
{
        char *save;
        int rc = 0;
        for (char *line = strtok_r(text, "\n", &save); line && rc == 0;
             line = strtok_r(NULL, "\n", &save)) {
                char *name, r[PATH_ROOM], l[PATH_ROOM];
                struct listing_facts facts;
                const char *left_out;
                bool usable = listing_entry(line, j->ftp->feat.mlst, &name, &facts, &left_out);
                if ((!usable && !left_out) || (pattern && fnmatch(pattern, name, 0) != 0))
                        continue;
                (*matched)++;
                bool joined = join(r, sizeof(r), dir, name) == 0;
                if (!usable) /* named, as put -r names what it leaves out */
                        plan_fail(&j->plan, joined ? r : dir, left_out);
                else if (!joined || join(l, sizeof(l), local, name) < 0)
                        plan_fail(&j->plan, dir, "a name too long to copy");
                else
                        rc = plan_remote_entry(j, r, l, &facts, depth);
        }
        return rc;
}

/* Walks the remote directory into the plan, making the local directories. Failures below
 * are remembered; a negative errno only for what ends the job. */
static int plan_remote_dir(struct job *j, const char *remote, const char *local, unsigned depth)
{
        struct ds_error err;
        char *text = NULL;
        size_t len = 0, lines;

        if (depth > TREE_DEPTH_MAX) {
                plan_fail(&j->plan, remote, "deeper than 64 directories: not copied");
                return 0;
        }
        int rc = list_remote(j, remote, &text, &len, &lines, &err);
        if (rc == 0 && (rc = make_dir(local, depth == 0, &err)) < 0)
                free(text);
        if (rc < 0) {
                plan_fail(&j->plan, remote, err.text);
                return ends_job(j, j->ftp) || rc == -EFBIG ? rc : 0;
        }
        unsigned matched = 0;
        rc = plan_entries(j, text, remote, local, NULL, depth, &matched);
        j->plan.held -= len;
        free(text);
        return rc;
}

/* The entries of remote directory dir whose names match pattern, each to dest/NAME. */
static int plan_remote_glob(struct job *j, const char *path, const char *dest)
{
        struct ds_error err;
        char dir[PATH_ROOM], *text = NULL;
        const char *pattern = base_of(path);
        size_t len = 0, lines;
        unsigned matched = 0;

        snprintf(dir, sizeof(dir), "%.*s", (int)(pattern - path), path);
        int rc = list_remote(j, dir, &text, &len, &lines, &err);
        if (rc < 0) {
                plan_fail(&j->plan, path, err.text);
                return ends_job(j, j->ftp) ? rc : 0;
        }
        rc = plan_entries(j, text, dir, dest, pattern, 0, &matched);
        j->plan.held -= len;
        free(text);
        if (rc == 0 && matched == 0)
                plan_fail(&j->plan, path, "nothing on the server matches");
        return rc;
}

/* Whether the remote path is to be walked as a directory under -r: unless MLST says it is
 * a file (a server without MLST, or whose MLST says nothing clear, has it listed, as a
 * listing will tell). */
static bool remote_is_dir(struct job *j, const char *path)
{
        struct listing_facts facts;
        struct ds_error ignored;
        if (names_directory(path) || !j->ftp->feat.mlst)
                return true;
        return ftp_mlst(j->ftp, path, &facts, &ignored) != 0 || facts.is_dir;
}

/* The facts of a remote directory's entries, by name (put --update). */
struct remote_dir {
        char *text;
        struct named_facts {
                const char *name;
                struct listing_facts facts;
        } * entries;
        size_t count;
};

static int by_name(const void *a, const void *b)
{
        return strcmp(((const struct named_facts *)a)->name, ((const struct named_facts *)b)->name);
}

/* Lists the remote directory path into dir; a directory that cannot be listed (it is
 * new) leaves dir empty. */
static void remote_dir_read(struct job *j, const char *path, struct remote_dir *dir)
{
        struct ds_error ignored;
        size_t len = 0, lines;
        *dir = (struct remote_dir){0};
        if (list_remote(j, path, &dir->text, &len, &lines, &ignored) < 0)
                return;
        j->plan.held -= len; /* held only while its directory is walked: given back at once,
                              * the walk of a put is bounded by the local tree */
        dir->entries = calloc(lines + 1, sizeof(*dir->entries)); /* a last line without LF */
        char *save;
        for (char *line = strtok_r(dir->text, "\n", &save); line && dir->entries;
             line = strtok_r(NULL, "\n", &save)) {
                struct named_facts *e = &dir->entries[dir->count];
                char *name;
                if (listing_entry(line, j->ftp->feat.mlst, &name, &e->facts, NULL)) {
                        e->name = name;
                        dir->count++;
                }
        }
        if (dir->entries)
                qsort(dir->entries, dir->count, sizeof(*dir->entries), by_name);
}

/* What the remote directory says of name: its facts, or "not there" (size unknown). */
static struct listing_facts remote_dir_find(const struct remote_dir *dir, const char *name)
{
        struct named_facts key = {.name = name};
        const struct named_facts *e =
            dir->count ? bsearch(&key, dir->entries, dir->count, sizeof(key), by_name) : NULL;
        return e && !e->facts.is_dir ? e->facts : (struct listing_facts){.size = UINT64_MAX};
}

static int plan_local_dir(struct job *j, const char *local, const char *remote, unsigned depth);

/* One local path to remote: a file on the list, a directory walked (-r). there: what the
 * remote directory holds (NULL: not looked at). */
static int plan_local_entry(struct job *j, const char *local, const char *remote,
                            const struct listing_facts *there, unsigned depth)
{
        struct ds_error err;
        struct stat st;
        if (lstat(local, &st) < 0) {
                plan_fail(&j->plan, local, strerror(errno));
                return 0;
        }
        if (S_ISDIR(st.st_mode)) {
                if (j->o->recursive)
                        return plan_local_dir(j, local, remote, depth + 1);
                plan_fail(&j->plan, local, "a directory (-r copies directories)");
                return 0;
        }
        if (!S_ISREG(st.st_mode)) { /* not followed out of the tree, nor read from a FIFO */
                plan_fail(&j->plan, local,
                          S_ISLNK(st.st_mode) ? "a symbolic link: not copied"
                                              : "not a regular file: not copied");
                return 0;
        }
        int rc = job_add(j, remote, local, there, (uint64_t)st.st_size, &err);
        if (rc < 0)
                plan_fail(&j->plan, local, err.text);
        return rc;
}

/* Walks the local directory into the plan, making the remote directories. */
static int plan_local_dir(struct job *j, const char *local, const char *remote, unsigned depth)
{
        struct ds_error err;
        if (depth > TREE_DEPTH_MAX) {
                plan_fail(&j->plan, local, "deeper than 64 directories: not copied");
                return 0;
        }
        DIR *dir = opendir(local);
        if (!dir) {
                plan_fail(&j->plan, local, strerror(errno));
                return 0;
        }
        int rc = ftp_cmd(j->ftp, &err, "MKD %s", remote); /* 550 when it exists: fine */
        if (rc < 0) {
                closedir(dir);
                plan_fail(&j->plan, remote, err.text);
                return ends_job(j, j->ftp) ? rc : 0;
        }
        struct remote_dir there = {0};
        if (j->o->update)
                remote_dir_read(j, remote, &there);
        struct dirent *entry;
        rc = 0;
        while (rc == 0 && (entry = readdir(dir))) {
                char r[PATH_ROOM], l[PATH_ROOM];
                if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0)
                        continue;
                struct listing_facts facts = remote_dir_find(&there, entry->d_name);
                if (join(r, sizeof(r), remote, entry->d_name) < 0 ||
                    join(l, sizeof(l), local, entry->d_name) < 0)
                        plan_fail(&j->plan, local, "a name too long to copy");
                else
                        rc = plan_local_entry(j, l, r, j->o->update ? &facts : NULL, depth);
        }
        free(there.entries);
        free(there.text);
        closedir(dir);
        return rc;
}

static void show_current(struct job_totals *t, const char *name)
{
        pthread_mutex_lock(&t->current_lock);
        snprintf(t->current, sizeof(t->current), "%s", name);
        pthread_mutex_unlock(&t->current_lock);
}

/* A worker's sums into the job's. */
static void add_totals(struct run *r, const struct job_totals *mine)
{
        struct job_totals *t = r->t;
        pthread_mutex_lock(&r->lock);
        t->files += mine->files;
        t->skipped += mine->skipped;
        t->bytes += mine->bytes;
        t->resumed_bytes += mine->resumed_bytes;
        if (mine->streams_used > t->streams_used)
                t->streams_used = mine->streams_used;
        t->verified += mine->verified;
        if (mine->verified) {
                t->last_algo = mine->last_algo;
                memcpy(t->last_hash, mine->last_hash, sizeof(t->last_hash));
        }
        pthread_mutex_unlock(&r->lock);
}

/* The buffers a worker lends to each of its files: a small file then costs no mapping of
 * its own (a larger one maps what it needs, as alone). */
#define WORKER_BUFFERS     4u
#define WORKER_BUFFER_SIZE (1u << 20)

/* Whether a file failed because its data connection was cut. */
static bool cut_data(int rc)
{
        return rc == -ECONNRESET || rc == -ECONNABORTED || rc == -EPIPE;
}

/* Takes files until none is left, the job stops or this connection breaks. */
static void work(struct run *r, struct ftp *ftp)
{
        struct job *j = r->job;
        struct job_totals mine = {0};
        struct job_opts o = *j->o;
        struct ds_error ignored;
        o.reuse = true;
        if (ds_pool_create(&o.pool, WORKER_BUFFER_SIZE < o.block ? WORKER_BUFFER_SIZE : o.block,
                           WORKER_BUFFERS, 0, &ignored) < 0)
                o.pool = NULL; /* each file maps its own */
        for (;;) {
                size_t i = atomic_fetch_add(&r->next, 1);
                if (i >= j->plan.count || stopping(j->o))
                        break;
                struct tree_item *it = &j->plan.items[i];
                struct ds_error err = {{0}};
                const struct listing_facts *facts = it->have_facts ? &it->facts : NULL;
                show_current(r->t, r->get ? it->remote : it->local);
                int rc;
                for (int tries = 0; tries < 2; tries++) {
                        rc = r->get ? transfer_get_file(ftp, it->remote, it->local, facts,
                                                        &r->batch, &o, &mine, &err)
                                    : transfer_put_file(ftp, it->local, it->remote, facts, &o,
                                                        &mine, &err);
                        /* A data connection cut (a kept one a firewall closed, say) while
                         * the control connection is well: the file once more, from the
                         * start, over a new one. */
                        if (!cut_data(rc) || ends_job(j, ftp))
                                break;
                }
                if (rc < 0 && !stopping(j->o))
                        plan_fail(&j->plan, r->get ? it->remote : it->local, err.text);
                else
                        atomic_fetch_add(&r->t->files_live, 1);
                if (rc < 0 && ends_job(j, ftp))
                        break;
        }
        transfer_settle(ftp, &o);
        ds_pool_destroy(o.pool);
        add_totals(r, &mine);
}

/* Tells the workers whether the plan runs (1) or not (-1). */
static void tell_workers(struct run *r, int go)
{
        pthread_mutex_lock(&r->lock);
        r->go = go;
        pthread_cond_broadcast(&r->told);
        pthread_mutex_unlock(&r->lock);
}

/* A worker's wait for the whole plan: whether it runs. The first connection's thread
 * always tells, whatever ends the plan (a stop among them). */
static bool await_plan(struct run *r)
{
        pthread_mutex_lock(&r->lock);
        while (r->go == 0)
                pthread_cond_wait(&r->told, &r->lock);
        bool run = r->go > 0;
        pthread_mutex_unlock(&r->lock);
        return run;
}

/* Logs ftp (NULL: it could not be had) in as the job's connections are; false when the
 * server would not (a refusal counted, its reason kept for the summary). */
static bool login_as_job(struct run *r, struct ftp *ftp)
{
        const struct tree_login *l = r->login;
        struct ds_error err;
        int rc = ftp ? ftp_open(ftp, l->host, l->port, l->user, l->pass, l->timeout_ms,
                                r->job->o->stop, l->tls, 0, &err)
                     : ds_fail(&err, -ENOMEM, "a control connection");
        if (rc < 0) {
                pthread_mutex_lock(&r->lock);
                if (r->refused++ == 0)
                        snprintf(r->refused_why, sizeof(r->refused_why), "%s", err.text);
                pthread_mutex_unlock(&r->lock);
        }
        return rc == 0;
}

/* A plan longer than the server's idle time (a listing, or a put's local scan) ended the
 * session meanwhile, with nothing stored on it: it is logged in again. false when the
 * server would not. */
static bool awake(struct run *r, struct ftp *ftp)
{
        struct ds_error ignored;
        if (!ftp_ended_unasked(ftp))
                return true;
        ftp_close(ftp, &ignored); /* nothing stored on it: nothing to fail */
        return login_as_job(r, ftp);
}

static void *worker_main(void *arg)
{
        struct run *r = arg;
        struct ds_error err;
        struct ftp *ftp = malloc(sizeof(*ftp));
        if (!login_as_job(r, ftp)) { /* counted as refused, an ftp not had (NULL) too */
                free(ftp);
                return NULL;
        }
        bool run = await_plan(r) && awake(r, ftp);
        if (run)
                work(r, ftp);
        if (ftp_close(ftp, &err) < 0) /* its uploads not known durable: the job fails */
                plan_fail(&r->job->plan, "", err.text);
        free(ftp);
        return NULL;
}

static void join_workers(struct run *r)
{
        for (unsigned i = 0; i < r->hired; i++)
                pthread_join(r->threads[i], NULL);
        r->hired = 0;
}

/* Moves the plan's files: the first connection here, the workers hired in theirs. */
static int run_plan(struct job *j, struct ds_error *err)
{
        struct run *r = &j->run;
        struct job_totals *t = r->t;

        atomic_store(&t->files_expected, (unsigned)j->plan.count);
        atomic_store(&t->expected_live, j->plan.bytes);
        uint64_t start_ns = ds_now_ns();
        tell_workers(r, 1);
        if (awake(r, j->ftp))
                work(r, j->ftp);
        unsigned connections = r->hired + 1;
        join_workers(r);
        if (r->get)
                part_batch_flush(&r->batch);
        t->files -= atomic_load(&r->unnamed); /* each counted when it joined the batch */
        t->seconds = ds_seconds_between(start_ns, ds_now_ns());
        if (r->refused > 0 && !j->o->quiet) {
                url_hide_secret(r->refused_why, sizeof(r->refused_why), r->login->pass);
                fprintf(stderr, "xftp: %u of %u connections refused (", r->refused, connections);
                listing_show(stderr, r->refused_why, strlen(r->refused_why), false);
                fputs("): fewer files at once\n", stderr);
        }
        /* Left untaken when every connection broke: each is a file not copied. */
        size_t left = atomic_load(&r->next);
        for (size_t i = left; i < j->plan.count && !stopping(j->o); i++)
                plan_fail(&j->plan, j->plan.items[i].remote, "not copied: no connection left");
        if (stopping(j->o))
                return ds_fail(err, 0, "stopped: %u of %zu files copied", t->files,
                               plan_files(&j->plan)),
                       -EINTR;
        return 0;
}

/* Names what failed and says how many: -EIO, or 0 when nothing did. One failure is the
 * job's one error line; more are named on stderr, one a line, before it. */
static int report_failures(struct job *j, struct job_totals *t, int rc, struct ds_error *err)
{
        struct plan *p = &j->plan;
        t->failed = p->failed;
        if (p->failed == 0)
                return rc;
        for (unsigned i = 0; i < p->failed && i < FAILURES_SHOWN; i++)
                if (p->failures[i]) /* a server may quote the password back */
                        url_hide_secret(p->failures[i], strlen(p->failures[i]) + 1, j->pass);
        for (unsigned i = 0; p->failed > 1 && i < p->failed && i < FAILURES_SHOWN; i++) {
                fputs("xftp: failed: ", stderr);
                listing_show(stderr, p->failures[i], strlen(p->failures[i]), false);
                fputc('\n', stderr);
        }
        if (p->failed > FAILURES_SHOWN)
                fprintf(stderr, "xftp: and %u more failures\n", p->failed - FAILURES_SHOWN);
        char first[sizeof(err->text)];
        snprintf(first, sizeof(first), "%s",
                 p->failed == 1 && p->failures[0] ? p->failures[0] : "");
        if (rc < 0) /* the job's end says it; the failures above say what it left */
                return rc;
        if (first[0])
                ds_fail(err, 0, "%s (%u of %zu files copied)", first, t->files, plan_files(p));
        else
                ds_fail(err, 0, "%u failed, %u of %zu files copied", p->failed, t->files,
                        plan_files(p));
        return -EIO;
}

/* A file of the batch that could not take its name (part_unnamed_fn): a failure. */
static void batch_unnamed(void *ctx, const char *local, const struct ds_error *why)
{
        struct run *r = ctx;
        plan_fail(&r->job->plan, local, why->text);
        atomic_fetch_add(&r->unnamed, 1);
}

static void job_init(struct job *j, struct ftp *ftp, const struct tree_login *login,
                     const struct job_opts *o, bool get, struct job_totals *t)
{
        unsigned wanted = o->jobs > 0 ? o->jobs : get ? JOBS_GET : JOBS_PUT;
        *j = (struct job){.ftp = ftp, .pass = login->pass, .o = o};
        j->run = (struct run){.job = j,
                              .get = get,
                              .login = login,
                              .t = t,
                              .wanted = wanted < TREE_JOBS_MAX ? wanted : TREE_JOBS_MAX};
        pthread_mutex_init(&j->plan.lock, NULL);
        pthread_mutex_init(&j->run.lock, NULL);
        pthread_cond_init(&j->run.told, NULL);
        part_batch_init(&j->run.batch, batch_unnamed, &j->run);
}

/* After the run, or instead of it: any worker told and waited for, then all freed. */
static void job_free(struct job *j)
{
        tell_workers(&j->run, -1);
        join_workers(&j->run);
        part_batch_free(&j->run.batch);
        pthread_cond_destroy(&j->run.told);
        pthread_mutex_destroy(&j->run.lock);
        plan_free(&j->plan);
}

/* Where a single source of a get lands: DEST as given, DEST/NAME when DEST is a directory
 * and the source a file, NAME here without DEST. */
static void single_dest(const char *path, const char *dest, bool dir, char *out, size_t room)
{
        struct stat st;
        const char *name = *base_of(path) ? base_of(path) : ".";
        if (!dest)
                snprintf(out, room, "%s", name);
        else if (!dir && stat(dest, &st) == 0 && S_ISDIR(st.st_mode))
                snprintf(out, room, "%s/%s", dest, name);
        else
                snprintf(out, room, "%s", dest);
}

/* A file's destination (local for a get, remote for a put), with its place in the plan. */
struct keyed {
        const char *key;
        size_t index;
};

static int by_key(const void *a, const void *b)
{
        const struct keyed *x = a, *y = b;
        int c = strcmp(x->key, y->key);
        return c ? c : (x->index > y->index) - (x->index < y->index);
}

/* Two files of the plan with one destination (two sources of one name, or a listing that
 * names a file twice) would be written into one partial at once: the first stays, the
 * others are failures. Returns 0 or -ENOMEM. */
static int plan_unique(struct plan *p, bool get)
{
        if (p->count < 2)
                return 0;
        struct keyed *keys = malloc(p->count * sizeof(*keys));
        bool *twice = calloc(p->count, sizeof(*twice));
        if (!keys || !twice) {
                free(keys);
                free(twice);
                return -ENOMEM;
        }
        for (size_t i = 0; i < p->count; i++)
                keys[i] = (struct keyed){get ? p->items[i].local : p->items[i].remote, i};
        qsort(keys, p->count, sizeof(*keys), by_key);
        for (size_t i = 1; i < p->count; i++)
                twice[keys[i].index] = strcmp(keys[i].key, keys[i - 1].key) == 0;
        size_t kept = 0;
        for (size_t i = 0; i < p->count; i++) {
                struct tree_item *it = &p->items[i];
                if (!twice[i]) {
                        p->items[kept++] = *it;
                        continue;
                }
                plan_fail(p, get ? it->remote : it->local,
                          "the same destination as another source: not copied");
                if (it->have_facts && it->facts.size != UINT64_MAX && get)
                        p->bytes -= it->facts.size;
                free(it->remote);
                free(it->local);
        }
        p->dropped += p->count - kept;
        p->count = kept;
        free(keys);
        free(twice);
        return 0;
}

/* After the plan: the run when the plan was made whole, then the failures named. */
static int finish(struct job *j, int rc, struct ds_error *err)
{
        if (rc == 0 && plan_unique(&j->plan, j->run.get) < 0)
                rc = -ENOMEM, plan_fail(&j->plan, "", "no memory to check the list of files");
        if (rc < 0) { /* the workers go before the walk's last failure is read */
                tell_workers(&j->run, -1);
                join_workers(&j->run);
        }
        if (rc == 0)
                rc = run_plan(j, err);
        else if (stopping(j->o))
                rc = (ds_fail(err, 0, "stopped while listing: nothing copied"), -EINTR);
        else if (j->plan.failed > 0 && j->plan.failed <= FAILURES_SHOWN) {
                /* what ended the walk was remembered last: it is the job's error */
                char *last = j->plan.failures[--j->plan.failed];
                rc = ds_fail(err, rc, "%s (nothing copied)", last ? last : "the list of files");
                free(last);
        } else
                rc = ds_fail(err, rc, "the list of files was cut short: nothing copied");
        rc = report_failures(j, j->run.t, rc, err);
        job_free(j);
        return rc;
}

int tree_get(struct ftp *ftp, const struct tree_login *login, char *const *sources, int nsources,
             const char *dest, const struct job_opts *o, struct job_totals *t, struct ds_error *err)
{
        struct job j;
        struct stat st;
        bool many = nsources > 1 || has_glob(sources[0]);
        char to[PATH_ROOM];

        job_init(&j, ftp, login, o, true, t);
        if (!many) {
                const char *path = sources[0];
                bool dir = o->recursive && remote_is_dir(&j, path);
                single_dest(path, dest, dir, to, sizeof(to));
                if (!dir) { /* one file: its own errors, as they are */
                        job_free(&j);
                        if (names_directory(path))
                                return ds_fail(err, 0, "%s names a directory: use -r",
                                               *path ? path : "/"),
                                       -EISDIR;
                        int rc = transfer_get_file(ftp, path, to, NULL, NULL, o, t, err);
                        struct listing_facts facts;
                        struct ds_error ignored;
                        if (rc == -ENOENT && ftp->feat.mlst &&
                            ftp_mlst(ftp, path, &facts, &ignored) == 0 && facts.is_dir)
                                rc = (ds_fail(err, 0, "%s is a directory: use -r", path), -EISDIR);
                        return rc;
                }
                return finish(&j, plan_remote_dir(&j, path, to, 0), err);
        }
        if (dest && (stat(dest, &st) < 0 || !S_ISDIR(st.st_mode))) {
                job_free(&j);
                return ds_fail(err, 0, "%s: not a directory (several files go into one)", dest),
                       -ENOTDIR;
        }
        dest = dest ? dest : ".";
        int rc = 0;
        for (int i = 0; i < nsources && rc == 0 && !stopping(o); i++) {
                const char *path = sources[i];
                struct ds_error mine;
                if (has_glob(path)) {
                        rc = plan_remote_glob(&j, path, dest);
                } else if (join(to, sizeof(to), dest, *base_of(path) ? base_of(path) : ".") < 0) {
                        plan_fail(&j.plan, path, "a name too long to copy");
                } else if (o->recursive && remote_is_dir(&j, path)) {
                        rc = plan_remote_dir(&j, path, to, 1);
                } else if (names_directory(path)) {
                        plan_fail(&j.plan, path, "a directory (-r copies directories)");
                } else if (part_name_like(base_of(to))) {
                        plan_fail(&j.plan, path,
                                  "a name xftp keeps for its partial downloads: not copied");
                } else if ((rc = job_add(&j, path, to, NULL, UINT64_MAX, &mine)) < 0) {
                        plan_fail(&j.plan, path, mine.text);
                }
        }
        return finish(&j, rc, err);
}

int tree_put(struct ftp *ftp, const struct tree_login *login, char *const *sources, int nsources,
             const char *dest, const struct job_opts *o, struct job_totals *t, struct ds_error *err)
{
        struct job j;
        struct stat st;
        bool many = nsources > 1;
        size_t len = strlen(dest);
        char to[PATH_ROOM];

        if (!many) {
                if (stat(sources[0], &st) < 0)
                        return ds_fail(err, -errno, "%s", sources[0]);
                if (S_ISDIR(st.st_mode) && !o->recursive)
                        return ds_fail(err, 0, "%s is a directory: use -r", sources[0]), -EISDIR;
                if (!S_ISDIR(st.st_mode)) { /* one file: its own errors, as they are */
                        bool into = len == 0 || dest[len - 1] == '/';
                        if (into && join(to, sizeof(to), dest, base_of(sources[0])) < 0)
                                return ds_fail(err, 0, "%s: name too long", sources[0]),
                                       -ENAMETOOLONG;
                        return transfer_put_file(ftp, sources[0], into ? to : dest, NULL, o, t,
                                                 err);
                }
        }
        job_init(&j, ftp, login, o, false, t);
        if (!many) /* a directory's files go into dest */
                return finish(&j, plan_local_dir(&j, sources[0], dest, 0), err);
        struct ds_error mine;
        int rc = ftp_cmd(ftp, &mine, "MKD %s", dest); /* 550 when it is there: fine */
        if (rc < 0)
                plan_fail(&j.plan, dest, mine.text);
        for (int i = 0; i < nsources && rc >= 0 && !stopping(o); i++) {
                char name[PATH_ROOM];
                size_t n = strlen(sources[i]);
                while (n > 1 && sources[i][n - 1] == '/')
                        n--; /* "dir/" is dir */
                snprintf(name, sizeof(name), "%.*s", (int)n, sources[i]);
                if (join(to, sizeof(to), dest, base_of(name)) < 0)
                        plan_fail(&j.plan, sources[i], "a name too long to copy");
                else
                        rc = plan_local_entry(&j, name, to, NULL, 0);
        }
        return finish(&j, rc < 0 ? rc : 0, err);
}
