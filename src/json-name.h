/* Values of the JSON balloonmgr writes (output, state file): names always valid UTF-8 (json-c
 * escapes control characters but passes other bytes through, so a domain name that is not
 * UTF-8 would make the whole output invalid); a number nobody reported as null. */
#pragma once

#include <json-c/json.h>
#include <stdlib.h>

#include "util.h"

/* A JSON string of s with bytes that are not valid UTF-8 replaced by U+FFFD. */
static inline json_object *bm_json_name(const char *s)
{
    char *t = bm_utf8_sanitize(s);
    json_object *o = json_object_new_string(t);
    free(t);
    return o;
}

/* null (NULL) for BM_ABSENT, else v as a JSON integer, at most BM_COUNT_MAX (JSON readers
 * take an int64: what is reported is bounded there where it enters, bm_reported()). */
static inline json_object *bm_json_u64_or_null(uint64_t v)
{
    if (!bm_present(v))
        return NULL;
    return json_object_new_uint64(v > BM_COUNT_MAX ? BM_COUNT_MAX : v);
}
