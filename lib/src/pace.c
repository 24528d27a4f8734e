/* Pacing to a rate (pace.h). */
#include <dragstrip/pace.h>

#include <dragstrip/clock.h>

#define CREDIT_NS ((uint64_t)DS_PACE_CREDIT_MS * 1000000u)
#define COST_MAX  1e18 /* ns: 31 years, as good as never, and far from wrapping */

void ds_pace_init(struct ds_pace *pace, double bits_per_s)
{
        pace->ns_per_byte = 8e9 / bits_per_s;
        atomic_init(&pace->free_ns, 0);
}

uint64_t ds_pace_book(struct ds_pace *pace, uint64_t bytes)
{
        double cost = (double)bytes * pace->ns_per_byte;
        uint64_t cost_ns = cost < COST_MAX ? (uint64_t)cost : (uint64_t)COST_MAX;
        uint64_t now = ds_now_ns();
        uint64_t earliest = now > CREDIT_NS ? now - CREDIT_NS : 0;
        uint64_t free_ns = atomic_load_explicit(&pace->free_ns, memory_order_relaxed);
        uint64_t due;

        do {
                /* The first booking starts the schedule now: no credit before it began. */
                uint64_t from = free_ns == 0 ? now : free_ns > earliest ? free_ns : earliest;
                due = from + cost_ns;
        } while (!atomic_compare_exchange_weak_explicit(
            &pace->free_ns, &free_ns, due, memory_order_relaxed, memory_order_relaxed));
        return due;
}

uint64_t ds_pace_bytes_in(const struct ds_pace *pace, unsigned ms)
{
        return (uint64_t)((double)ms * 1e6 / pace->ns_per_byte);
}

int ds_pace_wait(struct ds_pace *pace, uint64_t bytes)
{
        return ds_sleep_until(ds_pace_book(pace, bytes));
}
