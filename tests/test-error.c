/* The last failure of a thread: its code stored with its detail, the detail given only for
 * that code, forgotten at the start of each operation (bm_error_reset(), libvirt's
 * virResetLastError() discipline), so a later failure is never reported with an earlier
 * one's text. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>

#include "error.h"
#include "file.h"
#include "tap.h"
#include "util.h"

static void test_code_with_detail(void)
{
    bm_error_reset();
    ok(bm_error_code() == 0, "no failure after a reset");
    is_str(bm_error_detail(-ENOENT), strerror(ENOENT), "no failure: the errno's own text");

    ok(bm_error(-EINVAL, "size '12X': unknown unit 'X'") == -EINVAL, "bm_error returns its code");
    ok(bm_error_code() == -EINVAL, "the code is stored with the detail");
    is_str(bm_error_detail(-EINVAL), "size '12X': unknown unit 'X'", "the detail of that code");
    is_str(bm_error_detail(EINVAL), "size '12X': unknown unit 'X'", "the sign does not matter");
    is_str(bm_error_detail(-EIO), strerror(EIO), "another code: not its detail");

    ok(bm_error(EACCES, "positive") == EACCES && bm_error_code() == -EACCES,
       "a positive errno is stored negative");
}

/* The failure the issue is about: a later one that set no detail of its own. */
static void test_later_failure(void)
{
    bm_error_reset();
    bm_error(-ENOENT, "state 'a': cannot read: No such file or directory");
    int later = -EACCES; /* returned as -errno, no detail set */
    is_str(bm_error_detail(later), strerror(EACCES), "a later failure of another code: its own text");

    /* the same code: only a reset at the start of the operation tells them apart */
    bm_error(-EIO, "cannot read the balloon: connection reset");
    bm_error_reset(); /* a new operation */
    int same = -EIO;
    is_str(bm_error_detail(same), strerror(EIO), "reset at the start: an earlier failure's text "
           "of the same code is not reported");
    ok(bm_error_code() == 0, "reset: no code stored");
}

static void test_prefix(void)
{
    bm_error_reset();
    bm_error(-EINVAL, "unknown unit 'X'");
    ok(bm_error_prefix(-EINVAL, "--listen '%s'", "a:b") == -EINVAL, "prefix returns its code");
    is_str(bm_error_detail(-EINVAL), "--listen 'a:b': unknown unit 'X'", "prefix before the detail");
    ok(bm_error_code() == -EINVAL, "the prefixed detail keeps the code");

    /* a prefix to a failure that set no detail: before the errno's text, never an older one */
    bm_error(-ENOENT, "an older failure");
    bm_error_prefix(-ENOSPC, "state '%s'", "s.json");
    is_str(bm_error_detail(-ENOSPC), "state 's.json': No space left on device",
           "prefix of a failure without detail: the errno's text");
    ok(bm_error_code() == -ENOSPC, "stored with the new code");
}

/* A library call's detail, then a later call of the same kind. */
static void test_library_calls(void)
{
    bm_error_reset();
    int r = bm_file_open(AT_FDCWD, "/nonexistent/bm-test-error", false, NULL);
    ok(r == -ENOENT && bm_error_code() == -ENOENT, "bm_file_open stores its code");
    is_str(bm_error_detail(r), "cannot read: No such file or directory", "with its detail");
    r = bm_file_check_dir("/");
    ok(r == 0, "a later call that succeeds");
    is_str(bm_error_detail(-ENOTDIR), strerror(ENOTDIR),
           "a later failure of another code is not told the earlier detail");
    r = bm_file_check_dir("/dev/null");
    ok(r == -ENOTDIR, "a later failure");
    is_str(bm_error_detail(r), "is a character device, not a directory", "its own detail");
}

static void *other_thread(void *arg)
{
    (void)arg;
    bm_error(-EPERM, "the other thread's");
    return NULL;
}

static void test_thread_local(void)
{
    bm_error_reset();
    bm_error(-EBUSY, "this thread's");
    pthread_t t;
    pthread_create(&t, NULL, other_thread, NULL);
    pthread_join(t, NULL);
    ok(bm_error_code() == -EBUSY, "another thread's failure is its own");
    is_str(bm_error_detail(-EBUSY), "this thread's", "and so is its detail");
}

int main(void)
{
    test_code_with_detail();
    test_later_failure();
    test_prefix();
    test_library_calls();
    test_thread_local();
    return tap_done();
}
