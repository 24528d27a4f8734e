/* libFuzzer target for xftpd's command parser and the path folding every file command
 * goes through. Besides memory errors it checks what they promise: a parsed command has a
 * known verb and an argument without control bytes that fits the line; a refusal is one of
 * the codes the header names with a reply starting with that code; a folded path has no
 * empty, "." or ".." component, no leading '/', and never names the store's own files. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_path(const char *cwd, const char *arg, char *out, size_t len)
{
        if (xftp_store_path(cwd, arg, out, len) != 0)
                return;
        if (out[0] == '/' || strlen(out) >= len)
                __builtin_trap();
        for (const char *part = out; *part;) {
                size_t n = strcspn(part, "/");
                if (n == 0 || (n == 1 && part[0] == '.') ||
                    (n == 2 && part[0] == '.' && part[1] == '.') ||
                    strncmp(part, XFTP_STORE_OWN_PREFIX, strlen(XFTP_STORE_OWN_PREFIX)) == 0)
                        __builtin_trap();
                part += n;
                part += *part == '/';
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static struct xftpd_cmd cmd;
        static char path[XFTP_STORE_PATH_MAX], again[XFTP_STORE_PATH_MAX];
        const char *reply = NULL;
        char code[5];

        int rc = xftpd_cmd_parse((const char *)data, size, &cmd, &reply);
        if (rc != 0) {
                snprintf(code, sizeof(code), "%d ", rc);
                if ((rc != 500 && rc != 501 && rc != 502 && rc != 504) || !reply ||
                    strncmp(reply, code, 4) != 0)
                        __builtin_trap();
                return 0;
        }
        if (cmd.verb >= V_COUNT || cmd.arg_len >= XFTPD_LINE_MAX || strlen(cmd.arg) != cmd.arg_len)
                __builtin_trap();
        for (size_t i = 0; i < cmd.arg_len; i++)
                if ((unsigned char)cmd.arg[i] < 0x20 || cmd.arg[i] == 0x7f)
                        __builtin_trap();
        /* The argument as a path, from the root and from a folded path of itself. */
        check_path("", cmd.arg, path, sizeof(path));
        if (xftp_store_path("", cmd.arg, path, sizeof(path)) == 0)
                check_path(path, cmd.arg, again, sizeof(again));
        check_path("a/b", cmd.arg, path, 64);
        /* MFMT's time: taken only with a path after it, inside the argument. */
        struct xftpd_mfmt mfmt;
        if (xftpd_parse_mfmt(cmd.arg, &mfmt) == 0 &&
            (mfmt.path != cmd.arg + mfmt.time_len + 1 || !mfmt.path[0] || mfmt.nsec >= 1000000000 ||
             mfmt.nsec < 0))
                __builtin_trap();
        return 0;
}
