/* A window of a file mapped for reading, for a sender that must see a file's bytes in user
 * space (TLS without the kernel's): the encryption reads the page cache itself, where a
 * pread() into a buffer of its own first copied every byte once more.
 *
 * A mapped file that shrinks makes a read past its new end fault (SIGBUS). Reads inside a
 * guard are safe against that: the pages from the fault to the window's end read as zeros
 * from then on, and the guard's end says the file shrank, so that the caller fails what it
 * made of them. */
#ifndef XFTP_FILEMAP_H
#define XFTP_FILEMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes mapped at once, a multiple of any page size: few mmap() calls a GiB, and little
 * address space held. */
#define XFTP_FILEMAP_WINDOW (4u << 20)

struct xftp_filemap {
        const char *data; /* NULL: nothing mapped */
        uint64_t offset;  /* where in the file data[0] lies */
        size_t len;
};

/* An empty map, nothing mapped. */
void xftp_filemap_init(struct xftp_filemap *m);

/* Makes m map the window of fd that holds offset: from offset rounded down to
 * XFTP_FILEMAP_WINDOW, up to a window and no further than the file's end now; its pages
 * are read in now, the next window's are asked for. Returns 1, 0 when offset lies at or
 * past the end of the file (nothing mapped), or a negative errno. */
int xftp_filemap_at(struct xftp_filemap *m, int fd, uint64_t offset);

/* Unmaps what m maps. */
void xftp_filemap_release(struct xftp_filemap *m);

/* From here until xftp_filemap_unguard, this thread's reads of m's window survive the
 * file shrinking under them. Guards do not nest. */
void xftp_filemap_guard(const struct xftp_filemap *m);

/* Ends the guard; true when the file shrank under it: what was read past the new end was
 * zeros, and m is released (its pages are no longer the file's). */
bool xftp_filemap_unguard(struct xftp_filemap *m);

#endif
