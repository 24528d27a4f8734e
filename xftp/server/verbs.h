/* The verbs data channel of a session (docs/xftp.md): RPSV and RPRT set it up for the
 * next upload or download, offered in FEAT when an RDMA device serves the address the
 * control connection arrived on (and no --no-rdma), and opened after the 150 reply. */
#ifndef XFTPD_VERBS_H
#define XFTPD_VERBS_H

#include "session.h"

#include <stdbool.h>
#include <stdint.h>

/* The registered buffers of the verbs channel are locked memory, which a session without
 * CAP_IPC_LOCK may hold only up to RLIMIT_MEMLOCK: raised to bytes (--max-mem, which
 * counts them) while the server still may. Best effort: a limit left lower makes the
 * registration fail, and the transfer says so. */
void xfer_verbs_allow_locking(uint64_t bytes);

/* FEAT's lines for the channel, when it is offered. */
void xfer_feat_verbs(struct session *s);

/* RPSV: a verbs listener for the next upload, its port in a 229 reply. */
void xfer_cmd_rpsv(struct session *s);
/* RPRT port, or RPRT |af|host|port| as EPRT names an address: the next download goes over
 * verbs links to port on the client's host, or (server to server, --fxp) on host. Both
 * start making the session's buffers for the streams of the next transfer. */
void xfer_cmd_rprt(struct session *s, const char *arg);

/* The bytes of registered memory n streams take beyond the session's buffers (their
 * control frames, and pools for streams it has none for). */
uint64_t xfer_verbs_need(const struct session *s, unsigned n);
/* Frees the session's buffers and gives their bytes back to the budget (also done by
 * xfer_forget_verbs). */
void xfer_free_verbs_buffers(struct session *s);

/* Whether RPSV or RPRT set up the next transfer. */
bool xfer_verbs_asked(const struct session *s);
/* Forgets what RPSV or RPRT set up (closing RPSV's listener, freeing the buffers). */
void xfer_forget_verbs(struct session *s);

/* Replies 150, then opens the n links of the next transfer: accepts them (an upload,
 * after RPSV) or connects them (a download, after RPRT). A transfer that is not MODE E
 * (blocks false), or that goes the other way than was set up, gets 425 and no 150.
 * Replies 425 and returns a negative errno when the links cannot be had. */
int xfer_open_verbs(struct session *s, struct xftp_conn *conns, unsigned n, bool upload,
                    bool blocks);

#endif
