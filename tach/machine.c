/* NIC, RDMA port and disk counters from /sys and /proc. */
#include "machine.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void tach_machine_init(struct tach_machine *m)
{
        memset(m, 0, sizeof(*m));
        m->net_dev = "/proc/net/dev";
        m->ib_dir = "/sys/class/infiniband";
        m->diskstats = "/proc/diskstats";
}

const char *tach_device_kind_name(enum tach_device_kind kind)
{
        static const char *const names[TACH_DEVICE_KINDS] = {"nic", "rdma", "disk"};
        return (unsigned)kind < TACH_DEVICE_KINDS ? names[kind] : "?";
}

static bool read_u64(const char *path, uint64_t *value)
{
        FILE *f = fopen(path, "re");
        if (!f)
                return false;
        bool ok = fscanf(f, "%" SCNu64, value) == 1;
        fclose(f);
        return ok;
}

/* The device of that kind and name, added if new and there is room; NULL if not. */
static struct tach_device *device(struct tach_machine *m, enum tach_device_kind kind,
                                  const char *name)
{
        for (unsigned i = 0; i < m->count; i++)
                if (m->devices[i].kind == kind && strcmp(m->devices[i].name, name) == 0)
                        return &m->devices[i];
        if (m->count == TACH_MAX_DEVICES)
                return NULL;
        struct tach_device *d = &m->devices[m->count++];
        memset(d, 0, sizeof(*d));
        d->kind = kind;
        snprintf(d->name, sizeof(d->name), "%.*s", (int)sizeof(d->name) - 1, name);
        return d;
}

static void seen(struct tach_machine *m, enum tach_device_kind kind, const char *name, uint64_t in,
                 uint64_t out)
{
        if (in == 0 && out == 0)
                return; /* never used: nothing to check a tool against */
        struct tach_device *d = device(m, kind, name);
        if (!d)
                return;
        d->present = true;
        d->in = in;
        d->out = out;
}

typedef bool (*line_parser)(const char *line, char *name, size_t name_len, uint64_t *in,
                            uint64_t *out);

/* A partition's I/O is its disk's too: only whole disks, those in /sys/block, count. */
static bool whole_disk(const char *name)
{
        char path[300];
        snprintf(path, sizeof(path), "/sys/block/%s", name);
        return access(path, F_OK) == 0;
}

/* Every line of a /proc table that parses is a device of that kind. */
static void look_table(struct tach_machine *m, const char *path, enum tach_device_kind kind,
                       line_parser parse)
{
        FILE *f = fopen(path, "re");
        if (!f)
                return;
        char line[512];
        while (fgets(line, sizeof(line), f)) {
                char name[40];
                uint64_t in, out;
                if (parse(line, name, sizeof(name), &in, &out) &&
                    (kind != TACH_DISK || whole_disk(name)))
                        seen(m, kind, name, in, out);
        }
        fclose(f);
}

bool tach_parse_net_dev(const char *line, char *name, size_t name_len, uint64_t *rx_bytes,
                        uint64_t *tx_bytes)
{
        const char *colon = strchr(line, ':');
        if (!colon)
                return false;
        const char *start = line;
        while (*start == ' ')
                start++;
        size_t n = (size_t)(colon - start);
        if (n == 0 || n >= name_len)
                return false;
        uint64_t f[9];
        /* rx: bytes packets errs drop fifo frame compressed multicast; tx: bytes ... */
        if (sscanf(colon + 1,
                   "%" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64
                   " %" SCNu64 " %" SCNu64 " %" SCNu64,
                   &f[0], &f[1], &f[2], &f[3], &f[4], &f[5], &f[6], &f[7], &f[8]) != 9)
                return false;
        memcpy(name, start, n);
        name[n] = '\0';
        *rx_bytes = f[0];
        *tx_bytes = f[8];
        return true;
}

/* port_rcv_data and port_xmit_data count 4-byte words. */
static void look_rdma_ports(struct tach_machine *m, const char *dev)
{
        char path[512];
        snprintf(path, sizeof(path), "%s/%s/ports", m->ib_dir, dev);
        DIR *dir = opendir(path);
        if (!dir)
                return;
        struct dirent *e;
        while ((e = readdir(dir)) != NULL) {
                if (e->d_name[0] == '.')
                        continue;
                uint64_t rx, tx;
                snprintf(path, sizeof(path), "%s/%s/ports/%s/counters/port_rcv_data", m->ib_dir,
                         dev, e->d_name);
                if (!read_u64(path, &rx))
                        continue;
                snprintf(path, sizeof(path), "%s/%s/ports/%s/counters/port_xmit_data", m->ib_dir,
                         dev, e->d_name);
                if (!read_u64(path, &tx))
                        continue;
                char name[40];
                snprintf(name, sizeof(name), "%.24s/%.8s", dev, e->d_name);
                seen(m, TACH_RDMA, name, rx * 4, tx * 4);
        }
        closedir(dir);
}

static void look_rdma(struct tach_machine *m)
{
        DIR *dir = opendir(m->ib_dir);
        if (!dir)
                return;
        struct dirent *e;
        while ((e = readdir(dir)) != NULL)
                if (e->d_name[0] != '.')
                        look_rdma_ports(m, e->d_name);
        closedir(dir);
}

bool tach_parse_diskstats(const char *line, char *name, size_t name_len, uint64_t *read_bytes,
                          uint64_t *write_bytes)
{
        unsigned major, minor;
        char dev[64];
        uint64_t f[7];
        /* major minor name reads merged sectors ms writes merged sectors ... */
        if (sscanf(line,
                   "%u %u %63s %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64
                   " %" SCNu64,
                   &major, &minor, dev, &f[0], &f[1], &f[2], &f[3], &f[4], &f[5], &f[6]) != 10)
                return false;
        if (f[2] > UINT64_MAX / 512 || f[6] > UINT64_MAX / 512)
                return false;
        if (strlen(dev) >= name_len)
                return false;
        memcpy(name, dev, strlen(dev) + 1);
        *read_bytes = f[2] * 512;
        *write_bytes = f[6] * 512;
        return true;
}

void tach_machine_sample(struct tach_machine *m, uint64_t t_ns)
{
        for (unsigned i = 0; i < m->count; i++)
                m->devices[i].present = false;
        /* /proc/net/dev holds the counters of /sys/class/net/NAME/statistics, but of tach's
         * own network namespace: /sys shows the namespace of whoever mounted it. */
        look_table(m, m->net_dev, TACH_NIC, tach_parse_net_dev);
        look_rdma(m);
        look_table(m, m->diskstats, TACH_DISK, tach_parse_diskstats);
        unsigned kept = 0;
        for (unsigned i = 0; i < m->count; i++) {
                struct tach_device *d = &m->devices[i];
                if (!d->present)
                        continue;
                tach_series_sample(&d->in_rate, t_ns, d->in);
                tach_series_sample(&d->out_rate, t_ns, d->out);
                if (kept != i)
                        m->devices[kept] = *d;
                kept++;
        }
        m->count = kept;
}
