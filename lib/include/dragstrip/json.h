/* A small streaming JSON writer: one object per line, keys in the order written. Inside
 * an array, members are written with a NULL key. */
#ifndef DRAGSTRIP_JSON_H
#define DRAGSTRIP_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define DS_JSON_MAX_DEPTH 8

struct ds_json {
        FILE *out;
        int depth;
        bool has_member[DS_JSON_MAX_DEPTH];
        bool is_array[DS_JSON_MAX_DEPTH];
};

/* Starts the outermost object on out. */
void ds_json_begin(struct ds_json *json, FILE *out);
/* Closes every open object, ends the line and flushes, so each report is one line. */
void ds_json_end(struct ds_json *json);

void ds_json_str(struct ds_json *json, const char *key, const char *value); /* escaped */
void ds_json_u64(struct ds_json *json, const char *key, uint64_t value);
void ds_json_i64(struct ds_json *json, const char *key, int64_t value);
void ds_json_double(struct ds_json *json, const char *key, double value); /* NaN/inf: null */
void ds_json_bool(struct ds_json *json, const char *key, bool value);
/* A nested object under key; close it with ds_json_close. */
void ds_json_open(struct ds_json *json, const char *key);
/* An array under key, its elements written with a NULL key; close it with ds_json_close. */
void ds_json_open_array(struct ds_json *json, const char *key);
/* Closes the innermost open object or array. */
void ds_json_close(struct ds_json *json);

#endif
