/* The data connections of a session's transfers and listings: what PASV, EPSV, PORT and
 * EPRT set up (or a MODE E transfer kept), opened when a command needs them, and the
 * replies that end a transfer over them. */
#ifndef XFTPD_CHANNEL_H
#define XFTPD_CHANNEL_H

#include "session.h"

#include "dataconn.h"
#include "xconn.h"

#include <stdatomic.h>
#include <stdbool.h>

/* Forgets the data connection set up (PASV, PORT, RPSV, RPRT), not REST, RANG or ALLO:
 * clients send those before or after PASV. */
void xfer_forget_data(struct session *s);

/* Whether a data connection (or verbs link) may come from, or go to, a host other than
 * the client's: server-to-server copies, only when the server allows them (--fxp), never
 * anonymous. */
bool xfer_third_host_ok(const struct session *s);

/* Whether the server may connect to to for the client (PORT, EPRT, RPRT): else replies
 * 504, naming what would have gone there ("data connections"), and returns false. */
bool xfer_may_connect(struct session *s, const struct xftp_addr *to, const char *what);

/* The data connections' options: socket buffers, deadline, passive ports, and stop (may be
 * NULL), which ends every wait on them. */
struct xftp_data_opts xfer_data_opts(struct session *s, atomic_bool *stop);

/* Whether the n data connections kept from the last transfer serve the next one (no PASV
 * or PORT came since, PROT is unchanged). */
bool xfer_kept_serve(const struct session *s, unsigned n);

/* Opens the n data connections of the next transfer: with reuse (a MODE E transfer), the
 * connections kept from the last one when no PASV or PORT came since (*reused says so);
 * else those PASV or PORT set up. Replies 425 and returns a negative errno when it
 * cannot. */
int xfer_open_data(struct session *s, struct xftp_conn *conns, unsigned n, bool reuse,
                   bool *reused);

/* After data connections that never opened (xfer_open_data or xfer_open_verbs replied
 * 425), once the watch has ended: 226 for an ABOR taken meanwhile, which no other reply
 * answers (it may have come with the command, before the kept connection was found gone,
 * or while a connection was awaited). */
void xfer_reply_unopened(struct session *s);

/* Replies for a transfer cut short (rc, why), and for the ABOR that cut it. local: the
 * server's own disk failed it (a read, a write, a sync), not the data connection. */
void xfer_reply_cut(struct session *s, int rc, bool local, const char *why);

/* A transfer that ended well: "226 text", and a second 226 for an ABOR that came too
 * late to cut it (the client waits for a reply to it). */
void xfer_reply_done(struct session *s, const char *text);

#endif
