/* The raw link's BPF filters: each stream's socket passes only its session's frames, and
 * the listener's passes everything else (hellos, strays and junk, which it counts), so a
 * fast stream's data is never copied into the listener's ring. */
#include "link_raw.h"

#include <dragstrip/error.h>

#include <errno.h>
#include <linux/filter.h>
#include <sys/socket.h>

static int filter_attach(int fd, struct sock_filter *code, unsigned len, struct ds_error *err)
{
        struct sock_fprog prog = {.len = (unsigned short)len, .filter = code};
        if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) < 0)
                return ds_fail(err, -errno, "raw: BPF filter");
        return 0;
}

/* Passes only frames of one session. */
int raw_filter_session(int fd, uint32_t session, struct ds_error *err)
{
        struct sock_filter code[] = {
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ETH_HDR + 4),
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, session, 0, 1),
            BPF_STMT(BPF_RET | BPF_K, 0x40000),
            BPF_STMT(BPF_RET | BPF_K, 0),
        };
        return filter_attach(fd, code, 4, err);
}

/* Passes everything but the data frames of the sessions that have sockets of their own,
 * short frames included (a load past the end would make BPF drop them uncounted):
 *   0 ld len; 1 jge 22 else pass; 2 ldh magic; 3 jeq MAGIC else pass; 4 ldb type;
 *   5 jeq DATA else pass; 6 ld session; 7.. jeq session_k then drop; pass: ret all; drop */
int raw_filter_others(int fd, const uint32_t *sessions, unsigned n, struct ds_error *err)
{
        struct sock_filter code[9 + MAX_SESSIONS];
        unsigned pass = 7 + n, drop = 8 + n;
        code[0] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_LEN, 0);
        code[1] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, ETH_HDR + 8, 0,
                                               (uint8_t)(pass - 2));
        code[2] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_H | BPF_ABS, ETH_HDR);
        code[3] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, DS_WIRE_MAGIC, 0,
                                               (uint8_t)(pass - 4));
        code[4] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_B | BPF_ABS, ETH_HDR + 3);
        code[5] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, DS_WIRE_DATA, 0,
                                               (uint8_t)(pass - 6));
        code[6] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ETH_HDR + 4);
        for (unsigned k = 0; k < n; k++)
                code[7 + k] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, sessions[k],
                                                           (uint8_t)(drop - (7 + k) - 1), 0);
        code[pass] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, 0x40000);
        code[drop] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, 0);
        return filter_attach(fd, code, 9 + n, err);
}
