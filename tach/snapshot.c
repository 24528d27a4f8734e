/* The JSON form of a look. */
#include "snapshot.h"

#include <dragstrip/json.h>

#include <time.h>

static double mb(double bytes)
{
        return bytes / 1e6;
}

static void errors(struct ds_json *json, const struct ds_counters *c)
{
        ds_json_open(json, "errors");
        for (int i = 0; i < DS_FAULT_COUNT; i++)
                ds_json_u64(json, ds_fault_name(i), c->faults[i]);
        ds_json_close(json);
}

static void slots(struct ds_json *json, const struct tach_session *t)
{
        ds_json_open(json, "streams");
        for (unsigned i = 0; i < t->view.slot_count; i++) {
                const struct ds_live_view_slot *slot = &t->view.slots[i];
                const struct tach_series *rate = &t->slots[slot->position].rate;
                char key[16];
                snprintf(key, sizeof(key), "%u", slot->position);
                ds_json_open(json, key);
                ds_json_str(json, "kind", slot->kind == DS_SLOT_DISK ? "disk" : "stream");
                ds_json_u64(json, "index", slot->index);
                ds_json_str(json, "name", slot->name);
                ds_json_bool(json, "ended", slot->ended);
                ds_json_u64(json, "messages", slot->counters.messages);
                ds_json_u64(json, "bytes", slot->counters.bytes);
                ds_json_double(json, "MB_per_s", mb(rate->now));
                ds_json_double(json, "peak_MB_per_s", mb(rate->peak));
                errors(json, &slot->counters);
                ds_json_close(json);
        }
        ds_json_close(json);
}

static void session(struct ds_json *json, const struct tach_session *t, uint64_t now_ns)
{
        const struct ds_live_view *w = &t->view;
        char key[16];
        snprintf(key, sizeof(key), "%d", w->pid);
        ds_json_open(json, key);
        ds_json_i64(json, "pid", w->pid);
        ds_json_str(json, "tool", w->tool);
        ds_json_str(json, "role", w->role);
        ds_json_str(json, "link", w->link);
        ds_json_str(json, "peer", w->peer);
        ds_json_str(json, "state",
                    t->ended                      ? "ended"
                    : w->state == DS_LIVE_RUNNING ? "running"
                                                  : "starting");
        ds_json_u64(json, "msg_size", w->msg_size);
        ds_json_double(json, "start_unix_s", (double)w->start_unix_ns / 1e9);
        ds_json_double(json, "seconds", tach_session_seconds(t, now_ns));
        ds_json_u64(json, "messages", w->counters.messages);
        ds_json_u64(json, "bytes", w->counters.bytes);
        ds_json_double(json, "MB_per_s", mb(t->rate.now));
        ds_json_double(json, "avg_MB_per_s", mb(tach_session_average(t, now_ns)));
        ds_json_double(json, "peak_MB_per_s", mb(tach_session_peak(t, now_ns)));
        errors(json, &w->counters);
        slots(json, t);
        ds_json_close(json);
}

static void devices(struct ds_json *json, const struct tach_machine *m, enum tach_device_kind kind,
                    const char *in, const char *out)
{
        char key[32];
        snprintf(key, sizeof(key), "%ss", tach_device_kind_name(kind));
        ds_json_open(json, key);
        for (unsigned i = 0; i < m->count; i++) {
                const struct tach_device *d = &m->devices[i];
                if (d->kind != kind)
                        continue;
                ds_json_open(json, d->name);
                snprintf(key, sizeof(key), "%s_bytes", in);
                ds_json_u64(json, key, d->in);
                snprintf(key, sizeof(key), "%s_bytes", out);
                ds_json_u64(json, key, d->out);
                snprintf(key, sizeof(key), "%s_MB_per_s", in);
                ds_json_double(json, key, mb(d->in_rate.now));
                snprintf(key, sizeof(key), "%s_MB_per_s", out);
                ds_json_double(json, key, mb(d->out_rate.now));
                ds_json_close(json);
        }
        ds_json_close(json);
}

void tach_snapshot_json(FILE *out, const struct tach_sessions *s, const struct tach_machine *m,
                        uint64_t now_ns, double interval_s)
{
        struct ds_json json;
        struct timespec wall;
        clock_gettime(CLOCK_REALTIME, &wall);
        ds_json_begin(&json, out);
        ds_json_str(&json, "tool", "tach");
        ds_json_double(&json, "time_unix_s", (double)wall.tv_sec + (double)wall.tv_nsec / 1e9);
        ds_json_double(&json, "monotonic_s", (double)now_ns / 1e9);
        ds_json_double(&json, "interval_s", interval_s);
        ds_json_open(&json, "sessions");
        for (unsigned i = 0; i < s->count; i++)
                session(&json, s->list[i], now_ns);
        ds_json_close(&json);
        devices(&json, m, TACH_NIC, "rx", "tx");
        devices(&json, m, TACH_RDMA, "rx", "tx");
        devices(&json, m, TACH_DISK, "read", "write");
        ds_json_open(&json, "skipped");
        for (unsigned i = 0; i < s->note_count; i++)
                ds_json_str(&json, s->notes[i].segment, s->notes[i].why);
        ds_json_close(&json);
        ds_json_end(&json);
}
