/* xftpd's settings: the command line and the config file (-c, conf.h), read through one
 * handler per option. */
#ifndef XFTPD_OPTIONS_H
#define XFTPD_OPTIONS_H

#include "dataconn.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct options {
        uint16_t port;
        const char *roots, *users_file, *listen_addr, *run_as, *xferlog, *anon_root;
        const char *config_file, *add_file, *home, *tls_cert, *tls_key;
        char *config_text; /* the file's text, cut into the values above; freed with o */
        bool anonymous, anon_write, allow_root, direct_reads, fxp, syslog, read_only, tls_required;
        bool no_rdma;
        uint16_t pasv_lo, pasv_hi;
        struct xftp_addr pasv_addr;
        size_t block;
        uint64_t max_mem;
        unsigned max_sessions, max_per_host, max_fails, max_host_fails;
        int idle_ms, login_ms, data_ms, ban_ms;
};

/* --no-stats taken out of argv, read with xftpd's options (ds_live_take_option). */
int xftpd_options_take_no_stats(int argc, char **argv);

/* The config file's text (malloc'd), or NULL without -c; exits 1 when it cannot be read. */
char *xftpd_options_read_config(int argc, char **argv);

/* The settings: the defaults, then config_text (NULL: none; o owns it after and its
 * strings point into it and argv), then the command line. Exits 2 on the first bad one,
 * 0 after --help, --version or --add-user. */
void xftpd_options_parse(int argc, char **argv, char *config_text, struct options *o);

#endif
