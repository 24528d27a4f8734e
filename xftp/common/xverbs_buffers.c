/* A session's buffers for the verbs data channel (xverbs.h): made once, lent to every
 * transfer's links. */
#include "xverbs.h"

#include <dragstrip/error.h>
#include <dragstrip/pool.h>

uint64_t xftp_verbs_buffers_stream_bytes(void)
{
        return (uint64_t)XFTP_VERBS_WINDOW * XFTP_VERBS_MSG;
}

static int make_pools(struct xftp_verbs_buffers *b, unsigned streams, struct ds_error *err)
{
        if (streams > XFTP_MODEE_MAX_STREAMS)
                streams = XFTP_MODEE_MAX_STREAMS;
        while (b->count < streams) {
                int rc =
                    ds_pool_create(&b->pool[b->count], XFTP_VERBS_MSG, XFTP_VERBS_WINDOW, 0, err);
                if (rc < 0)
                        return rc;
                b->count++;
        }
        return 0;
}

static void *warm(void *arg)
{
        struct xftp_verbs_buffers *b = arg;
        struct ds_error ignored;

        xftp_verbs_load();
        make_pools(b, b->wanted, &ignored);
        return NULL;
}

void xftp_verbs_buffers_join(struct xftp_verbs_buffers *b)
{
        if (b->warming)
                pthread_join(b->warmer, NULL);
        b->warming = false;
}

void xftp_verbs_buffers_warm(struct xftp_verbs_buffers *b, unsigned streams)
{
        xftp_verbs_buffers_join(b);
        if (streams <= b->count)
                return;
        b->wanted = streams;
        b->warming = pthread_create(&b->warmer, NULL, warm, b) == 0;
}

int xftp_verbs_buffers_reserve(struct xftp_verbs_buffers *b, unsigned streams, struct ds_error *err)
{
        xftp_verbs_buffers_join(b);
        return make_pools(b, streams, err);
}

void xftp_verbs_buffers_free(struct xftp_verbs_buffers *b)
{
        xftp_verbs_buffers_join(b);
        for (unsigned i = 0; i < b->count; i++)
                ds_pool_destroy(b->pool[i]);
        b->count = 0;
}
