/* ds_cli_link (cli.h), apart from the other helpers: it names every link, so a tool that
 * calls it links libibverbs and libpcap, and a tool that does not (xftp, stripe) need not. */
#include <dragstrip/cli.h>

#include <dragstrip/link.h>

#include <err.h>

const struct ds_link_ops *ds_cli_link(const char *name, const char *iface)
{
        const struct ds_link_ops *link = ds_link_find(name);
        if (!link)
                errx(2, "-x: '%s' is not a link this build knows (%s)", name, ds_link_names());
        if ((link->caps & DS_LINK_NEEDS_IFACE) && !iface)
                errx(2, "-x %s needs -d IFACE", link->name);
        return link;
}
