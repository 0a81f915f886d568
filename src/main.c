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

static void usage(FILE *f)
{
    fputs("Usage: balloonmgr [-c URI] [-r] [--proc DIR] VERB [OPTIONS] [ARGS]\n\n"
          "Manage virtio-balloon memory of libvirt domains.\n\n"
          "Verbs ('balloonmgr help VERB' or 'balloonmgr VERB --help' for one):\n",
          f);
    for (size_t i = 0; bm_verbs[i]; i++)
        fprintf(f, "  %-10s %s\n", bm_verbs[i]->name, bm_verbs[i]->brief);
    fputs("\nGlobal options (-c and -r also after the verb; verify's -r is its --require):\n", f);
    bm_cli_print_options(bm_cli_global_options, BM_CLI_GLOBAL_HELP_COLUMN, f);
    fputs("\nExit status: 0 ok, 1 runtime error, 2 bad usage or input, 3 requirement not met,\n"
          "4 the state file is written by another process. The full text: balloonmgr(8).\n",
          f);
}

/* balloonmgr help [VERB] (virsh's help VERB): the usage, or the verb's. */
static int help(int argc, char **argv)
{
    if (argc > 2) {
        bm_report("help", NULL, "too many arguments: '%s' (see 'balloonmgr help')", argv[2]);
        return BM_EXIT_USAGE;
    }
    if (argc < 2) {
        usage(stdout);
        return BM_EXIT_OK;
    }
    const BmVerb *v = bm_verb_find(argv[1]);
    if (!v) {
        char shown[256];
        bm_report("help", NULL, "unknown verb '%s' (see 'balloonmgr help')",
                  bm_printable(argv[1], shown, sizeof(shown)));
        return BM_EXIT_USAGE;
    }
    bm_verb_usage(v, stdout);
    return BM_EXIT_OK;
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

/* The binary's entry. tests/row-runner.c compiles this file with BM_MAIN_ENTRY=bm_main and
 * calls it in a fork per row of the bad-input table (the same code, without an exec). */
#ifndef BM_MAIN_ENTRY
#define BM_MAIN_ENTRY main
#endif
int BM_MAIN_ENTRY(int argc, char **argv);

int BM_MAIN_ENTRY(int argc, char **argv)
{
    /* the character type only (no translations, numbers stay "1.5"): the tables escape a
     * name once, keeping the characters the terminal's locale can show (café in UTF-8) */
    setlocale(LC_CTYPE, "");
    return close_stdout(run_main(argc, argv));
}

static int run_main(int argc, char **argv)
{
    struct option opts[8];
    char shorts[32];
    bm_cli_getopt_tables(bm_cli_global_options, "+:", opts, BM_ARRAY_SIZE(opts), shorts,
                         sizeof(shorts));
    const char *uri = NULL, *proc_dir = NULL;
    bool readonly = false;
    int c;
    argv[0] = (char *)"balloonmgr";
    opterr = 0; /* one line of ours instead of getopt's and the usage */
    while ((c = getopt_long(argc, argv, shorts, opts, NULL)) != -1) {
        switch (c) {
        case 'c': uri = optarg; break;
        case 'r':
        case BM_OPT_READONLY: readonly = true; break;
        case BM_OPT_PROC: proc_dir = optarg; break;
        case BM_OPT_HELP: usage(stdout); return BM_EXIT_OK;
        case 'V': puts("balloonmgr " BM_VERSION); return BM_EXIT_OK;
        default:
            bm_report(NULL, NULL, "%s", bm_error_detail(bm_cli_bad_option(NULL, argv, opts, c)));
            return BM_EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        char names[128] = "";
        for (size_t i = 0; bm_verbs[i]; i++)
            snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s", i ? ", " : "",
                     bm_verbs[i]->name);
        bm_report(NULL, NULL, "expected a verb: %s (see 'balloonmgr help')", names);
        return BM_EXIT_USAGE;
    }
    if (uri && !*uri) {
        bm_report(NULL, NULL, "-c '': empty URI (leave -c out for libvirt's default)");
        return BM_EXIT_USAGE;
    }
    const char *name = argv[optind];
    if (strcmp(name, "help") == 0)
        return help(argc - optind, argv + optind);
    const BmVerb *verb = bm_verb_find(name);
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
