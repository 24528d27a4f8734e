/* A lock-free single-producer/single-consumer ring of pointers.
 *
 * head is written only by the consumer, tail only by the producer; each side reads the
 * other's index with acquire and publishes its own with release, so a slot's contents are
 * visible before the index that hands it over. The indices run freely and wrap modulo
 * 2^32; the slot is index & mask. Each index sits on its own cache line, beside a cached
 * copy of the other side's index, so the two threads do not bounce one line between them. */
#include <dragstrip/ring.h>

#include <errno.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>

#define DS_CACHE_LINE 64
#define DS_RING_MAX   (1u << 31)

struct ds_ring {
        alignas(DS_CACHE_LINE) _Atomic unsigned head; /* next slot to pop */
        unsigned tail_cached;                         /* consumer's last view of tail */
        alignas(DS_CACHE_LINE) _Atomic unsigned tail; /* next slot to push */
        unsigned head_cached;                         /* producer's last view of head */
        alignas(DS_CACHE_LINE) unsigned mask;
        void **slots;
};

int ds_ring_create(struct ds_ring **out, unsigned capacity)
{
        if (capacity == 0 || capacity > DS_RING_MAX)
                return -EINVAL;
        unsigned size = 1;
        while (size < capacity)
                size <<= 1;

        struct ds_ring *ring = aligned_alloc(DS_CACHE_LINE, sizeof(*ring));
        if (!ring)
                return -ENOMEM;
        ring->slots = calloc(size, sizeof(*ring->slots));
        if (!ring->slots) {
                free(ring);
                return -ENOMEM;
        }
        atomic_init(&ring->head, 0);
        atomic_init(&ring->tail, 0);
        ring->tail_cached = 0;
        ring->head_cached = 0;
        ring->mask = size - 1;
        *out = ring;
        return 0;
}

void ds_ring_destroy(struct ds_ring *ring)
{
        if (!ring)
                return;
        free(ring->slots);
        free(ring);
}

bool ds_ring_push(struct ds_ring *ring, void *item)
{
        unsigned tail = atomic_load_explicit(&ring->tail, memory_order_relaxed);

        if (tail - ring->head_cached > ring->mask) {
                ring->head_cached = atomic_load_explicit(&ring->head, memory_order_acquire);
                if (tail - ring->head_cached > ring->mask)
                        return false;
        }
        ring->slots[tail & ring->mask] = item;
        atomic_store_explicit(&ring->tail, tail + 1, memory_order_release);
        return true;
}

void *ds_ring_pop(struct ds_ring *ring)
{
        unsigned head = atomic_load_explicit(&ring->head, memory_order_relaxed);

        if (head == ring->tail_cached) {
                ring->tail_cached = atomic_load_explicit(&ring->tail, memory_order_acquire);
                if (head == ring->tail_cached)
                        return NULL;
        }
        void *item = ring->slots[head & ring->mask];
        atomic_store_explicit(&ring->head, head + 1, memory_order_release);
        return item;
}

unsigned ds_ring_count(const struct ds_ring *ring)
{
        unsigned tail = atomic_load_explicit(&ring->tail, memory_order_acquire);
        unsigned head = atomic_load_explicit(&ring->head, memory_order_acquire);
        return tail - head;
}
