/* xftpd's FTPS (RFC 4217): the commands that turn TLS on and what they gate. */
#ifndef XFTPD_FTPS_H
#define XFTPD_FTPS_H

#include <stdbool.h>

struct ds_error;
struct xftp_conn;
struct session;
struct xftpd_cmd;

/* Gives this session's TLS sessions their own scope (xtls.h). Returns 0 or a negative
 * errno. */
int ftps_session_init(struct session *s);

/* AUTH, PBSZ, PROT and CCC, which may come before the login; and USER, refused (530)
 * with --tls-required before AUTH TLS. Returns true when it answered cmd. */
bool ftps_command(struct session *s, const struct xftpd_cmd *cmd);

/* FEAT's lines for FTPS, where TLS is configured. */
void ftps_feat(struct session *s);

/* With --tls-required, a data connection without PROT P: replies 521 and returns true. */
bool ftps_data_refused(struct session *s);

/* Under PROT P, the TLS handshakes of the data connections just opened, each of which
 * must resume the control connection's session. Returns 0 or a negative errno with err
 * filled and conns closed. */
int ftps_secure_data(struct session *s, struct xftp_conn *conns, unsigned n, struct ds_error *err);

#endif
