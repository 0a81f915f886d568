#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The last failure: its code (negative errno, 0 for none) and its detail, kept together. */
static _Thread_local struct {
    int code;
    char detail[2048]; /* what bm_report() prints of a message, whole */
} last;

static int negative(int err)
{
    return err > 0 ? -err : err;
}

int bm_error(int err, const char *fmt, ...)
{
    char detail[sizeof(last.detail)]; /* the arguments may hold the last detail */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    memcpy(last.detail, detail, sizeof(detail));
    last.code = negative(err);
    return err;
}

int bm_error_prefix(int err, const char *fmt, ...)
{
    char cause[sizeof(last.detail)], context[sizeof(last.detail)];
    snprintf(cause, sizeof(cause), "%s", bm_error_detail(err));
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(context, sizeof(context), fmt, ap);
    va_end(ap);
    return bm_error(err, "%s: %s", context, cause);
}

const char *bm_error_detail(int err)
{
    if (last.code != 0 && last.code == negative(err) && last.detail[0])
        return last.detail;
    return strerror(err < 0 ? -err : err);
}

int bm_error_code(void)
{
    return last.code;
}

void bm_error_reset(void)
{
    last.code = 0;
    last.detail[0] = '\0';
}

const char *const bm_error_kind_names[BM_ERR_COUNT] = {"libvirt", "apply", "host",      "state",
                                                       "policy",  "push",  "web_config"};
