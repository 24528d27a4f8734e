/* ttcp's buffers: from the page-aligned pool, then shifted as -A and -O ask. */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "ttcp.h"

/* The classic ttcp source pattern: printable ASCII, cycling. */
static void fill_pattern(unsigned char *buf, size_t len)
{
        unsigned char c = 0;

        for (size_t i = 0; i < len; i++) {
                while (!isprint(c & 0x7f))
                        c++;
                buf[i] = c++ & 0x7f;
        }
}

int ttcp_buffers_create(struct ttcp_buffers *bufs, const struct ttcp_options *opt, unsigned count,
                        size_t len, struct ds_error *err)
{
        size_t align = opt->align ? opt->align : 1;
        int rc;

        if (count == 0 || count > sizeof bufs->buf / sizeof bufs->buf[0])
                return ds_fail(err, -EINVAL, "ttcp: %u buffers asked for", count);
        memset(bufs, 0, sizeof *bufs);
        /* The pool gives page alignment; room for a larger -A and for -O comes on top. */
        rc = ds_pool_create(&bufs->pool, len + align + opt->offset, count, 0, err);
        if (rc != 0)
                return rc;
        bufs->count = count;
        for (unsigned i = 0; i < count; i++) {
                uintptr_t base = (uintptr_t)ds_pool_buf(bufs->pool, i);
                uintptr_t aligned = (base + align - 1) / align * align;

                bufs->buf[i] = (unsigned char *)aligned + opt->offset;
                if (opt->transmit && opt->sink_mode)
                        fill_pattern(bufs->buf[i], len);
        }
        return 0;
}

void ttcp_buffers_destroy(struct ttcp_buffers *bufs)
{
        if (bufs->pool)
                ds_pool_destroy(bufs->pool);
        memset(bufs, 0, sizeof *bufs);
}
