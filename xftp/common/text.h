/* Text from a peer, shown to a person: which bytes a terminal or a log viewer would act
 * on. Shared by the client's output and the server's logs. */
#ifndef XFTP_TEXT_H
#define XFTP_TEXT_H

#include <stddef.h>
#include <stdint.h>

/* The length of the UTF-8 character at text[i] (of len bytes) when it is whole, shortest
 * and safe to show: not a C1 control (U+0080..U+009F, which terminals obey as they do
 * ESC) nor a line or paragraph separator (U+2028, U+2029, which viewers break lines at).
 * 0 when text[i] starts no whole character; *shown false when the character is whole but
 * not safe (then the caller skips its length in one). */
size_t xftp_text_char(const unsigned char *text, size_t i, size_t len, int *shown);

/* Rewrites the NUL-terminated s in place: every C0 control, DEL, C1 control and separator
 * becomes one bad byte, and so does every byte that starts no whole UTF-8 character. */
void xftp_text_clean(char *s, char bad);

#endif
