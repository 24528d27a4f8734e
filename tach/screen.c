/* The ncurses screen. Each frame is drawn whole into curses' buffer and curses sends only
 * what changed, so nothing flickers. */
#include "screen.h"

#include <curses.h>
#include <string.h>

#include <dragstrip/clock.h>

enum { PAIR_TITLE = 1, PAIR_HEADS, PAIR_ERRORS, PAIR_NOTE };

static void colours(void)
{
        if (!has_colors())
                return;
        start_color();
        use_default_colors();
        init_pair(PAIR_TITLE, COLOR_BLACK, COLOR_CYAN);
        init_pair(PAIR_HEADS, COLOR_YELLOW, -1);
        init_pair(PAIR_ERRORS, COLOR_RED, -1);
        init_pair(PAIR_NOTE, COLOR_MAGENTA, -1);
}

static attr_t attr_of(enum tach_style style)
{
        bool colour = has_colors();
        switch (style) {
        case TACH_STYLE_TITLE:
        case TACH_STYLE_KEYS:
                return colour ? COLOR_PAIR(PAIR_TITLE) : A_REVERSE;
        case TACH_STYLE_HEADS:
                return A_BOLD | (colour ? COLOR_PAIR(PAIR_HEADS) : 0);
        case TACH_STYLE_SELECTED:
                return A_REVERSE;
        case TACH_STYLE_ENDED:
                return A_DIM;
        case TACH_STYLE_ERRORS:
                return colour ? COLOR_PAIR(PAIR_ERRORS) : A_BOLD;
        case TACH_STYLE_NOTE:
                return colour ? COLOR_PAIR(PAIR_NOTE) : A_DIM;
        default:
                return A_NORMAL;
        }
}

static void draw(const struct tach_screen *scr)
{
        erase();
        for (unsigned i = 0; i < scr->count && (int)i < LINES; i++) {
                const struct tach_line *line = &scr->lines[i];
                attr_t attr = attr_of(line->style);
                attrset(attr);
                mvaddstr((int)i, 0, line->text);
                /* Bars run the whole width. */
                if (line->style == TACH_STYLE_TITLE || line->style == TACH_STYLE_KEYS ||
                    line->style == TACH_STYLE_SELECTED)
                        mvchgat((int)i, 0, -1, attr, (short)PAIR_NUMBER(attr), NULL);
        }
        attrset(A_NORMAL);
        wnoutrefresh(stdscr);
        doupdate();
}

/* Keeps the selection on the same session as the list is sorted again. */
static void follow(struct tach_sessions *s, struct tach_view *v, const char *segment)
{
        for (unsigned i = 0; i < s->count; i++)
                if (strcmp(s->list[i]->segment, segment) == 0)
                        v->selected = i;
        if (v->selected >= s->count)
                v->selected = s->count ? s->count - 1 : 0;
        if (s->count == 0)
                v->detail = false;
        /* Scroll so the selection shows; the list gets what the screen has beyond the
         * title, heads and keys. */
        unsigned rows = LINES > 6 ? (unsigned)LINES - 4 : 1;
        if (v->selected < v->top)
                v->top = v->selected;
        if (v->selected >= v->top + rows)
                v->top = v->selected - rows + 1;
}

/* One key; returns false for quit. */
static bool key(int ch, struct tach_sessions *s, struct tach_view *v)
{
        if (v->help && ch != ERR && ch != KEY_RESIZE && ch != 'q') {
                v->help = false;
                return true;
        }
        switch (ch) {
        case 'q':
        case 'Q':
                return false;
        case KEY_UP:
        case 'k':
                if (v->selected > 0)
                        v->selected--;
                break;
        case KEY_DOWN:
        case 'j':
                if (v->selected + 1 < s->count)
                        v->selected++;
                break;
        case '\n':
        case '\r':
        case KEY_ENTER:
                v->detail = s->count > 0;
                break;
        case 27: /* Esc */
        case KEY_BACKSPACE:
        case KEY_LEFT:
                v->detail = false;
                break;
        case 'u':
                v->bits = !v->bits;
                break;
        case 'p':
                v->paused = !v->paused;
                break;
        case 's':
                v->sort = (enum tach_sort)((v->sort + 1) % TACH_SORTS);
                break;
        case 'h':
        case '?':
                v->help = true;
                break;
        default:
                break;
        }
        return true;
}

int tach_screen_run(struct tach_sessions *s, struct tach_machine *m, struct tach_view *v,
                    const atomic_bool *stop)
{
        if (!initscr())
                return 1;
        cbreak();
        noecho();
        keypad(stdscr, TRUE);
        curs_set(0);
        set_escdelay(25);
        colours();
        static struct tach_screen scr;
        uint64_t step = (uint64_t)(v->delay_s * 1e9);
        uint64_t next = ds_now_ns(), looked = next;
        char segment[64] = "";
        while (!atomic_load(stop)) {
                uint64_t now = ds_now_ns();
                if (now >= next) {
                        if (!v->paused) {
                                tach_sessions_look(s, now);
                                tach_machine_sample(m, now);
                                looked = now;
                        }
                        next += step;
                        if (next <= now)
                                next = now + step;
                }
                tach_sessions_sort(s, v->sort);
                follow(s, v, segment);
                char wall[16];
                tach_wall_clock(wall, sizeof(wall));
                /* The figures are those of the last look, paused or not. */
                tach_render(&scr, s, m, v, (unsigned)COLS, (unsigned)LINES, looked, wall);
                draw(&scr);
                uint64_t wait_ms = (next - now) / 1000000u + 1;
                timeout(wait_ms > 1000 ? 1000 : (int)wait_ms);
                int ch = getch();
                if (!key(ch, s, v))
                        break;
                snprintf(segment, sizeof(segment), "%s",
                         v->selected < s->count ? s->list[v->selected]->segment : "");
        }
        endwin();
        return 0;
}
