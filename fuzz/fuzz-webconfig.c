/* Fuzzes the web config parser (src/webconfig.h): bm_webconfig_parse on the input as text,
 * checking what a parsed config promises (both TLS files named and resolved, versions in order,
 * users with bcrypt hashes, unique names without ':') and that every error line is
 * "fuzz.yml:LINE:COL: message"; then the check-only call must agree. */
#include <errno.h>

#include "error.h"
#include "diag.h"
#include "fuzz.h"
#include "webconfig.h"

static void check_config(const BmWebConfig *c)
{
    fuzz_assert(c->path && !strcmp(c->path, "dir/fuzz.yml"), "path");
    if (c->tls) {
        fuzz_assert(c->cert_file && c->cert_file[0] && c->key_file && c->key_file[0],
                    "TLS without both files");
        fuzz_assert(c->cert_path && c->key_path, "TLS files not resolved");
        fuzz_assert(c->cert_file[0] == '/' ? !strcmp(c->cert_path, c->cert_file)
                                           : !strncmp(c->cert_path, "dir/", 4),
                    "cert_file '%s' resolved to '%s'", c->cert_file, c->cert_path);
        fuzz_assert(c->cert_line > 0 && c->key_line > 0, "TLS files without a line");
        char *prio = bm_webconfig_tls_priorities(c);
        fuzz_assert(strncmp(prio, "NORMAL:-VERS-ALL:+VERS-TLS1.", 28) == 0, "priorities '%s'",
                    prio);
        free(prio);
    } else {
        fuzz_assert(!c->cert_file && !c->key_file, "TLS files without tls_server_config");
    }
    fuzz_assert(!c->min_version || !c->max_version || c->min_version <= c->max_version,
                "min_version %d above max_version %d", c->min_version, c->max_version);
    fuzz_assert(!c->cert_pem && !c->key_pem, "parse read files");
    for (size_t i = 0; i < c->n_users; i++) {
        fuzz_assert(c->users[i].name[0] && !strchr(c->users[i].name, ':'), "user '%s'",
                    c->users[i].name);
        fuzz_assert(bm_webconfig_is_bcrypt(c->users[i].hash), "hash '%s'", c->users[i].hash);
        for (size_t j = 0; j < i; j++)
            fuzz_assert(strcmp(c->users[i].name, c->users[j].name) != 0, "user '%s' twice",
                        c->users[i].name);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_cstr(data, size);
    BmWebConfig *c = NULL;
    char *errors = NULL;
    bm_error_reset();
    int r = bm_webconfig_parse(text, "dir/fuzz.yml", &c, &errors);
    if (r == 0) {
        fuzz_assert(c && !errors, "success without a config, or with errors");
        check_config(c);
    } else {
        fuzz_assert(r == -EINVAL, "bm_webconfig_parse returned %d", r);
        fuzz_assert(!c, "failure with a config");
        fuzz_assert(errors && errors[0], "failure without errors");
        fuzz_assert(errors[strlen(errors) - 1] == '\n', "errors end without a newline");
        size_t n_lines = 0;
        for (const char *line = errors; *line; line = strchr(line, '\n') + 1) {
            unsigned l, col;
            size_t more;
            n_lines++;
            fuzz_assert((sscanf(line, "dir/fuzz.yml:%u:%u: ", &l, &col) == 2 && l > 0 && col > 0) ||
                            (sscanf(line, "dir/fuzz.yml: %zu more error", &more) == 1 &&
                             more > 0 && !strchr(line, '\n')[1]),
                        "error line '%.80s'", line);
        }
        fuzz_assert(n_lines <= BM_DIAGS_MAX + 1, "%zu error lines", n_lines);
    }
    bm_webconfig_free(c);
    free(errors);
    int r2 = bm_webconfig_parse(text, NULL, NULL, NULL);
    fuzz_assert(r2 == r, "check only returned %d, parse %d", r2, r);
    /* the whole input, NUL bytes included: a NUL byte refuses it whole */
    int r3 = bm_webconfig_parse_n((const char *)data, size, "dir/fuzz.yml", &c, NULL);
    fuzz_assert(r3 == 0 || r3 == -EINVAL, "bm_webconfig_parse_n returned %d", r3);
    fuzz_assert(!memchr(data, '\0', size) || (r3 == -EINVAL && !c),
                "a web config with a NUL byte accepted");
    if (r3 == 0)
        check_config(c);
    bm_webconfig_free(c);
    free(text);
    return 0;
}
