/* Serving peers that anyone can reach (serve.h). */
#include <dragstrip/serve.h>

#include <dragstrip/clock.h>
#include <dragstrip/stop.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

uint64_t ds_budget_default(void)
{
        long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        if (pages <= 0 || page <= 0)
                return 1ull << 30; /* unknown: a gigabyte */
        return (uint64_t)pages * (uint64_t)page / 8;
}

void ds_budget_init(struct ds_budget *b, uint64_t limit)
{
        b->limit = limit;
        atomic_init(&b->used, 0);
}

bool ds_budget_take(struct ds_budget *b, uint64_t bytes)
{
        uint64_t used = atomic_load(&b->used);
        do {
                if (bytes > b->limit || used > b->limit - bytes)
                        return false;
        } while (!atomic_compare_exchange_weak(&b->used, &used, used + bytes));
        return true;
}

void ds_budget_give(struct ds_budget *b, uint64_t bytes)
{
        atomic_fetch_sub(&b->used, bytes);
}

struct ds_shared_budget {
        pthread_mutex_t lock; /* process-shared, robust */
        uint64_t limit;
        uint64_t used; /* the sum of held[], kept so a take need not add them up */
        unsigned slots;
        size_t map_bytes;
        uint64_t held[];
};

int ds_shared_budget_create(struct ds_shared_budget **out, uint64_t limit, unsigned slots)
{
        pthread_mutexattr_t attr;
        size_t bytes = sizeof(struct ds_shared_budget) + (size_t)slots * sizeof(uint64_t);
        struct ds_shared_budget *b =
            mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

        if (b == MAP_FAILED)
                return -errno;
        int rc = pthread_mutexattr_init(&attr);
        if (rc == 0)
                rc = pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
        if (rc == 0)
                rc = pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
        if (rc == 0)
                rc = pthread_mutex_init(&b->lock, &attr);
        pthread_mutexattr_destroy(&attr);
        if (rc != 0) {
                munmap(b, bytes);
                return -rc;
        }
        b->limit = limit;
        b->slots = slots;
        b->map_bytes = bytes; /* the mapping came zeroed: nothing used, nothing held */
        *out = b;
        return 0;
}

void ds_shared_budget_destroy(struct ds_shared_budget *b)
{
        if (!b)
                return;
        pthread_mutex_destroy(&b->lock);
        munmap(b, b->map_bytes);
}

/* Locks b. A holder that died inside may have changed its slot and not yet the total: the
 * total is counted again from the slots. Returns false when the lock cannot be had. */
static bool budget_lock(struct ds_shared_budget *b)
{
        int rc = pthread_mutex_lock(&b->lock);
        if (rc == EOWNERDEAD) {
                uint64_t sum = 0;
                for (unsigned i = 0; i < b->slots; i++)
                        sum += b->held[i];
                b->used = sum;
                rc = pthread_mutex_consistent(&b->lock);
        }
        return rc == 0;
}

bool ds_shared_budget_take(struct ds_shared_budget *b, unsigned slot, uint64_t bytes)
{
        if (slot >= b->slots || !budget_lock(b))
                return false;
        bool fits = bytes <= b->limit && b->used <= b->limit - bytes;
        if (fits) {
                b->held[slot] += bytes;
                b->used += bytes;
        }
        pthread_mutex_unlock(&b->lock);
        return fits;
}

void ds_shared_budget_give(struct ds_shared_budget *b, unsigned slot, uint64_t bytes)
{
        if (slot >= b->slots || !budget_lock(b))
                return;
        if (bytes > b->held[slot])
                bytes = b->held[slot];
        b->held[slot] -= bytes;
        b->used -= bytes;
        pthread_mutex_unlock(&b->lock);
}

void ds_shared_budget_release(struct ds_shared_budget *b, unsigned slot)
{
        ds_shared_budget_give(b, slot, UINT64_MAX); /* all it holds */
}

uint64_t ds_shared_budget_used(struct ds_shared_budget *b)
{
        if (!budget_lock(b))
                return 0;
        uint64_t used = b->used;
        pthread_mutex_unlock(&b->lock);
        return used;
}

uint64_t ds_deadline_in(int ms)
{
        return ds_now_ns() + (uint64_t)(ms > 0 ? ms : 0) * 1000000u;
}

int ds_deadline_left_ms(uint64_t deadline_ns)
{
        uint64_t now = ds_now_ns();
        if (now >= deadline_ns)
                return 0;
        uint64_t ms = (deadline_ns - now + 999999u) / 1000000u;
        return ms > INT32_MAX ? INT32_MAX : (int)ms;
}

bool ds_accept_survive(struct ds_accept_guard *g, int rc, const char *what, FILE *log)
{
        switch (-rc) {
        case ETIMEDOUT:
        case EINTR:
        case ECANCELED:
        case ECONNABORTED: /* the peer left before it was accepted */
        case EPROTO:
        case EPERM: /* a firewall's verdict on that one peer */
                return true;
        case EMFILE:
        case ENFILE:
        case ENOBUFS:
        case ENOMEM:
        case EAGAIN:
                g->shortages++;
                /* A flood ends and starts again as peers come and go: say it once a minute. */
                uint64_t now = ds_now_ns();
                if (!g->short_of && log &&
                    (!g->logged_ns || now - g->logged_ns > DS_ACCEPT_LOG_S * 1000000000ull)) {
                        fprintf(log, "%s: %s; refusing peers until some leave\n", what,
                                strerror(-rc));
                        g->logged_ns = now;
                }
                g->short_of = true;
                /* The peer waits in the backlog; waiting here keeps a full table from
                 * turning the loop into a busy spin. */
                ds_sleep_until(ds_now_ns() + (uint64_t)DS_ACCEPT_BACKOFF_MS * 1000000u);
                return true;
        default:
                return false;
        }
}

void ds_accept_ok(struct ds_accept_guard *g)
{
        g->short_of = false;
}

int ds_spawn_detached(void *(*body)(void *), void *arg)
{
        pthread_attr_t attr;
        sigset_t block, old;
        int rc = pthread_attr_init(&attr);
        if (rc != 0)
                return -rc;
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        sigemptyset(&block);
        sigaddset(&block, SIGINT);
        sigaddset(&block, SIGTERM);
        pthread_sigmask(SIG_BLOCK, &block, &old);
        pthread_t tid;
        rc = pthread_create(&tid, &attr, body, arg);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        pthread_attr_destroy(&attr);
        return -rc;
}
