/* Failed logins per client address, across sessions (throttle.h). */
#include "throttle.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <netinet/in.h>
#include <string.h>
#include <unistd.h>

struct throttle_key throttle_key_of(const struct xftp_addr *addr)
{
        struct throttle_key key = {{0}};

        if (addr->ss.ss_family == AF_INET) {
                const struct sockaddr_in *in4 = (const struct sockaddr_in *)&addr->ss;
                key.bytes[10] = key.bytes[11] = 0xff;
                memcpy(&key.bytes[12], &in4->sin_addr, 4);
        } else if (addr->ss.ss_family == AF_INET6) {
                const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&addr->ss;
                bool mapped = IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr);
                memcpy(key.bytes, &in6->sin6_addr, mapped ? 16 : 8);
        }
        return key;
}

/* When the slot may be forgotten: its ban has ended and its last failure is old. */
static uint64_t slot_expiry(const struct throttle *t, const struct throttle_slot *slot)
{
        uint64_t forget = slot->last_ns + t->ban_ns;
        return slot->banned_until > forget ? slot->banned_until : forget;
}

static const struct throttle_slot *find(const struct throttle *t, const struct throttle_key *key,
                                        uint64_t now_ns)
{
        for (unsigned i = 0; i < THROTTLE_SLOTS; i++) {
                const struct throttle_slot *slot = &t->slots[i];
                if (slot->last_ns && slot_expiry(t, slot) > now_ns &&
                    memcmp(&slot->key, key, sizeof(*key)) == 0)
                        return slot;
        }
        return NULL;
}

/* Whether a is a better slot to reuse than b: one not banned before one banned (a flood of
 * single failures from other addresses must not lift a ban), then the one that would be
 * forgotten first. */
static bool reuse_first(const struct throttle *t, const struct throttle_slot *a,
                        const struct throttle_slot *b, uint64_t now_ns)
{
        bool a_banned = a->banned_until > now_ns, b_banned = b->banned_until > now_ns;
        if (a_banned != b_banned)
                return b_banned;
        return slot_expiry(t, a) < slot_expiry(t, b);
}

/* The slot for key: its own, else a free one, else the best to reuse. */
static struct throttle_slot *take(struct throttle *t, const struct throttle_key *key,
                                  uint64_t now_ns)
{
        struct throttle_slot *slot = (struct throttle_slot *)find(t, key, now_ns);
        if (slot)
                return slot;
        slot = &t->slots[0];
        for (unsigned i = 0; i < THROTTLE_SLOTS; i++) {
                struct throttle_slot *other = &t->slots[i];
                if (!other->last_ns || slot_expiry(t, other) <= now_ns) {
                        slot = other;
                        break;
                }
                if (reuse_first(t, other, slot, now_ns))
                        slot = other;
        }
        *slot = (struct throttle_slot){.key = *key};
        return slot;
}

/* Returns whether this failure began a ban. */
static bool count_fail(struct throttle *t, const struct throttle_key *key, uint64_t now_ns)
{
        struct throttle_slot *slot = take(t, key, now_ns);

        if (slot->banned_until > now_ns)
                return false;
        if (slot->last_ns && now_ns - slot->last_ns > t->ban_ns)
                slot->fails = 0;
        slot->last_ns = now_ns ? now_ns : 1;
        if (++slot->fails < t->max_fails)
                return false;
        slot->fails = 0;
        slot->banned_until = now_ns + t->ban_ns;
        return true;
}

int throttle_init(struct throttle *t, unsigned max_fails, int ban_ms)
{
        memset(t, 0, sizeof(*t));
        t->max_fails = max_fails;
        t->ban_ns = (uint64_t)(ban_ms > 0 ? ban_ms : 1) * 1000000u;
        return pipe2(t->report_fd, O_CLOEXEC | O_NONBLOCK) < 0 ? -errno : 0;
}

void throttle_close(struct throttle *t)
{
        close(t->report_fd[0]);
        close(t->report_fd[1]);
}

void throttle_report(int report_fd, const struct xftp_addr *peer)
{
        struct throttle_key key = throttle_key_of(peer);

        /* Smaller than PIPE_BUF: written whole or not at all, never mixed with another's. */
        (void)!write(report_fd, &key, sizeof(key));
}

unsigned throttle_collect(struct throttle *t, uint64_t now_ns)
{
        struct throttle_key keys[64];
        unsigned bans = 0;
        ssize_t got;

        while ((got = read(t->report_fd[0], keys, sizeof(keys))) > 0)
                for (size_t i = 0; i < (size_t)got / sizeof(keys[0]); i++)
                        bans += count_fail(t, &keys[i], now_ns);
        return bans;
}

void throttle_fail(struct throttle *t, const struct xftp_addr *peer, uint64_t now_ns)
{
        struct throttle_key key = throttle_key_of(peer);
        count_fail(t, &key, now_ns);
}

unsigned throttle_banned(const struct throttle *t, const struct xftp_addr *peer, uint64_t now_ns)
{
        struct throttle_key key = throttle_key_of(peer);
        const struct throttle_slot *slot = find(t, &key, now_ns);

        if (!slot || slot->banned_until <= now_ns)
                return 0;
        return (unsigned)((slot->banned_until - now_ns + 999999999u) / 1000000000u);
}
