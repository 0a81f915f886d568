/* Names in JSON output: always valid UTF-8 (json-c escapes control characters but passes other
 * bytes through, so a domain name that is not UTF-8 would make the whole output invalid). */
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
