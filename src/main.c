/* balloonmgr: virtio-balloon memory management for libvirt/KVM hosts. argv -> verb. */
#include <errno.h>
#include <getopt.h>
#include <locale.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "conn.h"
#include "domxml.h"
#include "error.h"

#ifndef BM_VERSION
#define BM_VERSION "unknown"
#endif

static const BmVerb *const verbs[] = {&bm_verb_list, &bm_verb_status, &bm_verb_set,
                                      &bm_verb_verify, &bm_verb_configure,
                                      &bm_verb_run, &bm_verb_policy, &bm_verb_agent};

static void usage(FILE *f)
{
    fputs("Usage: balloonmgr [-c URI] [-r] [--proc DIR] VERB [OPTIONS] [ARGS]\n\n"
          "Manage virtio-balloon memory of libvirt domains.\n\n"
          "Verbs:\n",
          f);
    for (size_t i = 0; i < BM_ARRAY_SIZE(verbs); i++)
        fprintf(f, "  %s\n", verbs[i]->synopsis);
    fputs("\nGlobal options (-c and -r also after the verb; verify's -r is its --require):\n"
          "  -c, --connect URI  libvirt connection URI (default: $BALLOONMGR_URI, else\n"
          "                     libvirt's default)\n"
          "  -r, --readonly     monitoring only: libvirt's read-only socket; verbs that\n"
          "                     change domains are refused, the agent only exports\n"
          "      --proc DIR     for status, run and agent: read host memory from DIR\n"
          "                     instead of /proc (as their own --proc)\n"
          "  -h, --help         show this help ('balloonmgr VERB --help' for a verb)\n"
          "  -V, --version      print the version\n"
          "\nExit status: 0 ok, 1 runtime error, 2 bad usage or input, 3 requirement not met,\n"
          "4 the state file is written by another process (run --once, agent).\n"
          "See balloonmgr(8).\n",
          f);
}

/* coreutils' close_stdout(): what a verb printed must have reached stdout (a full disk, a
 * closed pipe, /dev/full). Returns status, or BM_EXIT_FAILURE after reporting "write error on
 * standard output: REASON" when writing or closing failed and status was 0. A stdout that
 * was closed before the start (EBADF, nothing written) is not an error. */
static int close_stdout(int status)
{
    bool failed = ferror(stdout);
    errno = 0;
    if (fclose(stdout) == 0 && !failed)
        return status;
    int err = errno ? errno : bm_cli_stdout_errno();
    if (err == EBADF && !failed)
        return status;
    if (err)
        bm_report(NULL, NULL, "write error on standard output: %s", strerror(err));
    else
        bm_report(NULL, NULL, "write error on standard output");
    return status == BM_EXIT_OK ? BM_EXIT_FAILURE : status;
}

static int run_main(int argc, char **argv);

int main(int argc, char **argv)
{
    /* the character type only (no translations, numbers stay "1.5"): the tables escape a
     * name once, keeping the characters the terminal's locale can show (café in UTF-8) */
    setlocale(LC_CTYPE, "");
    return close_stdout(run_main(argc, argv));
}

static int run_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"connect", required_argument, NULL, 'c'},
        {"readonly", no_argument, NULL, 'r'},
        BM_CLI_OPT_PROC,
        BM_CLI_OPT_HELP,
        {"version", no_argument, NULL, 'V'},
        {0},
    };
    const char *uri = NULL, *proc_dir = NULL;
    bool readonly = false;
    int c;
    argv[0] = (char *)"balloonmgr";
    opterr = 0; /* one line of ours instead of getopt's and the usage */
    while ((c = getopt_long(argc, argv, "+:c:rhV", opts, NULL)) != -1) {
        switch (c) {
        case 'c': uri = optarg; break;
        case 'r': readonly = true; break;
        case BM_OPT_PROC: proc_dir = optarg; break;
        case BM_OPT_HELP: usage(stdout); return BM_EXIT_OK;
        case 'V': puts("balloonmgr " BM_VERSION); return BM_EXIT_OK;
        default: bm_cli_bad_option(NULL, argv, opts, c); return BM_EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        char names[128] = "";
        for (size_t i = 0; i < BM_ARRAY_SIZE(verbs); i++)
            snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s", i ? ", " : "",
                     verbs[i]->name);
        bm_report(NULL, NULL, "expected a verb: %s (see 'balloonmgr --help')", names);
        return BM_EXIT_USAGE;
    }
    if (uri && !*uri) {
        bm_report(NULL, NULL, "-c '': empty URI (leave -c out for libvirt's default)");
        return BM_EXIT_USAGE;
    }
    const char *name = argv[optind];
    const BmVerb *verb = NULL;
    for (size_t i = 0; i < BM_ARRAY_SIZE(verbs); i++)
        if (strcmp(verbs[i]->name, name) == 0)
            verb = verbs[i];
    if (!verb) {
        bm_report(NULL, NULL, "unknown verb '%s' (see 'balloonmgr --help')", name);
        return BM_EXIT_USAGE;
    }

    if (proc_dir && !verb->reads_host) {
        bm_report(verb->name, NULL, "--proc: '%s' reads no host memory (see 'balloonmgr %s --help')",
                  verb->name, verb->name);
        return BM_EXIT_USAGE;
    }

    bm_domxml_init();
    int r = bm_conn_init();
    if (r < 0) {
        bm_report(NULL, NULL, "%s", bm_error_detail(r));
        return BM_EXIT_FAILURE;
    }
    BmGlobal g = {.uri = bm_conn_default_uri(uri), .readonly = readonly, .proc_dir = proc_dir};
    int vargc = argc - optind;
    char **vargv = argv + optind;
    optind = 0; /* restart getopt for the verb (0 also resets GNU getopt's state) */
    bm_error_reset(); /* the verb is an operation of its own */
    return verb->run(&g, vargc, vargv);
}
