/* What a server says in text: the entries of its listings (LIST, MLSD), the facts of an
 * MLST line, and printing any of it so that a server's bytes never drive the terminal. */
#ifndef XFTP_LISTING_H
#define XFTP_LISTING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#define LISTING_TIME_MAX 24 /* "YYYYMMDDHHMMSS.fff" and its NUL, with room to spare */

/* What a listing says of one entry. */
struct listing_facts {
        bool is_dir;
        uint64_t size;                   /* UINT64_MAX: not named */
        char modified[LISTING_TIME_MAX]; /* "YYYYMMDDHHMMSS[.f]" (UTC); "": not named */
};

/* One line of a listing (LIST when mlsd is false, else MLSD), cut in place: *name points
 * into line, facts gets what the line says (LIST names no exact time). false for lines
 * that name nothing to copy: then *left_out (if left_out is not NULL) says why an entry
 * that names something is left out (a link, another type, a name with '/'), with *name
 * set; it is NULL for what names nothing (totals, ".", "..", cdir, pdir). */
bool listing_entry(char *line, bool mlsd, char **name, struct listing_facts *facts,
                   const char **left_out);

/* The facts of an MLST/MLSD line ("type=file;size=123;modify=...; name"): true when its
 * type is a file or a directory. Facts it does not name stay unknown. */
bool listing_facts_parse(const char *facts_line, struct listing_facts *facts);

/* The size fact of an MLST/MLSD line ("type=file;size=123; name", RFC 3659 7.2): 0 and
 * *size, or -ENOENT when the line has no valid size fact. */
int listing_size_fact(const char *line, uint64_t *size);

/* The modify fact of an MLST/MLSD facts line ("type=file;modify=20240101120000; name"):
 * 0 and out (room bytes), or -ENOTSUP when it has none that is a time. */
int listing_modify_fact(const char *facts, char *out, size_t room);

/* A time as MDTM and the modify fact spell it (RFC 3659 2.3: YYYYMMDDHHMMSS, maybe a
 * fraction), len bytes of text, copied into out (room bytes). 0, or -ENOTSUP when it is
 * not one. */
int listing_time_copy(const char *text, size_t len, char *out, size_t room);

/* Prints len bytes of a server's text on out with every control character (C0, DEL and
 * C1, raw or UTF-8 encoded) and every byte that is not part of a whole UTF-8 character
 * shown as '?'. With lines, LF and TAB stay and the CR of a CR LF is dropped (a listing); without,
 * the text stays on one line (a reply quoted in an error). */
void listing_show(FILE *out, const char *text, size_t len, bool lines);

#endif
