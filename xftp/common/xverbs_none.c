/* The verbs data channel in a build without verbs (DS_WITH_VERBS=OFF): never available,
 * and every set-up says why. */
#include "xverbs.h"

#include "xconn.h"

#include <dragstrip/error.h>

#include <errno.h>

bool xftp_verbs_available(const struct xftp_addr *local)
{
        (void)local;
        return false;
}

uint64_t xftp_verbs_stream_bytes(void)
{
        return 0;
}

void xftp_verbs_load(void)
{
}

static int no_verbs(struct ds_error *err)
{
        return ds_fail(err, -EPROTONOSUPPORT, "this build has no verbs (DS_WITH_VERBS=OFF)");
}

int xftp_verbs_listen(struct xftp_verbs_listener **out, const struct xftp_addr *local, uint16_t lo,
                      uint16_t hi, struct ds_error *err)
{
        (void)out, (void)local, (void)lo, (void)hi;
        return no_verbs(err);
}

uint16_t xftp_verbs_port(const struct xftp_verbs_listener *listener)
{
        (void)listener;
        return 0;
}

void xftp_verbs_unlisten(struct xftp_verbs_listener *listener)
{
        (void)listener;
}

int xftp_verbs_accept(struct xftp_verbs_listener *listener, const struct xftp_addr *peer,
                      struct xftp_conn *conns, unsigned n, const struct xftp_verbs_opts *opts,
                      struct ds_error *err)
{
        (void)listener, (void)peer, (void)opts;
        for (unsigned i = 0; i < n; i++)
                xftp_conn_none(&conns[i]);
        return no_verbs(err);
}

int xftp_verbs_connect(const struct xftp_addr *addr, struct xftp_conn *conns, unsigned n,
                       const struct xftp_verbs_opts *opts, struct ds_error *err)
{
        (void)addr, (void)opts;
        for (unsigned i = 0; i < n; i++)
                xftp_conn_none(&conns[i]);
        return no_verbs(err);
}
