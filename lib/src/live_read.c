/* Reading another process's live-counter segment: every size, count and text in it is
 * checked before use, since anything named /dev/shm/dragstrip.* may be found there. */
#include <dragstrip/live.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int reject(char *note, size_t note_len, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        if (note && note_len)
                vsnprintf(note, note_len, fmt, ap);
        va_end(ap);
        return -EINVAL;
}

/* Copies a fixed text field: it must end within the field, and what does not print
 * becomes '?', so a hostile name cannot move a terminal's cursor. */
static bool copy_text(char *to, const char *from, size_t size)
{
        const char *end = memchr(from, '\0', size);
        if (!end)
                return false;
        size_t n = (size_t)(end - from);
        for (size_t i = 0; i < n; i++)
                to[i] = from[i] >= 0x20 && from[i] < 0x7f ? from[i] : '?';
        to[n] = '\0';
        return true;
}

static void read_counters(const _Atomic uint64_t *messages, const _Atomic uint64_t *bytes,
                          const _Atomic uint64_t *faults, struct ds_counters *out)
{
        out->messages = atomic_load_explicit(messages, memory_order_relaxed);
        out->bytes = atomic_load_explicit(bytes, memory_order_relaxed);
        for (int i = 0; i < DS_FAULT_COUNT; i++)
                out->faults[i] = atomic_load_explicit(&faults[i], memory_order_relaxed);
}

/* One slot into the view; returns false for a slot that cannot be a slot. A slot being
 * claimed or changing hands while read is left out of this look. */
static bool read_slot(const struct ds_live_slot *slot, uint32_t position, struct ds_live_view *view)
{
        uint32_t state = atomic_load_explicit(&slot->state, memory_order_acquire);
        if (state == DS_SLOT_FREE || state == DS_SLOT_CLAIMED)
                return true;
        if (state != DS_SLOT_ACTIVE && state != DS_SLOT_ENDED)
                return false;
        if (slot->kind != DS_SLOT_STREAM && slot->kind != DS_SLOT_DISK)
                return false;
        struct ds_live_view_slot *out = &view->slots[view->slot_count];
        out->generation = atomic_load_explicit(&slot->generation, memory_order_acquire);
        out->kind = (enum ds_live_slot_kind)slot->kind;
        out->position = position;
        out->index = slot->index;
        out->ended = state == DS_SLOT_ENDED;
        if (!copy_text(out->name, slot->name, sizeof(slot->name)))
                return false;
        read_counters(&slot->messages, &slot->bytes, slot->faults, &out->counters);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&slot->generation, memory_order_relaxed) == out->generation)
                view->slot_count++;
        return true;
}

int ds_live_parse(const void *mem, size_t len, struct ds_live_view *view, char *note,
                  size_t note_len)
{
        const struct ds_live_segment *seg = mem;
        if (len < 2 * sizeof(uint32_t))
                return reject(note, note_len, "%zu bytes, too short for a segment", len);
        if (seg->magic == 0)
                return -EAGAIN; /* created, not yet filled in */
        if (seg->magic != DS_LIVE_MAGIC)
                return reject(note, note_len, "not a dragstrip segment (magic 0x%08x)", seg->magic);
        atomic_thread_fence(memory_order_acquire); /* the header was written before magic */
        /* Version 1 is version 2's header cut short before slot_offset: no slots. */
        bool v1 = seg->version == 1;
        if (!v1 && seg->version != DS_LIVE_VERSION)
                return reject(note, note_len, "layout version %u; this reader knows 1 and %u",
                              seg->version, DS_LIVE_VERSION);
        size_t header = v1 ? offsetof(struct ds_live_segment, slot_offset) : sizeof(*seg);
        if (len < header)
                return reject(note, note_len, "truncated: %zu bytes, the header needs %zu", len,
                              header);
        if (!v1 && (seg->slot_offset < sizeof(*seg) || seg->slot_offset % 8 ||
                    seg->slot_size != sizeof(struct ds_live_slot) ||
                    seg->fault_count != DS_FAULT_COUNT || seg->slot_count > DS_LIVE_SLOTS))
                return reject(note, note_len, "bad layout: slots at %u, %u of %u bytes, %u faults",
                              seg->slot_offset, seg->slot_count, seg->slot_size, seg->fault_count);
        uint64_t need =
            v1 ? header : (uint64_t)seg->slot_offset + (uint64_t)seg->slot_count * seg->slot_size;
        if (need > len)
                return reject(note, note_len, "truncated: %zu bytes, %u slots need %llu", len,
                              seg->slot_count, (unsigned long long)need);
        uint32_t state = atomic_load_explicit(&seg->state, memory_order_acquire);
        if (state > DS_LIVE_DONE || seg->pid <= 0)
                return reject(note, note_len, "bad state %u or pid %d", state, seg->pid);

        memset(view, 0, offsetof(struct ds_live_view, slots));
        view->pid = seg->pid;
        view->state = (enum ds_live_state)state;
        if (!copy_text(view->tool, seg->tool, sizeof(seg->tool)) ||
            !copy_text(view->role, seg->role, sizeof(seg->role)) ||
            !copy_text(view->link, seg->link, sizeof(seg->link)) ||
            !copy_text(view->peer, seg->peer, sizeof(seg->peer)))
                return reject(note, note_len, "a text field is not terminated");
        view->msg_size = seg->msg_size;
        view->start_ns = state == DS_LIVE_STARTING ? 0 : seg->start_ns;
        if (v1)
                return 0;
        view->start_unix_ns = state == DS_LIVE_STARTING ? 0 : seg->start_unix_ns;
        view->end_ns = state == DS_LIVE_DONE ? seg->end_ns : 0;
        read_counters(&seg->messages, &seg->bytes, seg->faults, &view->counters);
        const struct ds_live_slot *slots =
            (const struct ds_live_slot *)((const char *)mem + seg->slot_offset);
        for (uint32_t i = 0; i < seg->slot_count; i++)
                if (!read_slot(&slots[i], i, view))
                        return reject(note, note_len, "slot %u is not a slot", i);
        return 0;
}
