/* Laying out tach's screen as styled lines of text. */
#include "render.h"

#include <dragstrip/size.h>

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define RATE_W   9
#define AMOUNT_W 8
#define PEER_MIN 4  /* "PEER" */
#define PEER_MAX 46 /* a full IPv6 address in brackets, and a port */

static const char *scaled(char *buf, size_t len, double value, const char *suffix)
{
        static const char prefixes[] = " kMGTPE";
        unsigned p = 0;
        while (value >= 999.5 && p + 1 < sizeof(prefixes) - 1) {
                value /= 1000;
                p++;
        }
        if (value > 999) /* past exa: nothing real, but it must fit */
                value = 999;
        const char *fmt = value < 9.995   ? "%.2f %.*s%s"
                          : value < 99.95 ? "%.1f %.*s%s"
                                          : "%.0f %.*s%s";
        snprintf(buf, len, fmt, value, p ? 1 : 0, &prefixes[p], suffix);
        return buf;
}

const char *tach_format_rate(char *buf, size_t len, double bytes_per_s, bool bits)
{
        return bits ? scaled(buf, len, bytes_per_s * 8, "b/s")
                    : scaled(buf, len, bytes_per_s, "B/s");
}

const char *tach_format_amount(char *buf, size_t len, uint64_t bytes)
{
        return scaled(buf, len, (double)bytes, "B");
}

const char *tach_format_count(char *buf, size_t len, uint64_t count)
{
        if (count < 100000) {
                snprintf(buf, len, "%llu", (unsigned long long)count);
                return buf;
        }
        return scaled(buf, len, (double)count, "");
}

void tach_format_spark(char *buf, size_t len, const uint8_t *levels, unsigned n, bool utf8)
{
        static const char *const blocks[TACH_SPARK_TOP + 1] = {
            " ", "\u2581", "\u2582", "\u2583", "\u2584", "\u2585", "\u2586", "\u2587", "\u2588"};
        static const char ascii[TACH_SPARK_TOP + 2] = " ._-=+*#@";
        size_t used = 0;
        if (len == 0)
                return;
        buf[0] = '\0';
        for (unsigned i = 0; i < n; i++) {
                unsigned level = levels[i] > TACH_SPARK_TOP ? TACH_SPARK_TOP : levels[i];
                const char *glyph = utf8 ? blocks[level] : (char[]){ascii[level], '\0'};
                size_t g = strlen(glyph);
                if (used + g + 1 > len)
                        break;
                memcpy(buf + used, glyph, g + 1);
                used += g;
        }
}

/* Cuts a line to width columns; a sparkline's block characters are one column in three
 * bytes, and a character is never split. */
static void cut(struct tach_line *line, unsigned width)
{
        if (!line)
                return;
        unsigned cols = 0;
        for (char *p = line->text; *p; p++) {
                if ((*p & 0xc0) == 0x80)
                        continue;
                if (cols++ == width) {
                        *p = '\0';
                        return;
                }
        }
}

/* Adds a line, cut to the screen's width. */
static struct tach_line *add(struct tach_screen *scr, enum tach_style style, const char *fmt, ...)
{
        if (scr->count == TACH_MAX_LINES)
                return NULL;
        struct tach_line *line = &scr->lines[scr->count++];
        line->style = style;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(line->text, sizeof(line->text), fmt, ap);
        va_end(ap);
        cut(line, scr->width);
        return line;
}

struct columns {
        unsigned peer;  /* width of the peer column */
        unsigned spark; /* sparkline columns, 0 for none */
};

/* The peer column is as wide as the longest peer, taking from the sparkline first. */
static struct columns session_columns(unsigned width, const struct tach_sessions *s)
{
        /* marker, tool, role, link, now, avg, peak, total and their spaces take 61 */
        int rest = (int)width - 61;
        int peer = PEER_MIN;
        for (unsigned i = 0; i < s->count; i++) {
                int len = (int)strlen(s->list[i]->view.peer);
                peer = len > peer ? len : peer;
        }
        peer = peer > PEER_MAX ? PEER_MAX : peer > rest - 1 ? rest - 1 : peer;
        peer = peer < PEER_MIN ? PEER_MIN : peer;
        int spark = rest - peer - 1;
        spark = spark > TACH_HISTORY ? TACH_HISTORY : spark;
        return (struct columns){(unsigned)peer, spark >= 4 ? (unsigned)spark : 0};
}

/* A peer (or a stream's or disk's name) in width columns: whole, else without its port,
 * else cut with a '~' to say so. */
static const char *peer_cell(char *buf, size_t len, const char *peer, unsigned width)
{
        if (!peer[0])
                return "-";
        if (strlen(peer) <= width)
                return peer;
        /* host:port or [v6]:port; a bare IPv6 address has colons but no port */
        const char *colon = strrchr(peer, ':');
        bool has_port = colon && colon[1] && strspn(colon + 1, "0123456789") == strlen(colon + 1) &&
                        (strchr(peer, ':') == colon || (peer[0] == '[' && colon[-1] == ']'));
        if (has_port && (size_t)(colon - peer) <= width)
                snprintf(buf, len, "%.*s", (int)(colon - peer), peer);
        else
                snprintf(buf, len, "%.*s~", (int)width - 1, peer);
        return buf;
}

static void spark_of(char *buf, size_t len, const struct tach_series *s, uint64_t now_ns,
                     unsigned width, bool utf8)
{
        uint8_t levels[TACH_HISTORY];
        if (width == 0) {
                buf[0] = '\0';
                return;
        }
        tach_series_spark(s, now_ns, width, levels);
        tach_format_spark(buf, len, levels, width, utf8);
}

static bool any_fault(const struct ds_counters *c)
{
        for (int i = 0; i < DS_FAULT_COUNT; i++)
                if (c->faults[i])
                        return true;
        return false;
}

static uint64_t fault_sum(const struct ds_counters *c)
{
        uint64_t sum = 0;
        for (int i = 0; i < DS_FAULT_COUNT; i++)
                sum += c->faults[i];
        return sum;
}

/* u turns link rates into bits, as links are rated; a disk's rates and every amount stay
 * in bytes, as disks and files are measured. */
static bool over_disks(const struct ds_live_view *w)
{
        for (unsigned i = 0; i < w->slot_count; i++)
                if (w->slots[i].kind == DS_SLOT_DISK)
                        return true;
        return false;
}

static void session_row(struct tach_screen *scr, const struct tach_session *t, bool selected,
                        const struct tach_view *v, struct columns col, uint64_t now_ns)
{
        char now[16], avg[16], peak[16], total[16], spark[TACH_HISTORY * 3 + 1];
        char peer[sizeof(t->view.peer)];
        const struct ds_live_view *w = &t->view;
        enum tach_style style = selected                  ? TACH_STYLE_SELECTED
                                : t->ended                ? TACH_STYLE_ENDED
                                : any_fault(&w->counters) ? TACH_STYLE_ERRORS
                                                          : TACH_STYLE_PLAIN;
        bool bits = v->bits && !over_disks(w);
        spark_of(spark, sizeof(spark), &t->rate, now_ns, col.spark, v->utf8);
        add(scr, style, "%c%-6.6s %-5.5s %-5.5s %-*.*s %*s %*s %*s %*s %s", selected ? '>' : ' ',
            w->tool, w->role, w->link, (int)col.peer, (int)col.peer,
            peer_cell(peer, sizeof(peer), w->peer, col.peer), RATE_W,
            t->ended ? "ended" : tach_format_rate(now, sizeof(now), t->rate.now, bits), RATE_W,
            tach_format_rate(avg, sizeof(avg), tach_session_average(t, now_ns), bits), RATE_W,
            tach_format_rate(peak, sizeof(peak), tach_session_peak(t, now_ns), bits), AMOUNT_W,
            tach_format_amount(total, sizeof(total), w->counters.bytes), spark);
}

static const char *const device_heads[TACH_DEVICE_KINDS][2] = {
    {"RX", "TX"}, {"RX", "TX"}, {"READ", "WRITE"}};
static const char *const device_titles[TACH_DEVICE_KINDS] = {"NIC", "RDMA PORT", "DISK"};

static unsigned machine_rows(struct tach_screen *scr, const struct tach_machine *m,
                             const struct tach_view *v, unsigned width, unsigned room,
                             uint64_t now_ns)
{
        unsigned used = 0;
        int spark_w = ((int)width - 52) / 2 - 1;
        unsigned spark =
            spark_w >= 4 ? (spark_w > TACH_HISTORY ? TACH_HISTORY : (unsigned)spark_w) : 0;
        for (int kind = 0; kind < TACH_DEVICE_KINDS; kind++) {
                unsigned n = 0;
                for (unsigned i = 0; i < m->count; i++)
                        n += m->devices[i].kind == (enum tach_device_kind)kind;
                if (n == 0 || used + 2 > room)
                        continue;
                const char *const *h = device_heads[kind];
                char in_head[24], out_head[24];
                snprintf(in_head, sizeof(in_head), "%s NOW", h[0]);
                snprintf(out_head, sizeof(out_head), "%s NOW", h[1]);
                add(scr, TACH_STYLE_HEADS, " %-13.13s %*s %*s %*s %*s %s%*s%s", device_titles[kind],
                    RATE_W, in_head, RATE_W, out_head, AMOUNT_W, h[0], AMOUNT_W, h[1],
                    spark ? " " : "", spark ? -(int)spark : 0, spark ? h[0] : "",
                    spark ? h[1] : "");
                used++;
                for (unsigned i = 0; i < m->count && used < room; i++) {
                        const struct tach_device *d = &m->devices[i];
                        if (d->kind != (enum tach_device_kind)kind)
                                continue;
                        bool bits = v->bits && d->kind != TACH_DISK;
                        char r_in[16], r_out[16], a_in[16], a_out[16];
                        char s_in[TACH_HISTORY * 3 + 1], s_out[TACH_HISTORY * 3 + 1];
                        spark_of(s_in, sizeof(s_in), &d->in_rate, now_ns, spark, v->utf8);
                        spark_of(s_out, sizeof(s_out), &d->out_rate, now_ns, spark, v->utf8);
                        add(scr, TACH_STYLE_PLAIN, " %-13.13s %*s %*s %*s %*s %s%s%s", d->name,
                            RATE_W, tach_format_rate(r_in, sizeof(r_in), d->in_rate.now, bits),
                            RATE_W, tach_format_rate(r_out, sizeof(r_out), d->out_rate.now, bits),
                            AMOUNT_W, tach_format_amount(a_in, sizeof(a_in), d->in), AMOUNT_W,
                            tach_format_amount(a_out, sizeof(a_out), d->out), s_in,
                            spark ? " " : "", s_out);
                        used++;
                }
        }
        return used;
}

static void title(struct tach_screen *scr, const struct tach_sessions *s, const struct tach_view *v,
                  const char *wall)
{
        add(scr, TACH_STYLE_TITLE, " tach  %u session%s  sort %s  %s  every %gs  %s%s", s->count,
            s->count == 1 ? "" : "s", tach_sort_name(v->sort), v->bits ? "link bits" : "bytes",
            v->delay_s, wall, v->paused ? "  PAUSED" : "");
}

static void keys(struct tach_screen *scr, const struct tach_view *v)
{
        add(scr, TACH_STYLE_KEYS, "%s",
            v->detail ? " Esc back  u bits/bytes  p pause  h help  q quit"
                      : " q quit  Up/Down select  Enter streams  u bits/bytes  p pause  s sort  "
                        "h help");
}

static void help(struct tach_screen *scr)
{
        static const char *const text[] = {
            "tach shows every dragstrip tool running on this machine, from the live counters",
            "each publishes in /dev/shm/dragstrip.<pid>, and the NICs, RDMA ports and disks",
            "beside them, so the tool's figure can be checked against the hardware's.",
            "",
            "  NOW    the rate over the last interval     AVG   since the transfer began,",
            "  PEAK   the highest interval rate seen,           idle stretches left out",
            "         never below AVG                     TOTAL bytes moved",
            "  The sparkline is the last minute, oldest on the left.",
            "  Ended sessions stay a minute, dimmed, with their totals.",
            "",
            "  Up/Down  select a session        Enter  its streams or disks    Esc  back",
            "  u  link rates in bits or bytes   p  pause                      s  sort order",
            "  h  this help                     q  quit",
        };
        for (size_t i = 0; i < sizeof(text) / sizeof(text[0]); i++)
                add(scr, TACH_STYLE_PLAIN, " %s", text[i]);
}

static void detail(struct tach_screen *scr, const struct tach_session *t, const struct tach_view *v,
                   unsigned width, unsigned room, uint64_t now_ns)
{
        const struct ds_live_view *w = &t->view;
        char now[16], avg[16], peak[16], total[16];
        char size[16];
        bool bits = v->bits && !over_disks(w);
        add(scr, t->ended ? TACH_STYLE_ENDED : TACH_STYLE_PLAIN,
            " %s %s over %s, peer %s, pid %d, %s messages%s", w->tool, w->role, w->link,
            w->peer[0] ? w->peer : "-", w->pid,
            w->msg_size ? ds_size_format(size, sizeof(size), w->msg_size) : "varied",
            t->ended ? ", ended" : "");
        add(scr, TACH_STYLE_PLAIN, " now %s  avg %s  peak %s  total %s in %llu messages",
            tach_format_rate(now, sizeof(now), t->rate.now, bits),
            tach_format_rate(avg, sizeof(avg), tach_session_average(t, now_ns), bits),
            tach_format_rate(peak, sizeof(peak), tach_session_peak(t, now_ns), bits),
            tach_format_amount(total, sizeof(total), w->counters.bytes),
            (unsigned long long)w->counters.messages);
        char faults[160] = " errors:";
        for (int i = 0; i < DS_FAULT_COUNT; i++) {
                size_t used = strlen(faults);
                snprintf(faults + used, sizeof(faults) - used, " %s %llu", ds_fault_name(i),
                         (unsigned long long)w->counters.faults[i]);
        }
        add(scr, any_fault(&w->counters) ? TACH_STYLE_ERRORS : TACH_STYLE_PLAIN, "%s", faults);
        add(scr, TACH_STYLE_PLAIN, "%s", "");
        /* kind, number, rates, total, messages, errors and their spaces take 61 */
        int name = (int)width - 82;
        name = name < 10 ? 10 : name > 24 ? 24 : name;
        int spark_w = (int)width - 62 - name;
        unsigned spark =
            spark_w >= 4 ? (spark_w > TACH_HISTORY ? TACH_HISTORY : (unsigned)spark_w) : 0;
        add(scr, TACH_STYLE_HEADS, " %-6s %4s %-*s %*s %*s %*s %10s %6s %s", "KIND", "#", name,
            "NAME", RATE_W, "NOW", RATE_W, "PEAK", AMOUNT_W, "TOTAL", "MESSAGES", "ERRORS",
            spark >= 11 ? "LAST MINUTE"
            : spark     ? "MINUTE"
                        : "");
        /* Streams still moving first, then ended ones (a sink keeps those of past runs). */
        unsigned shown = 0;
        for (unsigned k = 0; k < 2 * w->slot_count && shown + 5 < room; k++) {
                const struct ds_live_view_slot *slot = &w->slots[k % w->slot_count];
                if (slot->ended != (k >= w->slot_count))
                        continue;
                shown++;
                const struct tach_series *rate = &t->slots[slot->position].rate;
                char spark_text[TACH_HISTORY * 3 + 1];
                spark_of(spark_text, sizeof(spark_text), rate, now_ns, spark, v->utf8);
                enum tach_style style = slot->ended || t->ended      ? TACH_STYLE_ENDED
                                        : any_fault(&slot->counters) ? TACH_STYLE_ERRORS
                                                                     : TACH_STYLE_PLAIN;
                char number[12], messages[16], errors[16], slot_name[sizeof(slot->name)];
                bool slot_bits = v->bits && slot->kind != DS_SLOT_DISK;
                snprintf(number, sizeof(number), "%u", slot->index);
                add(scr, style, " %-6s %4.4s %-*.*s %*s %*s %*s %10s %6s %s",
                    slot->kind == DS_SLOT_DISK ? "disk" : "stream", number, name, name,
                    peer_cell(slot_name, sizeof(slot_name), slot->name, (unsigned)name), RATE_W,
                    slot->ended ? "ended"
                                : tach_format_rate(now, sizeof(now), rate->now, slot_bits),
                    RATE_W, tach_format_rate(peak, sizeof(peak), rate->peak, slot_bits), AMOUNT_W,
                    tach_format_amount(total, sizeof(total), slot->counters.bytes),
                    tach_format_count(messages, sizeof(messages), slot->counters.messages),
                    tach_format_count(errors, sizeof(errors), fault_sum(&slot->counters)),
                    spark_text);
        }
        if (w->slot_count == 0)
                add(scr, TACH_STYLE_PLAIN, " %s",
                    "(no streams published: the session's total is its one stream)");
        else if (shown < w->slot_count)
                add(scr, TACH_STYLE_PLAIN, " ... %u more", w->slot_count - shown);
}

void tach_render(struct tach_screen *scr, const struct tach_sessions *s,
                 const struct tach_machine *m, const struct tach_view *v, unsigned width,
                 unsigned height, uint64_t now_ns, const char *wall)
{
        scr->count = 0;
        scr->width = width;
        if (height < 3)
                height = 3;
        if (height > TACH_MAX_LINES)
                height = TACH_MAX_LINES;
        title(scr, s, v, wall);
        unsigned body = height - 2; /* title and keys */
        if (v->help) {
                help(scr);
        } else if (v->detail && v->selected < s->count) {
                detail(scr, s->list[v->selected], v, width, body, now_ns);
        } else {
                struct columns col = session_columns(width, s);
                add(scr, TACH_STYLE_HEADS, " %-6s %-5s %-5s %-*s %*s %*s %*s %*s %s", "TOOL",
                    "ROLE", "LINK", (int)col.peer, "PEER", RATE_W, "NOW", RATE_W, "AVG", RATE_W,
                    "PEAK", AMOUNT_W, "TOTAL", col.spark ? "LAST MINUTE" : "");
                /* Sessions first, up to what leaves room for a few machine lines. */
                unsigned left = body - 1;
                unsigned room = s->count < left ? s->count : left;
                if (s->count == 0) {
                        add(scr, TACH_STYLE_PLAIN, " %s", "(no dragstrip tool is running)");
                        left--;
                }
                for (unsigned i = v->top; i < s->count && i < v->top + room; i++, left--)
                        session_row(scr, s->list[i], i == v->selected, v, col, now_ns);
                if (left > 2) {
                        add(scr, TACH_STYLE_PLAIN, "%s", "");
                        left--;
                        left -= machine_rows(scr, m, v, width, left, now_ns);
                }
                for (unsigned i = 0; i < s->note_count && left > 0; i++, left--)
                        add(scr, TACH_STYLE_NOTE, " skipped %s: %s", s->notes[i].segment,
                            s->notes[i].why);
        }
        while (scr->count < height - 1)
                add(scr, TACH_STYLE_PLAIN, "%s", "");
        scr->count = height - 1 < scr->count ? height - 1 : scr->count;
        keys(scr, v);
}

void tach_wall_clock(char *buf, size_t len)
{
        time_t now = time(NULL);
        struct tm tm;
        if (!localtime_r(&now, &tm) || strftime(buf, len, "%H:%M:%S", &tm) == 0)
                snprintf(buf, len, "--:--:--");
}
