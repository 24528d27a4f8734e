/* Interval reports from a thread of their own (report.h). */
#include <dragstrip/report.h>

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

struct ds_report_ticker {
        struct ds_report *report;
        pthread_t thread;
        pthread_mutex_t lock;
        pthread_cond_t wake; /* on CLOCK_MONOTONIC, the clock of ds_report_next_due */
        bool stop;
};

static void *ticker_main(void *arg)
{
        struct ds_report_ticker *t = arg;

        pthread_mutex_lock(&t->lock);
        while (!t->stop) {
                uint64_t due = ds_report_next_due(t->report);
                struct timespec at = {.tv_sec = (time_t)(due / 1000000000u),
                                      .tv_nsec = (long)(due % 1000000000u)};
                pthread_cond_timedwait(&t->wake, &t->lock, &at);
                if (t->stop)
                        break;
                /* Not under the lock: printing may block on a slow reader of stdout, and
                 * the stop must not wait for it any longer than for the line. */
                pthread_mutex_unlock(&t->lock);
                ds_report_tick(t->report); /* prints only when due: wake-ups may be early */
                pthread_mutex_lock(&t->lock);
        }
        pthread_mutex_unlock(&t->lock);
        return NULL;
}

int ds_report_ticker_start(struct ds_report *report, struct ds_report_ticker **ticker)
{
        *ticker = NULL;
        if (ds_report_next_due(report) == UINT64_MAX)
                return 0;
        struct ds_report_ticker *t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        t->report = report;
        pthread_condattr_t attr;
        int rc = pthread_condattr_init(&attr);
        if (rc == 0) {
                rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
                if (rc == 0)
                        rc = pthread_cond_init(&t->wake, &attr);
                pthread_condattr_destroy(&attr);
        }
        if (rc != 0) {
                free(t);
                return -rc;
        }
        pthread_mutex_init(&t->lock, NULL);
        rc = pthread_create(&t->thread, NULL, ticker_main, t);
        if (rc != 0) {
                pthread_cond_destroy(&t->wake);
                pthread_mutex_destroy(&t->lock);
                free(t);
                return -rc;
        }
        *ticker = t;
        return 0;
}

void ds_report_ticker_stop(struct ds_report_ticker *ticker)
{
        if (!ticker)
                return;
        pthread_mutex_lock(&ticker->lock);
        ticker->stop = true;
        pthread_cond_signal(&ticker->wake);
        pthread_mutex_unlock(&ticker->lock);
        pthread_join(ticker->thread, NULL);
        pthread_cond_destroy(&ticker->wake);
        pthread_mutex_destroy(&ticker->lock);
        free(ticker);
}
