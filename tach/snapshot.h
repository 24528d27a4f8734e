/* One look at everything as one JSON line (tach --once --json, tach -i SEC --json).
 * Collections are objects keyed by pid, slot or device name. Rates are MB/s (10^6 bytes),
 * like the tools' own reports. */
#ifndef TACH_SNAPSHOT_H
#define TACH_SNAPSHOT_H

#include <stdint.h>
#include <stdio.h>

#include "machine.h"
#include "sessions.h"

void tach_snapshot_json(FILE *out, const struct tach_sessions *sessions,
                        const struct tach_machine *machine, uint64_t now_ns, double interval_s);

#endif
