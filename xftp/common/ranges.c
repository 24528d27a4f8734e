/* The ranges of an upload that have arrived (ranges.h). */
#include "ranges.h"

#include <errno.h>
#include <string.h>

void xftp_ranges_init(struct xftp_ranges *r, uint64_t start, struct xftp_range *slots, unsigned cap)
{
        *r = (struct xftp_ranges){.prefix = start, .items = slots, .cap = cap};
}

/* Drops items [from, to) by sliding the rest down. */
static void drop(struct xftp_ranges *r, unsigned from, unsigned to)
{
        memmove(&r->items[from], &r->items[to], (r->count - to) * sizeof(r->items[0]));
        r->count -= to - from;
}

/* The prefix grew to end: it swallows the ranges it now reaches. */
static void grow_prefix(struct xftp_ranges *r, uint64_t end)
{
        unsigned reached = 0;

        r->prefix = end;
        while (reached < r->count && r->items[reached].start <= r->prefix) {
                if (r->items[reached].end > r->prefix)
                        r->prefix = r->items[reached].end;
                reached++;
        }
        drop(r, 0, reached);
}

int xftp_ranges_add(struct xftp_ranges *r, uint64_t start, uint64_t end)
{
        if (end <= start || end <= r->prefix)
                return 0; /* nothing new */
        if (start <= r->prefix) {
                grow_prefix(r, end);
                return 0;
        }
        /* The first range that ends at or after start: it touches, overlaps or follows. */
        unsigned lo = 0, hi = r->count;
        while (lo < hi) {
                unsigned mid = lo + (hi - lo) / 2;
                if (r->items[mid].end < start)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        unsigned past = lo; /* the first range that starts beyond end */
        while (past < r->count && r->items[past].start <= end)
                past++;
        if (past == lo) {
                if (r->count == r->cap)
                        return -E2BIG;
                memmove(&r->items[lo + 1], &r->items[lo], (r->count - lo) * sizeof(r->items[0]));
                r->items[lo] = (struct xftp_range){start, end};
                r->count++;
                return 0;
        }
        if (r->items[lo].start > start)
                r->items[lo].start = start;
        if (r->items[past - 1].end > end)
                end = r->items[past - 1].end;
        r->items[lo].end = end;
        drop(r, lo + 1, past);
        return 0;
}

bool xftp_ranges_whole(const struct xftp_ranges *r, uint64_t *gap_start, uint64_t *gap_end)
{
        if (r->count == 0)
                return true;
        if (gap_start)
                *gap_start = r->prefix;
        if (gap_end)
                *gap_end = r->items[0].start;
        return false;
}
