/* A single-producer/single-consumer ring of pointers: how one thread hands buffers to
 * another by reference, with no lock and no system call. */
#ifndef DRAGSTRIP_RING_H
#define DRAGSTRIP_RING_H

#include <stdbool.h>

struct ds_ring;

/* capacity is rounded up to a power of two. Returns 0 or -ENOMEM / -EINVAL. */
int ds_ring_create(struct ds_ring **out, unsigned capacity);
void ds_ring_destroy(struct ds_ring *ring);

/* Producer side: false when the ring is full. */
bool ds_ring_push(struct ds_ring *ring, void *item);
/* Consumer side: NULL when the ring is empty. */
void *ds_ring_pop(struct ds_ring *ring);
/* Items in the ring now (a snapshot, exact only when called by one side while the other
 * is idle). */
unsigned ds_ring_count(const struct ds_ring *ring);

#endif
