/* The link registry and the thin wrappers over each backend's table. */
#include <dragstrip/link.h>

#include "link_priv.h"

#include <dragstrip/clock.h>

#include <errno.h>
#include <string.h>

static const struct ds_link_ops *const backends[] = {
#ifdef DS_HAVE_VERBS
    &ds_link_verbs,
#endif
    &ds_link_raw,
    &ds_link_tcp,
    &ds_link_udp,
};

#define BACKEND_COUNT (sizeof(backends) / sizeof(backends[0]))

const struct ds_link_ops *ds_link_find(const char *name)
{
        for (size_t i = 0; i < BACKEND_COUNT; i++)
                if (strcmp(backends[i]->name, name) == 0)
                        return backends[i];
        return NULL;
}

const char *ds_link_names(void)
{
#ifdef DS_HAVE_VERBS
        return "verbs raw tcp udp";
#else
        return "raw tcp udp";
#endif
}

int ds_flow_parse(const char *text, enum ds_flow *flow)
{
        if (strcmp(text, "credit") == 0)
                *flow = DS_FLOW_CREDIT;
        else if (strcmp(text, "none") == 0)
                *flow = DS_FLOW_NONE;
        else
                return -EINVAL;
        return 0;
}

int ds_link_op_parse(const char *text, enum ds_link_op *op)
{
        static const char *const names[] = {"write", "send", "read"};
        for (unsigned i = 0; i < 3; i++) {
                if (strcmp(text, names[i]) == 0) {
                        *op = (enum ds_link_op)(DS_OP_WRITE + i);
                        return 0;
                }
        }
        return -EINVAL;
}

int ds_link_listen(const struct ds_link_ops *ops, struct ds_link_listener **out,
                   const struct ds_link_config *config, struct ds_error *err)
{
        return ops->listen(out, config, err);
}

int ds_link_accept(struct ds_link_listener *listener, struct ds_link **out, int timeout_ms,
                   struct ds_error *err)
{
        return listener->ops->accept(listener, out, timeout_ms, err);
}

void ds_link_unlisten(struct ds_link_listener *listener)
{
        if (listener)
                listener->ops->unlisten(listener);
}

int ds_link_connect(const struct ds_link_ops *ops, struct ds_link **out,
                    const struct ds_link_config *config, struct ds_error *err)
{
        return ops->connect(out, config, err);
}

int ds_link_prepare(struct ds_link *link, const struct ds_link_params *params,
                    struct ds_link_offer *mine, struct ds_error *err)
{
        memset(mine, 0, sizeof(*mine));
        if (!link->ops->prepare)
                return 0;
        return link->ops->prepare(link, params, mine, err);
}

int ds_link_start(struct ds_link *link, const struct ds_link_offer *peer, struct ds_error *err)
{
        if (!link->ops->start)
                return 0;
        return link->ops->start(link, peer, err);
}

int ds_link_send(struct ds_link *link, const struct ds_msg *msgs, unsigned n, struct ds_error *err)
{
        return link->ops->send(link, msgs, n, err);
}

int ds_link_reap(struct ds_link *link, void **bufs, unsigned max, int timeout_ms,
                 struct ds_error *err)
{
        if (!link->ops->reap)
                return 0;
        return link->ops->reap(link, bufs, max, timeout_ms, err);
}

int ds_link_send_ctl(struct ds_link *link, uint8_t type, const void *payload, size_t len,
                     struct ds_error *err)
{
        return link->ops->send_ctl(link, type, payload, len, err);
}

int ds_link_recv(struct ds_link *link, struct ds_msg *msgs, unsigned max, int timeout_ms,
                 struct ds_error *err)
{
        /* A backend may return 0 early, having read frames that made no whole message
         * (fragments of a train, rejects). Callers take 0 to mean silence (sink grants
         * credit for it), so wait out the rest of the time here. */
        uint64_t deadline = timeout_ms > 0 ? ds_now_ns() + (uint64_t)timeout_ms * 1000000u : 0;
        for (;;) {
                int n = link->ops->recv(link, msgs, max, timeout_ms, err);
                if (n != 0 || timeout_ms == 0)
                        return n;
                if (timeout_ms > 0) {
                        uint64_t now = ds_now_ns();
                        if (now >= deadline)
                                return 0;
                        timeout_ms = (int)((deadline - now + 999999u) / 1000000u);
                }
        }
}

void ds_link_release(struct ds_link *link, const struct ds_msg *msgs, unsigned n)
{
        if (n)
                link->ops->release(link, msgs, n);
}

void ds_link_close(struct ds_link *link)
{
        if (link)
                link->ops->close(link);
}

uint64_t ds_link_malformed(const struct ds_link *link)
{
        uint64_t sum = 0;
        for (unsigned i = 0; i < DS_WIRE_REJECT_COUNT; i++)
                sum += link->stats.malformed[i];
        return sum;
}

unsigned link_rx_buffers(uint32_t msg_size)
{
        uint64_t budget = 64u << 20;
        uint64_t n = budget / (msg_size ? msg_size : 1);
        if (n < 4)
                n = 4;
        if (n > 64)
                n = 64;
        return (unsigned)n;
}

uint64_t ds_link_rx_bytes(const struct ds_link *link, uint32_t msg_size)
{
        return (uint64_t)link_rx_buffers(msg_size) * msg_size + link->rx_fixed;
}
