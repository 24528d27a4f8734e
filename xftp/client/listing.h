/* What a server says in text: the entries of its listings (LIST, MLSD), the facts of an
 * MLST line, and printing any of it so that a server's bytes never drive the terminal. */
#ifndef XFTP_LISTING_H
#define XFTP_LISTING_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* One line of a listing (LIST when mlsd is false, else MLSD), cut in place: *name points
 * into line. false for lines that name nothing to copy (totals, ".", "..", links, names
 * with '/', unknown types). */
bool listing_entry(char *line, bool mlsd, char **name, bool *is_dir);

/* The size fact of an MLST/MLSD line ("type=file;size=123; name", RFC 3659 7.2): 0 and
 * *size, or -ENOENT when the line has no valid size fact. */
int listing_size_fact(const char *line, uint64_t *size);

/* Prints len bytes of a server's text on out with every control character (C0, DEL and
 * C1, raw or UTF-8 encoded) and every byte that is not part of a whole UTF-8 character
 * shown as '?'. With lines, LF and TAB stay and the CR of a CR LF is dropped (a listing); without,
 * the text stays on one line (a reply quoted in an error). */
void listing_show(FILE *out, const char *text, size_t len, bool lines);

#endif
