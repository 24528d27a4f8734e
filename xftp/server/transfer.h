/* What the commands that move a file share: the memory budget of all sessions. */
#ifndef XFTPD_TRANSFER_H
#define XFTPD_TRANSFER_H

#include "session.h"

#include <stdbool.h>
#include <stdint.h>

/* Takes bytes of the memory budget that all sessions share (--max-mem) for what this
 * session is about to allocate, or replies 451: a server never commits more than it
 * was given, however many clients ask at once. */
bool xfer_budget_take(struct session *s, uint64_t bytes);
void xfer_budget_give(struct session *s, uint64_t bytes);

#endif
