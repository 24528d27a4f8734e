/* Stripe layout arithmetic: which member holds a logical byte, and how much each holds. */
#include <dragstrip/stripe_layout.h>

bool ds_stripe_layout_valid(const struct ds_stripe_layout *layout)
{
        return layout->width >= 1 && layout->width <= DS_STRIPE_MAX_WIDTH &&
               layout->unit >= DS_STRIPE_MIN_UNIT && layout->unit <= DS_STRIPE_MAX_UNIT &&
               layout->unit % DS_STRIPE_MIN_UNIT == 0;
}

struct ds_stripe_piece ds_stripe_layout_piece(const struct ds_stripe_layout *layout,
                                              uint64_t offset, uint64_t length)
{
        uint64_t unit_index = offset / layout->unit;
        uint64_t within = offset % layout->unit;
        uint64_t room = layout->unit - within;
        struct ds_stripe_piece piece = {
            .member = (uint32_t)(unit_index % layout->width),
            .data_offset = (unit_index / layout->width) * layout->unit + within,
            .length = length < room ? length : room,
        };
        return piece;
}

uint64_t ds_stripe_member_bytes(const struct ds_stripe_layout *layout, uint32_t member,
                                uint64_t file_size)
{
        uint64_t full_units = file_size / layout->unit;
        uint64_t tail = file_size % layout->unit;
        uint64_t rounds = full_units / layout->width;
        uint64_t extra = full_units % layout->width; /* members 0..extra-1 hold one more */
        uint64_t bytes = rounds * layout->unit;

        if (member < extra)
                bytes += layout->unit;
        else if (member == extra)
                bytes += tail;
        return bytes;
}
