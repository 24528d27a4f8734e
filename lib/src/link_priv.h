/* Pieces the link backends share; not part of the public interface, so no name here
 * carries the ds_ prefix that the installed libraries export. */
#ifndef DRAGSTRIP_LINK_PRIV_H
#define DRAGSTRIP_LINK_PRIV_H

#include <dragstrip/link.h>
#include <dragstrip/wire.h>

#include <stdint.h>
#include <string.h>

/* Received control payloads, copied out of the transport (they are small and rare) and
 * handed out by recv() until released, oldest first. */
#define CTL_SLOTS 8

struct ctl_ring {
        uint8_t slot[CTL_SLOTS][DS_WIRE_CTL_MAX];
        unsigned head; /* next to fill */
        unsigned tail; /* next to release */
};

/* Copies a control payload into the next slot and describes it in msg. Returns 0, or
 * -1 when every slot is still out (the caller stops its batch there). */
static inline int ctl_ring_take(struct ctl_ring *ring, const struct ds_wire_hdr *hdr,
                                const void *payload, struct ds_msg *msg)
{
        if (ring->head - ring->tail >= CTL_SLOTS || hdr->frag_len > DS_WIRE_CTL_MAX)
                return -1;
        uint8_t *slot = ring->slot[ring->head++ % CTL_SLOTS];
        memcpy(slot, payload, hdr->frag_len);
        *msg = (struct ds_msg){
            .buf = slot, .len = hdr->frag_len, .kind = DS_MSG_CTL, .ctl_type = hdr->type};
        return 0;
}

static inline int ctl_ring_full(const struct ctl_ring *ring)
{
        return ring->head - ring->tail >= CTL_SLOTS;
}

static inline void ctl_ring_release(struct ctl_ring *ring)
{
        if (ring->tail != ring->head)
                ring->tail++;
}

/* How many receive buffers of msg_size a backend keeps: enough to overlap, bounded so
 * large messages do not take gigabytes. */
unsigned link_rx_buffers(uint32_t msg_size);

#endif
