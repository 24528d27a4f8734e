/* The machine's own counters, to hold a tool's figure against: NICs (/proc/net/dev, the
 * counters of /sys/class/net/NAME/statistics in tach's network namespace), RDMA ports
 * (/sys/class/infiniband/DEV/ports/N/counters) and disks (/proc/diskstats). Each device has two
 * counters, in and out (rx/tx, read/write), in bytes. */
#ifndef TACH_MACHINE_H
#define TACH_MACHINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "series.h"

#define TACH_MAX_DEVICES 32

enum tach_device_kind { TACH_NIC, TACH_RDMA, TACH_DISK, TACH_DEVICE_KINDS };

struct tach_device {
        enum tach_device_kind kind;
        char name[40];
        bool present; /* seen in the latest look */
        uint64_t in;  /* bytes received or read */
        uint64_t out; /* bytes sent or written */
        struct tach_series in_rate, out_rate;
};

struct tach_machine {
        struct tach_device devices[TACH_MAX_DEVICES];
        unsigned count;
        /* Where to look; the real paths unless a test points elsewhere. */
        const char *net_dev, *ib_dir, *diskstats;
};

/* Points m at the real /sys and /proc. */
void tach_machine_init(struct tach_machine *m);

/* Reads every counter and samples the rates at t_ns. Devices that vanish are dropped;
 * beyond TACH_MAX_DEVICES the rest are left out. */
void tach_machine_sample(struct tach_machine *m, uint64_t t_ns);

/* One line of /proc/diskstats: the device name and bytes read and written (sectors of
 * 512 bytes). Returns false for a line that is not one. */
bool tach_parse_diskstats(const char *line, char *name, size_t name_len, uint64_t *read_bytes,
                          uint64_t *write_bytes);

/* One interface's line of /proc/net/dev: its name and bytes received and sent. Returns
 * false for a heading or anything else that is not one. */
bool tach_parse_net_dev(const char *line, char *name, size_t name_len, uint64_t *rx_bytes,
                        uint64_t *tx_bytes);

/* The kind's label for people and for JSON: "nic", "rdma", "disk". */
const char *tach_device_kind_name(enum tach_device_kind kind);

#endif
