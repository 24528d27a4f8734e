/* Failed logins counted per client address across sessions. Each session is a process of
 * its own (main.c), so a guesser that opens session after session would meet only the
 * per-session limit (--max-fails); here the sessions report every failed login over a
 * pipe to the listening process, which refuses new sessions from an address with
 * --max-host-fails recent failures for --ban-time, and ends the logins of those already
 * open from it: their next PASS gets a 421.
 *
 * An address is an IPv4 address, or an IPv6 /64 (one site's prefix: a host that owns a
 * /64 could otherwise take a fresh address for every guess). The table has a fixed number
 * of slots, so peers coming from many addresses cannot make it grow; when it is full a slot
 * without a ban is reused first (the one that would be forgotten soonest), so a flood from
 * other addresses cannot lift a ban unless every slot holds one. */
#ifndef XFTPD_THROTTLE_H
#define XFTPD_THROTTLE_H

#include <stdint.h>

#include "dataconn.h"

#define THROTTLE_SLOTS 1024

/* An address as the table keys it: IPv4 as ::ffff:a.b.c.d, IPv6 cut to its /64. */
struct throttle_key {
        uint8_t bytes[16];
};

/* The key of addr: the one notion of "one client address" of xftpd, also what
 * --max-per-host counts (guard.c). */
struct throttle_key throttle_key_of(const struct xftp_addr *addr);

struct throttle_slot {
        struct throttle_key key;
        unsigned fails;        /* failures in a row, none further apart than ban_ns */
        uint64_t last_ns;      /* the latest failure; 0: a free slot */
        uint64_t banned_until; /* monotonic ns; 0 or past: not banned */
};

struct throttle {
        unsigned max_fails; /* failures from one address before its ban */
        uint64_t ban_ns;    /* how long a ban lasts, and how long a failure is remembered */
        int report_fd[2];   /* the pipe: sessions write [1], the listener reads [0] */
        struct throttle_slot slots[THROTTLE_SLOTS];
};

/* Sets up an empty table and its pipe (both ends non-blocking, closed on exec). Returns 0
 * or a negative errno. */
int throttle_init(struct throttle *t, unsigned max_fails, int ban_ms);
void throttle_close(struct throttle *t);

/* In a session: tells the listener about a failed login from peer. Never blocks; a report
 * that finds the pipe full is dropped (the listener empties it ten times a second). */
void throttle_report(int report_fd, const struct xftp_addr *peer);

/* In the listener: counts every report waiting in the pipe. Returns how many bans began,
 * so that the sessions already open from those addresses can be told (main.c). */
unsigned throttle_collect(struct throttle *t, uint64_t now_ns);

/* Counts one failed login from peer at now_ns. Failures during a ban do not count (they
 * come from sessions that started before it, which the listener tells of the ban). */
void throttle_fail(struct throttle *t, const struct xftp_addr *peer, uint64_t now_ns);

/* Seconds (rounded up) until peer may start a session again, 0 when it may now. */
unsigned throttle_banned(const struct throttle *t, const struct xftp_addr *peer, uint64_t now_ns);

#endif
