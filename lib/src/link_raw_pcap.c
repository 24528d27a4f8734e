/* The raw link's pcap trace of the frames a listener and its links receive (libpcap). */
#include "link_raw.h"

#include <dragstrip/error.h>

#include <errno.h>
#include <stdlib.h>
#ifdef DS_HAVE_PCAP
#include <pcap/pcap.h>
#include <pthread.h>

struct raw_trace {
        pthread_mutex_t lock; /* links write from their own threads */
        pcap_t *pcap;
        pcap_dumper_t *dumper;
};

int raw_trace_open(struct raw_trace **out, const char *path, struct ds_error *err)
{
        *out = NULL;
        if (!path)
                return 0;
        struct raw_trace *t = calloc(1, sizeof(*t));
        if (!t)
                return ds_fail(err, -ENOMEM, "pcap trace %s", path);
        pthread_mutex_init(&t->lock, NULL);
        int rc = 0;
        t->pcap = pcap_open_dead(DLT_EN10MB, 262144);
        if (!t->pcap)
                rc = ds_fail(err, -ENOMEM, "pcap trace: libpcap");
        else if (!(t->dumper = pcap_dump_open(t->pcap, path)))
                rc = ds_fail(err, -EIO, "pcap trace %s: %s", path, pcap_geterr(t->pcap));
        if (rc < 0) {
                raw_trace_close(t);
                return rc;
        }
        *out = t;
        return 0;
}

void raw_trace_frame(struct raw_trace *t, const struct tpacket3_hdr *h, const uint8_t *frame)
{
        if (!t)
                return;
        struct pcap_pkthdr ph = {.ts = {.tv_sec = h->tp_sec, .tv_usec = h->tp_nsec / 1000},
                                 .caplen = h->tp_snaplen,
                                 .len = h->tp_len};
        pthread_mutex_lock(&t->lock);
        pcap_dump((u_char *)t->dumper, &ph, frame);
        pthread_mutex_unlock(&t->lock);
}

void raw_trace_close(struct raw_trace *t)
{
        if (!t)
                return;
        if (t->dumper)
                pcap_dump_close(t->dumper);
        if (t->pcap)
                pcap_close(t->pcap);
        pthread_mutex_destroy(&t->lock);
        free(t);
}

#else /* a build without libpcap: the raw link lacks DS_LINK_PCAP */

int raw_trace_open(struct raw_trace **out, const char *path, struct ds_error *err)
{
        *out = NULL;
        return path ? ds_fail(err, -ENOTSUP, "pcap trace %s: this build has no libpcap", path) : 0;
}

void raw_trace_frame(struct raw_trace *t, const struct tpacket3_hdr *h, const uint8_t *frame)
{
        (void)t, (void)h, (void)frame;
}

void raw_trace_close(struct raw_trace *t)
{
        (void)t;
}

#endif
