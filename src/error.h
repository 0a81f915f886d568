/* The last failure in this thread: library modules return -errno and leave its code and a
 * human-readable reason here, together; the verb that reports the failure reads the reason
 * once, for that code. As libvirt's virResetLastError(), every operation starts by forgetting
 * the last failure (bm_error_reset()), so a failure that set no reason of its own is never
 * reported with an earlier one's. */
#pragma once

/* Sets the code (err) and the detail (printf-style) of the failure. Returns err so callers can
 * `return bm_error(-EINVAL, ...)`. */
int bm_error(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Puts context before the detail of err: "CONTEXT: DETAIL" (context printf-style; DETAIL is
 * bm_error_detail(err)) and stores it with err. Returns err. */
int bm_error_prefix(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The detail stored with err (-errno, or errno: the sign does not matter), or a generic text
 * for the errno when the last failure stored is not err's: none since the last reset, or
 * another code. The string stays valid until the next bm_error() in this thread. */
const char *bm_error_detail(int err);

/* The code of the last failure stored in this thread (negative), 0 when none since the last
 * reset. */
int bm_error_code(void);

/* Forgets the last failure: at the start of each operation (a verb, each job of the agent's
 * loop, each library call a verb reports the failure of). */
void bm_error_reset(void);

/* The kinds of errors counted (balloonmgr_errors_total{kind}, the state file's counters). */
typedef enum {
    BM_ERR_LIBVIRT,
    BM_ERR_APPLY,
    BM_ERR_HOST,
    BM_ERR_STATE,
    BM_ERR_POLICY,
    BM_ERR_PUSH,
    BM_ERR_WEB_CONFIG, /* a web config that could not be (re)loaded or applied */
    BM_ERR_COUNT
} BmErrorKind;

/* Their label values: "libvirt", "apply", "host", "state", "policy", "push", "web_config". */
extern const char *const bm_error_kind_names[BM_ERR_COUNT];
