/* xftpd's side of RFC 4217 (explicit FTPS): AUTH TLS, PBSZ, PROT, CCC, and the data
 * connections of a PROT P session. */
#include "ftps.h"

#include "session.h"
#include "xtls.h"

#include <dragstrip/clock.h>
#include <dragstrip/error.h>
#include <dragstrip/serve.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <unistd.h>

int ftps_session_init(struct session *s)
{
        unsigned char id[20];

        if (!s->config->tls)
                return 0;
        /* Random per session: a ticket another session was given resumes nothing here. */
        pid_t pid = getpid();
        memcpy(id, &pid, sizeof(pid));
        if (getrandom(id + sizeof(pid), sizeof(id) - sizeof(pid), 0) !=
            (ssize_t)(sizeof(id) - sizeof(pid)))
                return -EIO;
        return xftp_tls_server_session_scope(s->config->tls, id, sizeof(id));
}

static void cmd_auth(struct session *s, const char *arg)
{
        struct ds_error err;

        if (!s->config->tls) {
                session_reply(s, "502 AUTH: this server has no TLS.");
                return;
        }
        if (xftp_tls_on(&s->ctl)) {
                session_reply(s, "503 AUTH: already TLS.");
                return;
        }
        if (strcasecmp(arg, "TLS") != 0 && strcasecmp(arg, "TLS-C") != 0 &&
            strcasecmp(arg, "SSL") != 0) {
                session_reply(s, "504 AUTH TLS only.");
                return;
        }
        if (s->logged_in) {
                session_reply(s, "503 AUTH comes before the login.");
                return;
        }
        /* What was sent in the clear after AUTH must not pass for words said under TLS. */
        s->in_used = 0;
        s->discarding = false;
        s->user_given = false;
        if (session_reply(s, "234 AUTH TLS: go ahead.") < 0)
                return;
        int left = ds_deadline_left_ms(session_reply_deadline(s));
        if (xftp_tls_start(&s->ctl, 1, s->config->tls, true, NULL, NULL, left > 0 ? left : 1, NULL,
                           &err) < 0) {
                fprintf(stderr, "xftpd: %s: AUTH TLS: %s\n", s->peer_text, err.text);
                atomic_store(&s->ctl_gone, true); /* the connection is closed */
        }
}

static void cmd_prot(struct session *s, const char *arg)
{
        if (!s->pbsz) {
                session_reply(s, "503 PBSZ first.");
        } else if (strcasecmp(arg, "P") == 0) {
                s->prot_p = true;
                session_reply(s, "200 PROT P: data connections are TLS.");
        } else if (strcasecmp(arg, "C") == 0) {
                s->prot_p = false;
                session_reply(s, "200 PROT C: data connections in the clear.");
        } else if (strcasecmp(arg, "S") == 0 || strcasecmp(arg, "E") == 0) {
                session_reply(s, "536 PROT P or C only.");
        } else {
                session_reply(s, "504 PROT P or C only.");
        }
}

bool ftps_command(struct session *s, const struct xftpd_cmd *cmd)
{
        switch (cmd->verb) {
        case V_AUTH:
                cmd_auth(s, cmd->arg);
                return true;
        case V_PBSZ:
                if (!xftp_tls_on(&s->ctl)) {
                        session_reply(s, "503 PBSZ after AUTH TLS.");
                        return true;
                }
                s->pbsz = true;
                session_reply(s, "200 PBSZ=0");
                return true;
        case V_PROT:
                cmd_prot(s, cmd->arg);
                return true;
        case V_CCC:
                session_reply(s, "534 CCC refused: the control connection stays TLS.");
                return true;
        case V_USER:
                if (!s->config->tls_required || xftp_tls_on(&s->ctl))
                        return false;
                session_reply(s, "530 This server requires TLS: AUTH TLS first.");
                return true;
        default:
                return false;
        }
}

void ftps_feat(struct session *s)
{
        if (!s->config->tls)
                return;
        session_reply(s, " AUTH TLS");
        session_reply(s, " PBSZ");
        session_reply(s, " PROT");
}

bool ftps_data_refused(struct session *s)
{
        if (!s->config->tls_required || s->prot_p)
                return false;
        session_reply(s, "521 Data connections must be TLS: PBSZ 0 and PROT P first.");
        return true;
}

int ftps_secure_data(struct session *s, struct xftp_conn *conns, unsigned n, struct ds_error *err)
{
        if (!s->prot_p)
                return 0;
        return xftp_tls_start(conns, n, s->config->tls, true, NULL, &s->ctl, s->config->data_ms,
                              &s->xfer_stop, err);
}
