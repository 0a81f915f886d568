#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char detail[1024];

int bm_error(int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    return err;
}

int bm_error_prefix(int err, const char *fmt, ...)
{
    char cause[sizeof(detail)], context[sizeof(detail)];
    snprintf(cause, sizeof(cause), "%s", bm_error_detail(err));
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(context, sizeof(context), fmt, ap);
    va_end(ap);
    return bm_error(err, "%s: %s", context, cause);
}

const char *bm_error_detail(int err)
{
    if (detail[0])
        return detail;
    return strerror(err < 0 ? -err : err);
}

void bm_error_clear(void)
{
    detail[0] = '\0';
}

const char *const bm_error_kind_names[BM_ERR_COUNT] = {"libvirt", "apply", "host",      "state",
                                                       "policy",  "push",  "web_config"};
