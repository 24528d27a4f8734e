/* Frames to messages and back, for the datagram links (udp, raw). */
#include "link_dgram.h"

#include <dragstrip/clock.h>
#include <dragstrip/error.h>
#include <dragstrip/pool.h>

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/random.h>
#include <unistd.h>

int dgram_prepare(struct dgram *d, uint32_t msg_size, struct ds_error *err)
{
        d->msg_size = msg_size;
        return ds_pool_create(&d->train_pool, msg_size, link_rx_buffers(msg_size), 0, err);
}

void dgram_free(struct dgram *d)
{
        if (d->train_pool)
                ds_pool_destroy(d->train_pool);
        d->train_pool = NULL;
}

/* One fragment of a train. Frames of one stream arrive in order, so a fragment that is
 * not the next expected means some were lost: the message is given up (the sequence
 * check then counts it lost, fragments_lost counts it here once) and the rest of its
 * train skipped. The reassembly buffer stays with the link until a train completes. */
static enum dgram_verdict train_take(struct dgram *d, const struct ds_wire_hdr *h,
                                     const uint8_t *payload, struct ds_msg *msg)
{
        if (h->frag_off == 0) {
                if (d->train_active)
                        d->link->stats.fragments_lost++; /* its tail never came */
                if (!d->train_buf && !(d->train_buf = ds_pool_get(d->train_pool)))
                        return DGRAM_FULL;
                d->train_active = true;
                d->train_seq = h->seq;
                d->train_next = 0;
        } else if (!d->train_active || h->seq != d->train_seq || h->frag_off != d->train_next) {
                bool counted = !d->train_active && h->seq == d->train_seq && d->train_skip;
                if (!counted)
                        d->link->stats.fragments_lost++;
                d->train_active = false;
                d->train_skip = true;
                d->train_seq = h->seq;
                return DGRAM_NONE;
        }
        /* one copy: fragments are gathered into one buffer */
        memcpy(d->train_buf + h->frag_off, payload, h->frag_len);
        d->link->stats.bytes_copied += h->frag_len;
        d->train_next = h->frag_off + h->frag_len;
        if (d->train_next < h->msg_len)
                return DGRAM_NONE;
        *msg = (struct ds_msg){
            .buf = d->train_buf, .len = h->msg_len, .kind = DS_MSG_DATA, .seq = h->seq};
        d->train_buf = NULL;
        d->train_active = false;
        d->train_skip = false;
        return DGRAM_OWNED;
}

enum dgram_verdict dgram_take(struct dgram *d, const uint8_t *frame, size_t len, struct ds_msg *msg)
{
        struct ds_wire_hdr h;
        enum ds_wire_reject bad = ds_wire_parse(frame, len, d->msg_size, 0, &h);
        if (bad == DS_WIRE_OK && h.session != d->session)
                bad = DS_WIRE_SESSION_BAD;
        if (bad == DS_WIRE_OK && h.type == DS_WIRE_DATA && h.msg_len != d->msg_size)
                bad = DS_WIRE_TOO_BIG; /* every message of a run has the negotiated size */
        if (bad != DS_WIRE_OK) {
                d->link->stats.malformed[bad]++;
                return DGRAM_NONE;
        }
        d->link->stats.frames_received++;
        const uint8_t *payload = frame + DS_WIRE_HDR_LEN;
        if (h.type != DS_WIRE_DATA)
                return ctl_ring_take(&d->ctl, &h, payload, msg) == 0 ? DGRAM_OWNED : DGRAM_FULL;
        if (h.frag_off == 0 && h.frag_len == h.msg_len) {
                *msg = (struct ds_msg){
                    .buf = (void *)payload, .len = h.msg_len, .kind = DS_MSG_DATA, .seq = h.seq};
                return DGRAM_INPLACE;
        }
        return train_take(d, &h, payload, msg);
}

void dgram_release(struct dgram *d, const struct ds_msg *msg)
{
        if (msg->kind == DS_MSG_CTL)
                ctl_ring_release(&d->ctl);
        else
                ds_pool_put(d->train_pool, msg->buf);
}

/* Cuts message m into frames of at most frag_max payload bytes, starting at *off: writes
 * a header into hdrs[i] and the payload's place into payload[i] for each, advancing *off.
 * Returns the frames filled (<= max); the message is done when *off == m->len. */
static unsigned cut(uint32_t session, const struct ds_msg *m, uint32_t frag_max, uint32_t *off,
                    uint8_t (*hdrs)[DS_WIRE_HDR_LEN], struct iovec *payload, unsigned max)
{
        unsigned n = 0;
        while (n < max && *off < m->len) {
                uint32_t len = m->len - *off < frag_max ? m->len - *off : frag_max;
                struct ds_wire_hdr h = {.type = DS_WIRE_DATA,
                                        .session = session,
                                        .seq = m->seq,
                                        .msg_len = m->len,
                                        .frag_off = *off,
                                        .frag_len = len};
                ds_wire_encode(hdrs[n], &h);
                payload[n] = (struct iovec){(uint8_t *)m->buf + *off, len};
                *off += len;
                n++;
        }
        return n;
}

/* One frame: the link's prefix, a wire header and the payload, gathered by iov. */
static void frame_at(const struct dgram_tx *tx, const uint8_t *hdr, struct iovec payload,
                     struct iovec iov[3], struct mmsghdr *mm)
{
        unsigned n = 0;
        if (tx->prefix_len)
                iov[n++] = (struct iovec){(void *)tx->prefix, tx->prefix_len};
        iov[n++] = (struct iovec){(void *)hdr, DS_WIRE_HDR_LEN};
        iov[n++] = payload;
        *mm = (struct mmsghdr){.msg_hdr = {.msg_iov = iov, .msg_iovlen = n}};
}

static int send_frames(struct dgram *d, const struct dgram_tx *tx, struct mmsghdr *mm, unsigned n,
                       struct ds_error *err)
{
        unsigned done = 0;
        while (done < n) {
                int k = sendmmsg(tx->fd, mm + done, n - done, 0);
                if (k < 0) {
                        int rc = tx->send_failed(d->link, errno, err);
                        if (rc < 0)
                                return rc;
                        continue;
                }
                done += (unsigned)k;
        }
        d->link->stats.frames_sent += n;
        return 0;
}

int dgram_send(struct dgram *d, const struct dgram_tx *tx, const struct ds_msg *msgs, unsigned n,
               struct ds_error *err)
{
        uint8_t hdrs[DGRAM_BATCH_MAX][DS_WIRE_HDR_LEN];
        struct iovec payload[DGRAM_BATCH_MAX];
        struct iovec iov[DGRAM_BATCH_MAX][3];
        struct mmsghdr mm[DGRAM_BATCH_MAX];
        unsigned frames = 0;
        for (unsigned i = 0; i < n; i++) {
                uint32_t off = 0;
                while (off < msgs[i].len) {
                        unsigned k = cut(d->session, &msgs[i], tx->frag_max, &off, hdrs + frames,
                                         payload + frames, tx->batch - frames);
                        for (unsigned f = frames; f < frames + k; f++)
                                frame_at(tx, hdrs[f], payload[f], iov[f], &mm[f]);
                        frames += k;
                        if (frames == tx->batch) {
                                int rc = send_frames(d, tx, mm, frames, err);
                                if (rc < 0)
                                        return rc;
                                frames = 0;
                        }
                }
        }
        int rc = frames ? send_frames(d, tx, mm, frames, err) : 0;
        return rc < 0 ? rc : (int)n;
}

int dgram_send_ctl(struct dgram *d, const struct dgram_tx *tx, uint8_t type, const void *payload,
                   size_t len, struct ds_error *err)
{
        uint8_t hdr[DS_WIRE_HDR_LEN];
        struct ds_wire_hdr h = {.type = type,
                                .session = d->session,
                                .msg_len = (uint32_t)len,
                                .frag_len = (uint32_t)len};
        ds_wire_encode(hdr, &h);
        struct iovec iov[3];
        struct mmsghdr mm;
        frame_at(tx, hdr, (struct iovec){(void *)payload, len}, iov, &mm);
        return send_frames(d, tx, &mm, 1, err);
}

uint32_t dgram_session(void)
{
        uint32_t s;
        if (getrandom(&s, sizeof(s), GRND_NONBLOCK) != sizeof(s))
                s = (uint32_t)(ds_now_ns() ^ ((uint64_t)getpid() << 20));
        return s ? s : 1;
}
