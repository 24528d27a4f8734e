/* tach's full-screen view (ncurses): draws what render lays out, takes keys, looks again
 * every view->delay_s. */
#ifndef TACH_SCREEN_H
#define TACH_SCREEN_H

#include <stdatomic.h>

#include "machine.h"
#include "render.h"
#include "sessions.h"

/* Runs until q or *stop. Returns 0, or 1 if the terminal could not be set up. */
int tach_screen_run(struct tach_sessions *sessions, struct tach_machine *machine,
                    struct tach_view *view, const atomic_bool *stop);

#endif
